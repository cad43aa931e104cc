// The manager's behaviour on an ObjectStore (no local directory, no lock): every store runs this
// suite (`managerOnStore("MemoryStore", fixture)`), so retention, best, latest, incremental blobs,
// the conditional commit and cleanup on open are shown to work wherever checkpoints live.

import assert from "node:assert/strict";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { type ObjectStore, PreconditionFailedError } from "../../src/storage/types.ts";
import { exact, makeCheckpoint, warnings } from "./_helpers.ts";

/** A fresh, empty store for one test, and how to release it. */
export interface ManagerStoreFixture {
  store: ObjectStore;
  close(): Promise<void>;
}

const quiet = { onWarning: () => {} };

async function keys(store: ObjectStore): Promise<string[]> {
  return await Array.fromAsync(store.list(""), (o) => o.key);
}

async function bytes(store: ObjectStore, key: string): Promise<Uint8Array> {
  return new Uint8Array(await new Response((await store.get(key)).body).arrayBuffer());
}

/** Registers the suite for one store, tests named `"<name>: <behaviour>"`. */
export function managerOnStore(
  name: string,
  fixture: () => Promise<ManagerStoreFixture>,
  options: { ignore?: boolean; sanitize?: boolean } = {},
): void {
  const test = (what: string, fn: (store: ObjectStore) => Promise<void>) =>
    Deno.test({
      name: `${name}: ${what}`,
      ignore: options.ignore ?? false,
      sanitizeOps: options.sanitize ?? true,
      sanitizeResources: options.sanitize ?? true,
      async fn() {
        const f = await fixture();
        try {
          await fn(f.store);
        } finally {
          await f.close();
        }
      },
    });

  test("saves, lists, loads and deletes with retention and keep-best", async (store) => {
    const manager = await CheckpointManager.open(store, {
      ...quiet,
      maxToKeep: 2,
      keepEvery: 30,
      best: { metric: "loss", mode: "min" },
    });
    const losses: Record<number, number> = { 10: 0.5, 20: 0.1, 30: 0.4, 40: 0.3, 50: 0.2 };
    for (const step of [10, 20, 30, 40, 50]) await manager.save(makeCheckpoint(step, { loss: losses[step]! }));
    const listed = await manager.list();
    assert.deepEqual(listed.map((e) => [e.step, e.keptBy, e.status]), [
      [20, ["best"], "ok"],
      [30, ["every"], "ok"],
      [40, ["recent"], "ok"],
      [50, ["recent"], "ok"],
    ]);
    assert.ok(listed.every((e) => e.path.startsWith(store.url)), "paths are the objects' URLs");
    assert.deepEqual(listed[0]!.tensors?.map((t) => t.name), [
      "embedding/frozen",
      "dense/kernel",
      "bn/moving_mean",
      "optimizer/iter",
    ]);
    assert.deepEqual(exact((await manager.latest())!.tensors), exact(makeCheckpoint(50).tensors as never));
    assert.deepEqual(exact((await manager.load(20)).tensors), exact(makeCheckpoint(20).tensors as never));
    await manager.delete(50);
    assert.equal((await manager.latest())!.metadata.step, 40);
    // Only the index and the committed checkpoints' objects remain.
    const files = new Set((await manager.list()).map((e) => e.path.slice(store.url.length)));
    assert.deepEqual((await keys(store)).filter((k) => k !== "index.json"), [...files].sort());
    await manager.close();
    // Reopened, the directory is the same.
    const again = await CheckpointManager.open(store, quiet);
    assert.deepEqual((await again.list()).map((e) => e.step), [20, 30, 40]);
    await again.close();
  });

  test("incremental saves store unchanged tensors once and load bit for bit", async (store) => {
    const manager = await CheckpointManager.open(store, { ...quiet, incremental: true, maxToKeep: 2 });
    const first = await manager.save(makeCheckpoint(1, { frozen: 4096 }));
    const second = await manager.save(makeCheckpoint(2, { frozen: 4096 }));
    assert.ok(second.bytesWritten < first.bytesWritten - 4096 * 4 + 1024, "the frozen tensor is not written again");
    await manager.save(makeCheckpoint(3, { frozen: 4096 }));
    assert.deepEqual((await manager.list()).map((e) => [e.step, e.status]), [[2, "ok"], [3, "ok"]]);
    assert.deepEqual(
      exact((await manager.load(2)).tensors),
      exact(makeCheckpoint(2, { frozen: 4096 }).tensors as never),
    );
    // Step 1's blobs that nobody references any more are gone; the shared one stays.
    const blobs = (await keys(store)).filter((k) => k.startsWith("blobs/"));
    // makeCheckpoint changes two of its four tensors from step to step.
    assert.equal(blobs.length, 2 + 2 * 2, "the two unchanged tensors once, the two trained ones per kept step");
    await manager.close();
  });

  test("latest() skips a damaged checkpoint, loads the previous one, and quarantines the damaged one", async (store) => {
    const w = warnings();
    const manager = await CheckpointManager.open(store, { onWarning: w.onWarning });
    await manager.save(makeCheckpoint(1));
    const two = await manager.save(makeCheckpoint(2));
    const key = two.path.slice(store.url.length);
    const damaged = await bytes(store, key);
    damaged[damaged.length - 40]! ^= 1;
    await store.put(key, damaged);
    assert.equal((await manager.latest())!.metadata.step, 1);
    assert.match(w.list.join("\n"), /Skipping checkpoint step 2 .*no longer committed/);
    assert.deepEqual((await manager.list()).map((e) => e.step), [1]);
    await manager.save(makeCheckpoint(2)); // step 2 can be saved again
    assert.equal((await manager.latest())!.metadata.step, 2);
    await manager.close();
  });

  test("a second manager fences the first: its next save fails clearly and nothing is lost", async (store) => {
    const first = await CheckpointManager.open(store, quiet);
    await first.save(makeCheckpoint(1));
    const second = await CheckpointManager.open(store, quiet);
    await second.save(makeCheckpoint(2));
    const before = await keys(store);
    const error = await first.save(makeCheckpoint(3)).then(() => undefined, (e) => e);
    assert.ok(error instanceof PreconditionFailedError, String(error));
    assert.match(error.message, /index\.json: another manager opened this checkpoint directory/);
    assert.match(error.message, /cannot save checkpoint step 3/);
    // The failed save left nothing behind, and every later call fails the same way at once.
    assert.deepEqual(await keys(store), before);
    assert.throws(() => first.save(makeCheckpoint(4)), PreconditionFailedError);
    await assert.rejects(() => first.delete(1), PreconditionFailedError);
    // The second manager's commits are intact, and it goes on.
    assert.deepEqual((await second.list()).map((e) => e.step), [1, 2]);
    await second.save(makeCheckpoint(5));
    await second.close();
    const view = await CheckpointManager.open(store, { ...quiet, readOnly: true });
    assert.deepEqual((await view.list()).map((e) => [e.step, e.status]), [[1, "ok"], [2, "ok"], [5, "ok"]]);
    await view.close();
    await first.close().catch(() => {});
  });

  test("two managers saving in turn: exactly one commit wins, no update is lost", async (store) => {
    const a = await CheckpointManager.open(store, quiet);
    const b = await CheckpointManager.open(store, quiet); // fences a
    const results = await Promise.allSettled([a.save(makeCheckpoint(1)), b.save(makeCheckpoint(1))]);
    assert.deepEqual(results.map((r) => r.status), ["rejected", "fulfilled"]);
    const view = await CheckpointManager.open(store, { ...quiet, readOnly: true });
    assert.deepEqual((await view.list()).map((e) => e.step), [1]);
    assert.equal((await view.latest())!.metadata.step, 1);
    await Promise.all([a.close().catch(() => {}), b.close(), view.close()]);
  });

  test("open removes objects of uncommitted saves and interrupted uploads, and leaves others alone", async (store) => {
    const first = await CheckpointManager.open(store, { ...quiet, incremental: true });
    const committed = await first.save(makeCheckpoint(1));
    await first.close();
    const put = (key: string, n: number) => store.put(key, new Uint8Array(n).fill(7));
    // What interrupted saves leave: a finished but uncommitted checkpoint object, its manifest,
    // an orphan blob, and an upload that never finished.
    await put("step-000000002.0123456789ab.ckpt", 100);
    await put("step-000000002.0123456789ab.ckpt.manifest.json", 10);
    await put(`blobs/ab/ab${"0".repeat(62)}`, 10);
    const upload = await store.writer("step-000000003.ba9876543210.ckpt");
    await upload.write(new Uint8Array(6 * 2 ** 20)); // over a 5 MiB part: S3 has an upload going
    // Not the manager's: left alone.
    await put("notes.txt", 3);
    await put("step-000000099.ckpt", 5);
    const w = warnings();
    const manager = await CheckpointManager.open(store, { onWarning: w.onWarning, incremental: true });
    assert.equal(w.list.length, 1, w.list.join("\n"));
    const swept = store.sweep ? 1 : 0;
    assert.match(w.list[0]!, new RegExp(`^Removed ${3 + swept} leftover file\\(s\\)`));
    const left = await keys(store);
    assert.ok(left.includes("notes.txt") && left.includes("step-000000099.ckpt"));
    assert.ok(left.includes(committed.path.slice(store.url.length)));
    assert.ok(!left.some((k) => k.includes("0123456789ab") || k.startsWith("blobs/ab/ab000")));
    if (store.sweep) await assert.rejects(upload.close(), "the interrupted upload was swept");
    else await upload.abort();
    assert.equal((await manager.latest())!.metadata.step, 1);
    await manager.close();
  });

  test("checkpoint objects a store holds without an index are adopted after verifying each", async (store) => {
    const writer = await CheckpointManager.open(store, quiet);
    const one = await writer.save(makeCheckpoint(1));
    await writer.close();
    // A plainly named copy, as uploaded by hand, and no index.
    await store.put("step-000000005.ckpt", await bytes(store, one.path.slice(store.url.length)));
    await store.delete(one.path.slice(store.url.length));
    await store.delete("index.json");
    const w = warnings();
    const manager = await CheckpointManager.open(store, { onWarning: w.onWarning });
    // It holds step 1 under a step-5 name: refused, reported and left in place.
    assert.match(w.list.join("\n"), /Not adopting .*step-000000005\.ckpt: its name says step 5 but it holds step 1/);
    assert.deepEqual(await manager.list(), []);
    assert.ok((await keys(store)).includes("step-000000005.ckpt"));
    await manager.close();
  });

  test("a read-only view follows the writer and refuses to write", async (store) => {
    const manager = await CheckpointManager.open(store, { ...quiet, maxToKeep: 3 });
    const view = await CheckpointManager.open(store, { ...quiet, readOnly: true });
    await manager.save(makeCheckpoint(1));
    assert.deepEqual((await view.list()).map((e) => e.step), [1]);
    assert.throws(() => view.save(makeCheckpoint(2)), TypeError);
    // The view did not fence the writer.
    await manager.save(makeCheckpoint(2));
    assert.deepEqual((await view.list()).map((e) => e.step), [1, 2]);
    await Promise.all([manager.close(), view.close()]);
  });
}
