// The checkpoint manager under Node, from the installed package: retention, best, incremental,
// a latest() that verifies, the directory lock, and a Node process killed with SIGKILL mid-save
// (for real) that loses no committed checkpoint, its stale lock taken over by the next one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { CheckpointManager, DirectoryLockedError } from "@ckpt/ckpt";
import { crashCheckpoint } from "./_crash_child.mjs";
import { nodeChild, withTempDir } from "./_util.mjs";

const CHILD = new URL("./_crash_child.mjs", import.meta.url).pathname;

function small(step, loss) {
  return {
    metadata: { step, metrics: { loss } },
    tensors: [{ name: "w", dtype: "float32", shape: [3], data: new Float32Array([step, loss, -step]) }],
  };
}

test("retention keeps the newest and the best; latest() loads the newest", async () => {
  await withTempDir(async (dir) => {
    const m = await CheckpointManager.open(dir, { maxToKeep: 2, best: { metric: "loss", mode: "min", keep: 1 } });
    for (const [step, loss] of [[1, 0.9], [2, 0.1], [3, 0.5], [4, 0.7], [5, 0.6]]) await m.save(small(step, loss));
    assert.deepEqual((await m.list()).map((e) => e.step), [2, 4, 5]);
    const latest = await m.latest();
    assert.equal(latest.metadata.step, 5);
    assert.deepEqual(latest.tensors[0].data, new Float32Array([5, 0.6, -5]));
    await m.close();
  });
});

test("incremental checkpoints share unchanged tensors and load bit for bit", async () => {
  await withTempDir(async (dir) => {
    const m = await CheckpointManager.open(dir, { incremental: true });
    for (const step of [1, 2, 3]) await m.save(crashCheckpoint(step));
    const back = await m.latest();
    const want = crashCheckpoint(3);
    for (const [i, t] of want.tensors.entries()) {
      assert.deepEqual(
        new Uint8Array(back.tensors[i].data.buffer, back.tensors[i].data.byteOffset, back.tensors[i].data.byteLength),
        new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength),
        t.name,
      );
    }
    await m.close();
  });
});

test("latest() skips a newest checkpoint whose file was damaged, with a warning", async () => {
  await withTempDir(async (dir) => {
    const warnings = [];
    const m = await CheckpointManager.open(dir, { onWarning: (w) => warnings.push(w) });
    await m.save(small(1, 0.5));
    await m.save(small(2, 0.4));
    const newest = (await m.list()).at(-1);
    const file = newest.path.startsWith("/") ? newest.path : join(dir, newest.path);
    const bytes = await readFile(file);
    bytes[bytes.length >> 1] ^= 0xff;
    await writeFile(file, bytes);
    const latest = await m.latest();
    assert.equal(latest.metadata.step, 1);
    assert.ok(warnings.length > 0, "a warning names the damaged checkpoint");
    await m.close();
  });
});

test("a second manager on the same directory is refused with DirectoryLockedError", async () => {
  await withTempDir(async (dir) => {
    const m = await CheckpointManager.open(dir);
    await assert.rejects(
      CheckpointManager.open(dir),
      (e) => e instanceof DirectoryLockedError && e.pid === process.pid,
    );
    const ro = await CheckpointManager.open(dir, { readOnly: true });
    await ro.close();
    await m.close();
    const again = await CheckpointManager.open(dir);
    await again.close();
  });
});

/** Starts the crash child; resolves with it once it printed `ready`. */
function startChild(dir, mode) {
  const committed = [];
  let ready;
  const readyP = new Promise((r) => ready = r);
  const { child, done } = nodeChild(CHILD, [dir, mode], (line) => {
    if (line.startsWith("ready")) ready();
    if (line.startsWith("committed ")) committed.push(Number(line.slice(10)));
  });
  return { child, committed, ready: readyP, exited: done };
}

for (const mode of ["full", "incremental"]) {
  test(
    `${mode}: a Node process killed with SIGKILL mid-save loses no committed checkpoint`,
    { timeout: 120_000 },
    async () => {
      await withTempDir(async (dir) => {
        let lastCommitted = 0;
        for (let round = 0; round < 4; round++) {
          const run = startChild(dir, mode);
          await run.ready;
          // Kill after a few commits, at a moment that falls inside a save more often than not.
          while (run.committed.length < 2 + round) await new Promise((r) => setTimeout(r, 5));
          await new Promise((r) => setTimeout(r, 3 + round * 7));
          run.child.kill("SIGKILL");
          const { signal } = await run.exited;
          assert.equal(signal, "SIGKILL");
          lastCommitted = Math.max(lastCommitted, ...run.committed);
          const warnings = [];
          const m = await CheckpointManager.open(dir, { onWarning: (w) => warnings.push(w) });
          assert.ok(warnings.some((w) => /stale lock/.test(w)), `round ${round}: the dead child's lock is taken over`);
          const latest = await m.latest();
          assert.ok(latest.metadata.step >= lastCommitted, `round ${round}: step ${lastCommitted} was committed`);
          const want = crashCheckpoint(latest.metadata.step);
          assert.deepEqual(latest.tensors[1].data, want.tensors[1].data);
          await m.close();
        }
      });
    },
  );
}
