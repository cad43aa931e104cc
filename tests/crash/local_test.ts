// Every crash state a power loss can leave during a save to a local directory (the model and the
// counts: docs/reliability.md, "Crash states") recovers to the old or the new checkpoint, bit
// for bit, and the next save succeeds: a single-file save, and the manager's full and
// incremental saves with retention. A save missing one fsync is caught.

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  CheckpointManager,
  type CheckpointManagerOptions,
  encodeCheckpoint,
  loadCheckpoint,
  MirroredManager,
  saveCheckpoint,
} from "../../mod.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import { files } from "../../src/runtime/files.ts";
import { LOCK_FILE } from "../../src/manager/_lock.ts";
import { type CrashCase, exploreCrashes, summary } from "./_harness.ts";
import { assertBig, assertOneOf, bigCheckpoint, checkFile, checkManager, checkpointAt } from "./_checks.ts";

const skipLock = (name: string) => name === LOCK_FILE;

async function explore(name: string, c: CrashCase) {
  const report = await exploreCrashes(c);
  console.log(summary(name, report));
  return report;
}

Deno.test("every crash state of a single-file saveCheckpoint recovers the old or the new file", async () => {
  const report = await explore("saveCheckpoint", {
    prepare: async (dir) => void await saveCheckpoint(join(dir, "model.ckpt"), checkpointAt(1)),
    save: async (dir) => void await saveCheckpoint(join(dir, "model.ckpt"), checkpointAt(2)),
    check: (dir, { returned }) => checkFile(join(dir, "model.ckpt"), 1, 2, returned),
  });
  assert.deepEqual(report.failures, []);
  assert.ok(report.checked > 10, `only ${report.checked} states`);
});

Deno.test("every crash state of a 3 MiB saveCheckpoint (several writes, flushes behind them) recovers", async () => {
  const big = (step: number) => bigCheckpoint(step, 2 ** 18);
  const report = await explore("saveCheckpoint 3 MiB", {
    prepare: async (dir) => void await saveCheckpoint(join(dir, "big.ckpt"), big(1)),
    save: async (dir) => void await saveCheckpoint(join(dir, "big.ckpt"), big(2)),
    check: async (dir, { returned }) => {
      const got = await loadCheckpoint(join(dir, "big.ckpt"));
      assertBig(got, returned ? [2] : [1, 2], 2 ** 18);
    },
  });
  assert.deepEqual(report.failures, []);
  assert.ok(report.recording.ops.filter((o) => o.op === "write").length >= 2, "the save was one write");
});

function managerCase(options: CheckpointManagerOptions, steps: number[], next: number): CrashCase {
  let manager: CheckpointManager | undefined;
  return {
    prepare: async (dir) => {
      manager = await CheckpointManager.open(dir, options);
      for (const step of steps) await manager.save(checkpointAt(step));
    },
    save: async () => {
      await manager!.save(checkpointAt(next));
      await manager!.close();
    },
    check: (dir, { returned }) => checkManager(dir, options, steps.at(-1)!, next, returned),
    skip: skipLock,
  };
}

Deno.test("every crash state of a manager save (index commit, retention deleting the oldest) recovers", async () => {
  const report = await explore("manager full save", managerCase({ maxToKeep: 2 }, [1, 2], 3));
  assert.deepEqual(report.failures, []);
});

Deno.test("every crash state of a manager save recycling the file retention drops recovers", async () => {
  const report = await explore("manager recycling save", managerCase({ maxToKeep: 2, recycle: true }, [1, 2], 3));
  assert.deepEqual(report.failures, []);
});

Deno.test("every crash state of an incremental manager save (blobs, manifest, retention) recovers", async () => {
  const report = await explore("manager incremental save", managerCase({ maxToKeep: 2, incremental: true }, [1, 2], 3));
  assert.deepEqual(report.failures, []);
});

Deno.test("every crash state of a first save (the directory made, the index created) recovers nothing or it", async () => {
  const options = { maxToKeep: 2 };
  const report = await explore("manager first save", {
    prepare: async () => {},
    save: async (dir) => {
      const manager = await CheckpointManager.open(join(dir, "runs", "a"), options);
      await manager.save(checkpointAt(1));
      await manager.close();
    },
    check: (dir, { returned }) => checkManager(join(dir, "runs", "a"), options, undefined, 1, returned),
    skip: skipLock,
  });
  assert.deepEqual(report.failures, []);
});

Deno.test("every crash state of a mirrored save's local tier (local retention after replication) recovers", async () => {
  let manager: MirroredManager | undefined;
  const local = { maxToKeep: 2 };
  const report = await explore("mirrored save, local tier", {
    prepare: async (dir) => {
      manager = await MirroredManager.open(dir, new MemoryStore(), { local, onWarning: () => {} });
      for (const step of [1, 2, 3]) await manager.save(checkpointAt(step));
      assert.ok(await manager.mirrored(30_000));
    },
    save: async () => {
      await manager!.save(checkpointAt(4));
      assert.ok(await manager!.mirrored(30_000));
      await manager!.close();
    },
    check: (dir, { returned }) => checkManager(dir, {}, 3, 4, returned),
    skip: skipLock,
  });
  assert.deepEqual(report.failures, []);
});

Deno.test("every crash state of a manager delete of the newest step recovers it or the one before", async () => {
  const options = { maxToKeep: 3 };
  let manager: CheckpointManager | undefined;
  const report = await explore("manager delete", {
    prepare: async (dir) => {
      manager = await CheckpointManager.open(dir, options);
      for (const step of [1, 2, 3]) await manager.save(checkpointAt(step));
    },
    save: async () => {
      await manager!.delete(3);
      await manager!.close();
    },
    check: async (dir, { returned }) => {
      const reopened = await CheckpointManager.open(dir, { ...options, onWarning: () => {} });
      try {
        assertOneOf(await reopened.latest(), returned ? [2] : [3, 2]);
        for (const { step } of await reopened.list()) assertOneOf(await reopened.load(step), [step]);
        await reopened.save(checkpointAt(4));
        assertOneOf(await reopened.latest(), [4]);
      } finally {
        await reopened.close();
      }
    },
    skip: skipLock,
  });
  assert.deepEqual(report.failures, []);
});

/** A save as saveCheckpoint makes it, less the fsync of the file before the rename. */
async function saveWithoutFileSync(path: string, bytes: Uint8Array): Promise<void> {
  const tmp = `${path}.tmp`;
  const file = await files.open(tmp, { write: true, createNew: true });
  let off = 0;
  while (off < bytes.byteLength) off += await file.write(bytes.subarray(off));
  file.close(); // no syncData
  await files.rename(tmp, path);
  const dir = await files.open(join(path, ".."), { read: true });
  await dir.sync();
  dir.close();
}

Deno.test("the enumerator finds the state a save missing the file's fsync leaves", async () => {
  const bytes = new Uint8Array(await new Response(encodeCheckpoint(checkpointAt(2))).arrayBuffer());
  const report = await explore("save without fsync", {
    prepare: async (dir) => void await saveCheckpoint(join(dir, "model.ckpt"), checkpointAt(1)),
    save: (dir) => saveWithoutFileSync(join(dir, "model.ckpt"), bytes),
    check: (dir, { returned }) => checkFile(join(dir, "model.ckpt"), 1, 2, returned),
  });
  assert.ok(report.failures.length > 0, "no failing state found");
  // The renamed file persisted without (all of) its data.
  assert.ok(report.failures.some((f) => /(lost|blocks [01]+|size only) #\d+ write/.test(f)), report.failures[0]);
});
