// The SIGKILL test, shared by crash_test.ts (50 kills) and crash_soak.ts (as many as asked):
// a child process saves checkpoints in a loop and is killed at random moments; after each kill
// the directory must open, latest() must load and verify, and no committed step may be lost.

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Checkpoint, CheckpointInput, TensorInput } from "../../mod.ts";
import { CheckpointManager, type CheckpointManagerOptions } from "../../src/manager/mod.ts";
import { exact } from "./_helpers.ts";
import { prng } from "../_util.ts";

/** The retention rules of the crash runs: small, so that retention deletes on nearly every save. */
export const POLICY = { maxToKeep: 3, keepEvery: 10, best: { metric: "loss", mode: "min" as const, keep: 2 } };

/** Manager options for a mode. */
export function crashOptions(mode: "full" | "incremental"): CheckpointManagerOptions {
  return { ...POLICY, incremental: mode === "incremental" };
}

/** The loss recorded at a step: jumps around, so the best checkpoints are scattered. */
export function lossAt(step: number): number {
  return ((step * 37) % 101) / 100;
}

/** The checkpoint saved at a step: a frozen tensor, and a trained one whose size and values depend on the step. */
export function crashCheckpoint(step: number): CheckpointInput {
  const frozen = new Float32Array(1 << 16).map((_, i) => i % 251);
  const trained = new Float32Array(1 + ((step * 7919) % (1 << 17))).fill(step);
  const tensors: TensorInput[] = [
    { name: "frozen", dtype: "float32", shape: [frozen.length], data: frozen },
    { name: "trained", dtype: "float32", shape: [trained.length], data: trained },
    { name: "step", dtype: "int64", shape: [], data: new BigInt64Array([BigInt(step)]), group: "optimizer" },
  ];
  return { metadata: { step, metrics: { loss: lossAt(step) } }, tensors };
}

/** What retention must have kept of these committed steps, computed independently of the manager. */
export function expectedKept(committed: readonly number[]): number[] {
  const sorted = [...committed].sort((a, b) => a - b);
  const keep = new Set(sorted.slice(-POLICY.maxToKeep));
  for (const s of sorted) if (s % POLICY.keepEvery === 0) keep.add(s);
  const byLoss = [...sorted].sort((a, b) => lossAt(a) - lossAt(b) || b - a);
  for (const s of byLoss.slice(0, POLICY.best.keep)) keep.add(s);
  return [...keep].sort((a, b) => a - b);
}

/** A small seeded generator (mulberry32), so a failing run can be repeated with its seed. */
export const random: (seed: number) => () => number = prng;

async function allFiles(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) out.push(...await allFiles(join(dir, e.name), `${prefix}${e.name}/`));
    else out.push(prefix + e.name);
  }
  return out;
}

/** One directory being crashed repeatedly, with what its children reported as committed. */
export class CrashedDirectory {
  readonly dir: string;
  readonly mode: "full" | "incremental";
  readonly committed = new Set<number>();
  kills = 0;
  saves = 0;
  takeovers = 0;
  cleanups = 0;

  constructor(dir: string, mode: "full" | "incremental") {
    this.dir = dir;
    this.mode = mode;
  }

