// Every crash state of a sharded save (two writers, each its part and done record, the manifest
// committed last), on a local directory (power loss: every state the file-system calls can
// leave) and on S3 (a crash between any two requests): the old checkpoint stays whole, the new
// one is either absent or whole (never a manifest naming a missing or torn part), and once the
// save returned it is there; then a retry of the save (or the next step) succeeds.

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadCheckpoint, type TensorInput } from "../../mod.ts";
import { saveShard } from "../../src/shard/mod.ts";
import type { StorageAddress } from "../../src/storage/resolve.ts";
import type { ObjectStore } from "../../src/storage/types.ts";
import { s3Test } from "../_s3.ts";
import { exploreCrashes, summary } from "./_harness.ts";
import { exploreRequestCrashes } from "./_requests.ts";
import { assertOneOf, checkpointAt } from "./_checks.ts";

/** Two writers, each with a full replica, save `step` at `at(step)`; writer 0 commits. */
async function saveSharded(at: (step: number) => StorageAddress, step: number, saveId: string): Promise<void> {
  const { metadata, tensors } = checkpointAt(step);
  await Promise.all(
    [0, 1].map((writer) =>
      saveShard(at(step), { metadata, tensors: tensors as TensorInput[] }, { writer, writers: 2, saveId, poll: 5 })
    ),
  );
}

/** Whether the object at `address` exists (the manifest: the checkpoint exists once it does). */
async function exists(store: ObjectStore, key: string): Promise<boolean> {
  return (await store.head(key)) !== undefined;
}

/**
 * Recovery: step 1 loads whole; step 2 loads whole if its manifest is there (it must be once the
 * save returned); then step 2 saved again under a new save id when it was not committed, or step
 * 3 when it was, succeeds and loads back.
 */
async function checkSharded(store: ObjectStore, at: (step: number) => StorageAddress, returned: boolean) {
  assertOneOf(await loadCheckpoint(at(1)), [1]);
  const committed = await exists(store, keyOf(at(2)));
  if (returned && !committed) throw new Error("the save returned but its manifest is not there");
  if (committed) assertOneOf(await loadCheckpoint(at(2)), [2]);
  const next = committed ? 3 : 2;
  await saveSharded(at, next, `retry-${next}`);
  assertOneOf(await loadCheckpoint(at(next)), [next]);
}

function keyOf(address: StorageAddress): string {
  return typeof address === "object" && "key" in address ? address.key : String(address);
}

Deno.test("every crash state of a sharded save to a local directory recovers the old or the new checkpoint", async () => {
  const { FileStore } = await import("../../src/storage/file.ts");
  const report = await exploreCrashes({
    prepare: (dir) => saveSharded((s) => join(dir, `step-${s}.ckpt`), 1, "s1"),
    save: (dir) => saveSharded((s) => join(dir, `step-${s}.ckpt`), 2, "s2"),
    check: (dir, { returned }) => {
      const store = new FileStore(dir);
      return checkSharded(store, (s) => ({ store, key: `step-${s}.ckpt` }), returned);
    },
  });
  console.log(summary("sharded save, local", report));
  assert.deepEqual(report.failures, []);
});

s3Test("every request state of a sharded save to s3:// recovers the old or the new checkpoint", async (bucket) => {
  const r = await exploreRequestCrashes(bucket, "sharded", {
    prepare: (store) => saveSharded((s) => ({ store, key: `step-${s}.ckpt` }), 1, "s1"),
    save: (store) => saveSharded((s) => ({ store, key: `step-${s}.ckpt` }), 2, "s2"),
    check: (store, { returned }) => checkSharded(store, (s) => ({ store, key: `step-${s}.ckpt` }), returned),
  });
  console.log(
    `sharded save, S3: ${r.requests} requests (${r.writes} writes, up to ${r.inFlight} in flight), ${r.states} states, ${r.distinct} distinct, ${r.rgw} replayed on RGW, ${r.failures.length} failing`,
  );
  assert.deepEqual(r.failures, []);
});
