// `deno task train` stopped the way jobs are stopped: SIGTERM at many points of a run (during a
// step, during a background save, during a commit), and through the README's own command
// (`npx --yes deno@2.9.6 task train`), whose launchers must pass the signal on and leave no
// orphan. Every time the next run resumes from the newest committed step and ends bit for bit
// like a run never interrupted.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { prng } from "../_util.ts";
import { finalLine, type Run, runCommand, runDemo, stepOf } from "./_train_runner.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const FLAGS = ["--steps", "300", "--every", "25"];

const demo = runDemo;
const at = (line: string, pattern: RegExp) => stepOf(line, pattern) ?? NaN;

let reference: Promise<string> | undefined;
function uninterrupted(): Promise<string> {
  reference ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "ckpt_preempt_ref_" });
    try {
      const run = await demo(["--dir", dir, ...FLAGS, "--quiet"]);
      assert.equal(run.code, 0, run.lines.join("\n"));
      return finalLine(run);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  })();
  return reference;
}

/**
 * The processes still running with `dir` on their command line (the trainer, `deno task`), as
 * `PID: command`. Through `ps`, not /proc: Deno reads /proc only with --allow-all, which the test
 * task does not grant.
 */
function runningWith(dir: string): string[] {
  const out = new Deno.Command("ps", { args: ["-eo", "pid=,args="], stdout: "piped", stderr: "inherit" }).outputSync();
  return new TextDecoder().decode(out.stdout).split("\n")
    .map((l) => l.trim().replace(/^(\d+)\s+/, "$1: "))
    .filter((l) => l.includes(dir) && !/^\d+: ps /.test(l));
}

/** After a clean signal exit: no lock, no temporary file, the stopped step committed. */
function assertClean(dir: string, run: Run): number {
  const names = [...Deno.readDirSync(dir)].map((e) => e.name);
  assert.ok(!names.includes("ckpt.lock"), `lock left behind: ${names.join(" ")}`);
  assert.ok(names.every((n) => !n.startsWith(".")), `temporary file left behind: ${names.join(" ")}`);
  const stopped = at(run.lines.find((l) => l.startsWith("stopped at step")) ?? "", /^stopped at step (\d+);/);
  assert.ok(stopped > 0, run.lines.join("\n"));
  const index = JSON.parse(Deno.readTextFileSync(`${dir}/index.json`)) as { checkpoints: { step: number }[] };
  assert.equal(index.checkpoints.at(-1)?.step, stopped, "the step it stopped at is the newest committed");
  return stopped;
}

Deno.test("train on SIGTERM at many points saves the step it is at, exits 143 with no lock left, and resumes bit for bit", async () => {
  const want = await uninterrupted();
  const dir = await Deno.makeTempDir({ prefix: "ckpt_preempt_many_" });
  const random = prng(37);
  try {
    let resumed = 0;
    // Each run is stopped a random number of output lines in, and a random few ms after that
    // line: in a training step, just after a checkpoint was handed to the worker (a background
    // save), or while the manager commits it.
    const offStep: number[] = [];
    for (let i = 0; i < 5; i++) {
      let seen = 0;
      const after = 2 + Math.floor(random() * 6);
      const delay = Math.floor(random() * 15);
      const run = await demo(["--dir", dir, ...FLAGS, "--delay", "5"], (line) => {
        if (/^ {2}checkpoint step|^step /.test(line)) seen++;
        if (seen !== after) return undefined;
        const until = performance.now() + delay;
        while (performance.now() < until) { /* the signal lands `delay` ms after the line */ }
        return "SIGTERM";
      });
      assert.equal(run.code, 143, run.lines.join("\n"));
      const stopped = assertClean(dir, run);
      assert.ok(stopped >= resumed, `${stopped} >= ${resumed}`);
      if (stopped % 25 !== 0) offStep.push(stopped);
      resumed = stopped;
      const next = run.lines.find((l) => l.startsWith("resumed from step"));
      if (i > 0) assert.ok(next, run.lines.join("\n"));
    }
    assert.ok(offStep.length > 0, "at least one stop saved a step off the --every interval");
    const last = await demo(["--dir", dir, ...FLAGS]);
    assert.equal(last.code, 0, last.lines.join("\n"));
    assert.ok(last.lines.includes(`resumed from step ${resumed} (${dir})`), last.lines.join("\n"));
    assert.equal(finalLine(last), want);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train through the README's command: SIGTERM to npx reaches the trainer, which saves, exits, and resumes", async () => {
  const want = await uninterrupted();
  const dir = await Deno.makeTempDir({ prefix: "ckpt_preempt_npx_" });
  try {
    const args = ["--yes", "deno@2.9.6", "task", "train", "--dir", dir, ...FLAGS, "--delay", "20"];
    const run = await runCommand("npx", args, (l) => at(l, /^step +(\d+)\//) >= 50 ? "SIGTERM" : undefined, {
      cwd: ROOT,
    });
    // npx ends as its child did: by the signal's status (143) once the trainer has saved and exited.
    assert.equal(run.code, 143, run.lines.join("\n"));
    assert.deepEqual(runningWith(dir), [], "no orphan keeps training");
    const stopped = assertClean(dir, run);
    assert.ok(run.ms < 25_000, `exited ${run.ms} ms after SIGTERM, within the grace period`);
    const resumed = await runCommand(
      "npx",
      ["--yes", "deno@2.9.6", "task", "train", "--dir", dir, ...FLAGS],
      undefined,
      {
        cwd: ROOT,
      },
    );
    assert.equal(resumed.code, 0, resumed.lines.join("\n"));
    assert.ok(resumed.lines.includes(`resumed from step ${stopped} (${dir})`), resumed.lines.join("\n"));
    assert.equal(finalLine(resumed), want);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train under deno task: SIGKILL of deno task leaves no orphan; the trainer saves and exits", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt_preempt_task_" });
  try {
    /** `deno task`'s pid: the child of npx whose command line is `deno task train --dir DIR ...`. */
    const taskPid = () => {
      const hit = runningWith(dir).find((l) => /^\d+: (\S*\/)?deno task train /.test(l));
      assert.ok(hit, runningWith(dir).join("\n"));
      return Number(hit.split(":")[0]);
    };
    const args = ["--yes", "deno@2.9.6", "task", "train", "--dir", dir, ...FLAGS, "--delay", "20"];
    const run = await runCommand(
      "npx",
      args,
      (l) => at(l, /^step +(\d+)\//) >= 50 ? "SIGKILL" : undefined,
      { cwd: ROOT, target: taskPid },
    );
    // The trainer, adopted when deno task died, noticed, saved the step it was at and exited.
    for (let i = 0; i < 100 && runningWith(dir).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(runningWith(dir), [], "no orphan keeps training");
    const stopped = assertClean(dir, run);
    assert.ok(stopped >= 50, run.lines.join("\n"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