  /** Starts a child, kills it `delay` ms after it has opened the directory, then checks the directory. */
  async round(delay: number): Promise<void> {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_crash_child.ts", import.meta.url).pathname, this.dir, this.mode],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let text = "";
    let ready!: () => void;
    const isReady = new Promise<void>((r) => (ready = r));
    const reading = (async () => {
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
        text += chunk;
        if (text.includes("ready")) ready();
      }
    })();
    const stderr = new Response(child.stderr).text();
    const exited = child.status.then((s) => {
      ready();
      return s;
    });
    await isReady;
    await new Promise((r) => setTimeout(r, delay));
    try {
      child.kill("SIGKILL");
    } catch { /* it already exited, which the status check below reports */ }
    const status = await exited;
    await reading;
    const err = await stderr;
    assert.equal(status.signal, "SIGKILL", `the child should still have been running; it exited: ${err}`);
    this.kills++;
    for (const m of text.matchAll(/^committed (\d+)$/gm)) {
      this.committed.add(Number(m[1]));
      this.saves++;
    }
    await this.check();
  }

  /** The checks after a kill. */
  async check(): Promise<void> {
    const warnings: string[] = [];
    const manager = await CheckpointManager.open(this.dir, {
      ...crashOptions(this.mode),
      onWarning: (m) => warnings.push(m),
    });
    try {
      if (warnings.some((w) => w.startsWith("Taking over stale lock"))) this.takeovers++;
      if (warnings.some((w) => w.startsWith("Removed"))) this.cleanups++;
      const unexpected = warnings.filter((w) => !/^(Taking over stale lock|Removed \d+ leftover)/.test(w));
      assert.deepEqual(unexpected, [], "only lock takeovers and cleanups are expected");
      // No temporary file, no uncommitted checkpoint, no orphan blob survives the open.
      const listed = await manager.list();
      const referenced = new Set<string>();
      for (const e of listed) {
        if (e.kind === "incremental") {
          const manifest = JSON.parse(await Deno.readTextFile(e.path));
          for (const t of manifest.tensors) referenced.add(`blobs/${t.blob.slice(0, 2)}/${t.blob}`);
        }
      }
      const expectedFiles = [
        "ckpt.lock",
        "index.json",
        ...listed.map((e) => e.path.slice(this.dir.length + 1)),
        ...referenced,
      ].sort();
      assert.deepEqual(
        (await allFiles(this.dir)).sort(),
        expectedFiles,
        "the directory holds exactly what is committed",
      );
      // A step the child committed but was killed before reporting is the one after the last reported.
      const reported = Math.max(0, ...this.committed);
      const newest = listed.at(-1)?.step;
      if (newest === reported + 1) this.committed.add(newest);
      // A full save recycles the file of an older checkpoint its commit will delete, taking it out
      // of the index first: killed in between, that one is gone and the new one not there yet.
      const kept = expectedKept([...this.committed]);
      const after = expectedKept([...this.committed, Math.max(0, ...this.committed) + 1]);
      const recycled = this.mode === "full" ? kept.slice(0, -1).find((s) => !after.includes(s)) : undefined;
      const steps = listed.map((e) => e.step);
      if (recycled !== undefined && steps.length === kept.length - 1) {
        assert.deepEqual(steps, kept.filter((s) => s !== recycled), "only the recycled checkpoint is gone");
      } else {
        assert.deepEqual(steps, kept, "no committed step was lost");
      }
      assert.ok(
        listed.every((e) => e.status === "ok"),
        JSON.stringify(listed.map((e) => [e.step, e.status, e.problem])),
      );
      const latest = await manager.latest();
      if (this.committed.size === 0) {
        assert.equal(latest, undefined);
        return;
      }
      assert.equal(latest?.metadata.step, Math.max(...this.committed));
      for (const e of listed) {
        const back: Checkpoint = e.step === latest!.metadata.step ? latest! : await manager.load(e.step);
        assert.deepEqual(exact(back.tensors), exact(crashCheckpoint(e.step).tensors as never));
      }
    } finally {
      await manager.close();
    }
  }
}

/** Runs `kills` rounds alternating between a full and an incremental directory; returns the two directories. */
export async function crashRounds(
  root: string,
  kills: number,
  seed: number,
  progress?: (done: number, dirs: CrashedDirectory[]) => void,
): Promise<CrashedDirectory[]> {
  const rand = random(seed);
  const dirs = [
    new CrashedDirectory(join(root, "full"), "full"),
    new CrashedDirectory(join(root, "incremental"), "incremental"),
  ];
  for (let i = 0; i < kills; i++) {
    // Mostly mid-save; one round in eight right after open, while leftovers are being cleaned up.
    const delay = rand() < 0.125 ? 0 : Math.floor(rand() * 150);
    await dirs[i % 2]!.round(delay);
    progress?.(i + 1, dirs);
  }
  return dirs;
}
