// Page reuse: a save recycles the file of the checkpoint retention is about to delete, and never
// one that is kept (recent, every-N, best) or the newest.
import assert from "node:assert/strict";
import { join } from "node:path";
import type { CheckpointInput } from "../../mod.ts";
import { CheckpointManager, type CheckpointManagerOptions } from "../../src/manager/mod.ts";

const file = (step: number) => `step-${String(step).padStart(9, "0")}.ckpt`;

function ckpt(step: number, loss = 1): CheckpointInput {
  return {
    metadata: { step, metrics: { loss } },
    tensors: [{ name: "w", dtype: "float32", shape: [4096 + step], data: new Float32Array(4096 + step).fill(step) }],
  };
}

/** Saves the steps with their losses; returns each step's file inode right after its save, and the manager's list. */
async function run(
  dir: string,
  options: CheckpointManagerOptions,
  steps: [number, number][],
): Promise<{ inode: Map<number, number>; kept: number[] }> {
  const inode = new Map<number, number>();
  await using m = await CheckpointManager.open(dir, { ...options, onWarning: () => {} });
  for (const [step, loss] of steps) {
    const e = await m.save(ckpt(step, loss));
    inode.set(step, (await Deno.stat(e.path)).ino!);
  }
  const listed = await m.list();
  for (const e of listed) {
    const back = await m.load(e.step);
    assert.deepEqual(
      back.tensors[0]!.data,
      new Float32Array(4096 + e.step).fill(e.step),
      `step ${e.step} loads intact`,
    );
  }
  return { inode, kept: listed.map((e) => e.step) };
}

