// Every state a crash can leave between two requests of a save to S3 (the real RGW: the requests
// are recorded as the store sends them) recovers to the old or the new checkpoint, bit for bit,
// and the next save succeeds: single, manager full and incremental, and mirrored saves. Every
// state is replayed in memory; a sample of them into the real bucket (docs/reliability.md).

import assert from "node:assert/strict";
import {
  CheckpointManager,
  type CheckpointManagerOptions,
  loadCheckpoint,
  MirroredManager,
  saveCheckpoint,
} from "../../mod.ts";
import type { ObjectStore } from "../../src/storage/types.ts";
import { s3Test } from "../_s3.ts";
import { exploreRequestCrashes, type StoreCrashCase, type StoreCrashReport } from "./_requests.ts";
import { assertBig, bigCheckpoint, checkFile, checkManager, checkpointAt } from "./_checks.ts";

function summary(name: string, r: StoreCrashReport): string {
  return `${name}: ${r.requests} requests (${r.writes} writes, up to ${r.inFlight} in flight), ${r.states} states, ${r.distinct} distinct, ${r.rgw} replayed on RGW, ${r.failures.length} failing`;
}

function expectNone(name: string, r: StoreCrashReport): void {
  console.log(summary(name, r));
  assert.deepEqual(r.failures, []);
  assert.ok(r.states >= 2, `only ${r.states} states`);
}

s3Test("every request state of a single saveCheckpoint to s3:// recovers the old or the new object", async (bucket) => {
  const at = (store: ObjectStore) => ({ store, key: "model.ckpt" });
  const r = await exploreRequestCrashes(bucket, "single", {
    rgwSample: 2,
    prepare: async (store) => void await saveCheckpoint(at(store), checkpointAt(1)),
    save: async (store) => void await saveCheckpoint(at(store), checkpointAt(2)),
    check: (store, { returned }) => checkFile(at(store), 1, 2, returned),
  });
  expectNone("single save", r);
});

s3Test(
  "every request state of a multipart saveCheckpoint to s3:// (parts in flight together) recovers",
  async (bucket) => {
    const at = (store: ObjectStore) => ({ store, key: "big.ckpt" });
    const bytes = 2 ** 20;
    const r = await exploreRequestCrashes(bucket, "multipart", {
      storeOptions: { partSize: 5 * 2 ** 20, concurrency: 3 },
      prepare: async (store) => void await saveCheckpoint(at(store), bigCheckpoint(1, bytes)),
      save: async (store) => void await saveCheckpoint(at(store), bigCheckpoint(2, bytes)),
      check: async (store, { returned }) => assertBig(await loadCheckpoint(at(store)), returned ? [2] : [1, 2], bytes),
    });
    expectNone("multipart save", r);
    assert.ok(r.inFlight >= 2, "no two parts were in flight together");
  },
);

function managerCase(options: CheckpointManagerOptions): StoreCrashCase {
  let manager: CheckpointManager | undefined;
  return {
    prepare: async (store) => {
      manager = await CheckpointManager.open(store, options);
      for (const step of [1, 2]) await manager.save(checkpointAt(step));
    },
    save: async () => {
      await manager!.save(checkpointAt(3));
      await manager!.close();
    },
    check: (store, { returned }) => checkManager(store, options, 2, 3, returned),
  };
}

s3Test("every request state of a manager save to s3:// (index, retention) recovers", async (bucket) => {
  expectNone("manager full save", await exploreRequestCrashes(bucket, "full", managerCase({ maxToKeep: 2 })));
});

s3Test("every request state of an incremental manager save to s3:// (blobs, manifest) recovers", async (bucket) => {
  const r = await exploreRequestCrashes(bucket, "incremental", managerCase({ maxToKeep: 2, incremental: true }));
  expectNone("manager incremental save", r);
});

s3Test("every request state of a mirrored save's replication to s3:// recovers on the mirror", async (bucket) => {
  const local = await Deno.makeTempDir({ prefix: "ckpt-crash-mirror-" });
  const options = { maxToKeep: 2, incremental: true };
  let manager: MirroredManager | undefined;
  try {
    const r = await exploreRequestCrashes(bucket, "mirrored", {
      prepare: async (store) => {
        manager = await MirroredManager.open(local, store, { mirror: options, onWarning: () => {} });
        for (const step of [1, 2]) await manager.save(checkpointAt(step));
        assert.ok(await manager.mirrored(30_000));
      },
      save: async () => {
        await manager!.save(checkpointAt(3));
        assert.ok(await manager!.mirrored(30_000));
        await manager!.close();
      },
      check: (store, { returned }) => checkManager(store, options, 2, 3, returned),
    });
    expectNone("mirrored save", r);
  } finally {
    await Deno.remove(local, { recursive: true });
  }
});

s3Test("the request enumerator finds the state a save that deletes before it writes leaves", async (bucket) => {
  const at = (store: ObjectStore) => ({ store, key: "model.ckpt" });
  const r = await exploreRequestCrashes(bucket, "broken", {
    rgwSample: 1,
    prepare: async (store) => void await saveCheckpoint(at(store), checkpointAt(1)),
    save: async (store) => {
      await store.delete("model.ckpt"); // wrong: the old object goes before the new one is there
      await saveCheckpoint(at(store), checkpointAt(2));
    },
    check: (store, { returned }) => checkFile(at(store), 1, 2, returned),
  });
  console.log(summary("delete before write", r));
  assert.equal(r.failures.length, 1, r.failures.join("\n"));
  assert.match(r.failures[0]!, /^after 1 of 2 writes \(DELETE model\.ckpt\): \w*Error: /);
});