Deno.test("a rotating manager saves into the file retention deletes, and only that one", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { inode, kept } = await run(join(dir, "a"), { maxToKeep: 2, recycle: true }, [[1, 1], [2, 1], [3, 1], [
      4,
      1,
    ]]);
    assert.deepEqual(kept, [3, 4]);
    assert.equal(inode.get(3), inode.get(1), "step 3 was written into step 1's file");
    assert.equal(inode.get(4), inode.get(2), "step 4 was written into step 2's file");
    assert.deepEqual([...Deno.readDirSync(join(dir, "a"))].map((e) => e.name).sort(), [
      "index.json",
      file(3),
      file(4),
    ]);
    // recycle: false writes new files and deletes after the commit.
    const off = await run(join(dir, "b"), { maxToKeep: 2, recycle: false }, [[1, 1], [2, 1], [3, 1]]);
    assert.notEqual(off.inode.get(3), off.inode.get(1));
    // maxToKeep: 1 never recycles: the newest is what a crash would resume from.
    const one = await run(join(dir, "c"), { maxToKeep: 1, recycle: true }, [[1, 1], [2, 1]]);
    assert.deepEqual(one.kept, [2]);
    assert.notEqual(one.inode.get(2), one.inode.get(1));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a checkpoint kept as best or every-N is never recycled", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const d = join(dir, "a");
    // Step 1 is the best by loss, step 3 a multiple of keepEvery: both outlive the recent window.
    const { inode, kept } = await run(
      d,
      { maxToKeep: 2, keepEvery: 3, best: { metric: "loss", mode: "min", keep: 1 }, recycle: true },
      [
        [1, 0.1],
        [2, 0.5],
        [3, 0.5],
        [4, 0.5],
        [5, 0.5],
        [6, 0.5],
      ],
    );
    assert.deepEqual(kept, [1, 3, 5, 6]);
    assert.equal((await Deno.stat(join(d, file(1)))).ino, inode.get(1), "the best keeps its file");
    assert.equal((await Deno.stat(join(d, file(3)))).ino, inode.get(3), "every-N keeps its file");
    // Step 2 fell out of the window when step 4 was saved: step 4 went into its file; step 4 then into step 6.
    assert.equal(inode.get(4), inode.get(2));
    assert.equal(inode.get(6), inode.get(4));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a save killed while overwriting a recycled file leaves the newest checkpoint to resume from", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const script = `
      import { CheckpointManager } from ${JSON.stringify(new URL("../../src/manager/mod.ts", import.meta.url).href)};
      const m = await CheckpointManager.open(${JSON.stringify(dir)}, { maxToKeep: 2, recycle: true });
      for (const step of [1, 2]) {
        await m.save({ metadata: { step }, tensors: [{ name: "w", dtype: "float32", shape: [1 << 20], data: new Float32Array(1 << 20).fill(step) }] });
      }
      async function* slow() {
        for (let i = 0; i < 1000; i++) {
          yield { name: "t" + i, dtype: "float32", shape: [1 << 18], data: new Float32Array(1 << 18).fill(i) };
          if (i === 3) console.log("writing");
        }
      }
      await m.save({ metadata: { step: 3 }, tensors: slow() });
    `;
    const child = new Deno.Command(Deno.execPath(), { args: ["eval", script], stdout: "piped", stderr: "piped" })
      .spawn();
    const reader = child.stdout.getReader();
    const first = await reader.read();
    assert.match(new TextDecoder().decode(first.value), /writing/);
    // Step 1's file is being overwritten as step 3's temporary file right now.
    assert.ok([...Deno.readDirSync(dir)].some((e) => e.name.includes(".tmp-")), "a recycled temporary file exists");
    child.kill("SIGKILL");
    await child.status;
    reader.releaseLock();
    await child.stdout.cancel();
    await child.stderr.cancel();
    const warnings: string[] = [];
    await using m = await CheckpointManager.open(dir, {
      maxToKeep: 2,
      recycle: true,
      onWarning: (w) => warnings.push(w),
    });
    assert.deepEqual(
      (await m.list()).map((e) => [e.step, e.status]),
      [[2, "ok"]],
      "step 1 was recycled, step 3 never committed",
    );
    const latest = await m.latest();
    assert.equal(latest?.metadata.step, 2);
    assert.deepEqual(latest!.tensors[0]!.data, new Float32Array(1 << 20).fill(2));
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [
      "ckpt.lock",
      "index.json",
      file(2),
    ]);
    // Training goes on: the next saves commit and recycle as before.
    await m.save({
      metadata: { step: 3 },
      tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array(2) }],
    });
    await m.save({
      metadata: { step: 4 },
      tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array(2) }],
    });
    assert.deepEqual((await m.list()).map((e) => e.step), [3, 4]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a recycled file holds byte for byte what the encoder gives, for every codec, from a producer reusing one buffer", async () => {
  const { encodeCheckpoint, saveCheckpoint } = await import("../../mod.ts");
  const dir = await Deno.makeTempDir();
  try {
    const n = (1 << 20) + 5; // float32 elements: bodies just over 4 MiB, two slices each
    const pattern = (step: number, t: number) => Float32Array.from({ length: 16 }, (_, i) => (step * 7 + t + i) * 1e-3);
    // A producer that recycles ONE buffer: tensor t + 1 overwrites tensor t's memory, so a body
    // still being written (or staged) when the next tensor is asked for would land changed.
    const lazy = (step: number, recycle = true) =>
      (async function* () {
        let buffer = new Float32Array(n);
        for (let t = 0; t < 3; t++) {
          if (!recycle) buffer = new Float32Array(n);
          const p = pattern(step, t);
          for (let i = 0; i < n; i += 16) buffer.set(p.subarray(0, Math.min(16, n - i)), i);
          yield { name: `layer${t}`, dtype: "float32" as const, shape: [n], data: buffer };
        }
      })();
    const cases = [
      { codec: "binary" as const, compression: "none" as const },
      { codec: "binary" as const, compression: "bytegroup" as const },
      { codec: "json" as const, compression: "none" as const },
    ];
    for (const options of cases) {
      const old = join(dir, "old.ckpt");
      const path = join(dir, "new.ckpt");
      await saveCheckpoint(old, { metadata: { step: 1 }, tensors: lazy(1) }, options);
      const inode = (await Deno.stat(old)).ino;
      await saveCheckpoint(path, { metadata: { step: 2 }, tensors: lazy(2) }, { ...options, reuse: old });
      assert.equal((await Deno.stat(path)).ino, inode, "the old file was recycled");
      // What the encoder gives (a buffer per tensor: the chunks it hands out view them).
      const want = new Uint8Array(
        await new Response(encodeCheckpoint({ metadata: { step: 2 }, tensors: lazy(2, false) }, options)).arrayBuffer(),
      );
      const got = await Deno.readFile(path);
      const first = got.findIndex((b, i) => b !== want[i]);
      assert.ok(
        got.byteLength === want.byteLength && first === -1,
        `${options.codec}/${options.compression}: ${got.byteLength} bytes against ${want.byteLength}, first difference at ${first}`,
      );
      await Deno.remove(path);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
