// Sharded saves through the manager: parts written by this process or by other writers, the
// manifest committed before the index, verified loads, list, retention and best deleting parts,
// leftovers of saves that never committed, incremental refused, the mirror tier, and S3.
import assert from "node:assert/strict";
import type { TensorInput } from "../../src/format/types.ts";
import { CheckpointManager, saveManagedShard } from "../../src/manager/mod.ts";
import { MirroredManager } from "../../src/manager/mirror.ts";
import { ShardDeadlineError } from "../../src/shard/errors.ts";
import { readShardManifest } from "../../src/shard/read.ts";
import { s3Test } from "../_s3.ts";
import { exact as exactInOrder, makeCheckpoint, warnings, withDir } from "./_helpers.ts";

/** Tensors bit for bit, by name (a sharded checkpoint holds its tensors in name order). */
const exact = (tensors: readonly TensorInput[]) =>
  exactInOrder([...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)));

const tensorsOf = (step: number) => makeCheckpoint(step).tensors as TensorInput[];

/** Every file below `dir`, relative, sorted. */
async function tree(dir: string, under = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(`${dir}/${under}`)) {
    const rel = under === "" ? e.name : `${under}/${e.name}`;
    if (e.isDirectory) out.push(...await tree(dir, rel));
    else out.push(rel);
  }
  return out.sort();
}

Deno.test("a sharded manager save commits the manifest, then the index; latest() loads it bit for bit", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir);
    const entry = await manager.save(makeCheckpoint(1), { shards: 3 });
    assert.equal(entry.kind, "sharded");
    assert.equal(entry.tensorCount, 4);
    const { manifest, digest } = await readShardManifest(entry.path);
    assert.equal(digest, entry.sha256);
    assert.equal(manifest.parts.length, 3);
    const files = await tree(dir);
    const partBytes = manifest.parts.reduce((n, p) => n + p.bytes, 0);
    assert.equal(entry.bytes, (await Deno.stat(entry.path)).size + partBytes);
    assert.equal(files.filter((f) => /part-0000\d-of-00003\.ckpt$/.test(f)).length, 3, files.join());
    assert.deepEqual(exact((await manager.latest())!.tensors), exact(tensorsOf(1)));
    const [listed] = await manager.list();
    assert.equal(listed!.status, "ok");
    assert.equal(listed!.kind, "sharded");
    assert.deepEqual(listed!.tensors!.map((t) => t.name).sort(), tensorsOf(1).map((t) => t.name).sort());
    await manager.close();
    // Another manager reads the index and the manifest it names.
    const again = await CheckpointManager.open(dir, { readOnly: true });
    assert.deepEqual(exact((await again.load(1)).tensors), exact(tensorsOf(1)));
    await again.close();
  });
});

Deno.test("retention and best delete a sharded checkpoint's manifest and parts, and keep what the index names", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { maxToKeep: 1, best: { metric: "loss", mode: "min" } });
    const losses = [0.5, 0.1, 0.3, 0.4];
    for (const [i, loss] of losses.entries()) {
      await manager.save(makeCheckpoint(i + 1, { loss }), { shards: 2 });
    }
    assert.deepEqual((await manager.list()).map((e) => [e.step, e.best]), [[2, true], [4, false]]);
    assert.equal((await manager.best())!.metadata.step, 2);
    const kept = new Set<string>(["index.json", "ckpt.lock"]);
    for (const e of await manager.list()) {
      const { manifest } = await readShardManifest(e.path);
      const name = e.path.slice(dir.length + 1);
      kept.add(name);
      // Written by this process, coordinated in memory: parts, no done records.
      for (const p of manifest.parts) kept.add(`${name}.parts/${manifest.saveId}/${p.name}`);
    }
    assert.deepEqual(await tree(dir), [...kept].sort());
    await manager.delete(2);
    assert.deepEqual(
      (await tree(dir)).filter((f) => f.includes("000000002")),
      [],
      "deleting a sharded checkpoint deletes its parts",
    );
    await manager.close();
  });
});

Deno.test("writers in other processes write their parts with saveManagedShard; the manager commits", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { filename: "ckpt-{step}.bin" });
    const checkpoint = makeCheckpoint(7, { trained: 5000 });
    const shards = { writers: 3, saveId: "job-1-step-7", external: true, poll: 20 };
    const [entry] = await Promise.all([
      manager.save(checkpoint, { shards }),
      ...[1, 2].map((writer) =>
        saveManagedShard(dir, checkpoint, { writer, writers: 3, saveId: shards.saveId, filename: "ckpt-{step}.bin" })
      ),
    ]);
    assert.match(entry.path, /ckpt-7\.[0-9a-f]{12}\.bin$/);
    assert.deepEqual(exact((await manager.latest())!.tensors), exact(checkpoint.tensors as TensorInput[]));
    await manager.close();
  });
});

Deno.test("a writer that never finishes fails the save after its deadline; nothing is committed, the next save works", async () => {
  await withDir(async (dir) => {
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    await manager.save(makeCheckpoint(1), { shards: 2 });
    const failed = manager.save(makeCheckpoint(2), {
      shards: { writers: 2, saveId: "lost-writer", external: true, deadline: 300, poll: 20 },
    });
    await assert.rejects(failed, (e) => {
      assert.ok(e instanceof ShardDeadlineError);
      assert.deepEqual(e.missing, [1]);
      assert.match(e.message, /writer 1 of 2 \(part-00002-of-00002\.ckpt\) wrote no done record/);
      return true;
    });
    assert.deepEqual((await manager.list()).map((x) => x.step), [1]);
    assert.equal((await manager.latest())!.metadata.step, 1);
    assert.deepEqual((await tree(dir)).filter((f) => f.includes("000000002")), [], "the attempt's part is removed");
    await manager.save(makeCheckpoint(2), { shards: 2 });
    assert.deepEqual(exact((await manager.latest())!.tensors), exact(tensorsOf(2)));
    await manager.close();
  });
});

Deno.test("parts of a sharded save that never committed are removed when the manager opens", async () => {
  await withDir(async (dir) => {
    const first = await CheckpointManager.open(dir);
    await first.save(makeCheckpoint(1), { shards: 2 });
    await first.close();
    // A writer wrote its part of step 2; its committer died before the manifest.
    await saveManagedShard(dir, makeCheckpoint(2), { writer: 1, writers: 2, saveId: "never" });
    assert.equal((await tree(dir)).filter((f) => f.includes("000000002")).length, 2, "part and done record");
    const w = warnings();
    const again = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    assert.deepEqual((await tree(dir)).filter((f) => f.includes("000000002")), []);
    assert.match(
      w.list.join("\n"),
      /Removed 1 leftover file\(s\).*2 object\(s\) under .*step-000000002\.[0-9a-f]{12}\.ckpt\.parts/,
    );
    assert.deepEqual(exact((await again.latest())!.tensors), exact(tensorsOf(1)));
    await again.close();
  });
});

Deno.test("latest() skips a sharded checkpoint whose part is damaged, and falls back to the one before", async () => {
  await withDir(async (dir) => {
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    await manager.save(makeCheckpoint(1), { shards: 2 });
    const second = await manager.save(makeCheckpoint(2, { trained: 4096 }), { shards: 2 });
    const { manifest } = await readShardManifest(second.path);
    const big = manifest.tensors.find((t) => t.name === "dense/kernel")!.slices[0]!;
    const part = `${second.path}.parts/${manifest.saveId}/${manifest.parts[big.part]!.name}`;
    const bytes = await Deno.readFile(part);
    bytes[big.offset + big.length - 100]! ^= 1; // one bit of the tensor's data
    await Deno.writeFile(part, bytes);
    assert.equal((await manager.latest())!.metadata.step, 1);
    assert.match(w.list.join("\n"), /Skipping checkpoint step 2 .*falling back to an older one/);
    await manager.close();
  });
});

Deno.test("list() says a sharded checkpoint with a missing part is missing", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { onWarning: () => {} });
    const entry = await manager.save(makeCheckpoint(1), { shards: 2 });
    const { manifest } = await readShardManifest(entry.path);
    await Deno.remove(`${entry.path}.parts/${manifest.saveId}/${manifest.parts[1]!.name}`);
    const [listed] = await manager.list();
    assert.equal(listed!.status, "missing");
    assert.match(listed!.problem!, /part .*part-00002-of-00002\.ckpt is missing/);
    await manager.close();
  });
});

Deno.test("a sharded save is refused with incremental, a codec other than binary, and misspelt options", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true });
    await assert.rejects(
      manager.save(makeCheckpoint(1), { shards: 2 }),
      TypeError,
      "a sharded save cannot be incremental",
    );
    await manager.flush().catch(() => {});
    assert.throws(() => manager.save(makeCheckpoint(1), { shard: 2 } as never), TypeError);
    assert.throws(
      () => manager.save(makeCheckpoint(1), { shards: { writers: 2, external: true } }),
      /saveId is required/,
    );
    assert.throws(() => manager.save(makeCheckpoint(1), { shards: 0 }), RangeError);
    await manager.close();
  });
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { compression: "gzip" });
    await assert.rejects(manager.save(makeCheckpoint(1), { shards: 2 }), TypeError, "uncompressed binary");
    await manager.close().catch(() => {});
  });
});

Deno.test("MirroredManager replicates a sharded checkpoint as a sharded one", async () => {
  await withDir(async (root) => {
    const m = await MirroredManager.open(`${root}/local`, `${root}/mirror`, { retryDelay: 20 });
    await m.save(makeCheckpoint(1), { shards: 2 });
    assert.equal(await m.mirrored(10_000), true);
    await m.close();
    const mirror = await CheckpointManager.open(`${root}/mirror`, { readOnly: true });
    const [entry] = await mirror.list();
    assert.equal(entry!.kind, "sharded");
    assert.equal(entry!.status, "ok");
    assert.equal((await readShardManifest(entry!.path)).manifest.parts.length, 2);
    assert.deepEqual(exact((await mirror.latest())!.tensors), exact(tensorsOf(1)));
    await mirror.close();
  });
});

Deno.test("MirroredManager catches up a sharded checkpoint saved before it opened as a sharded one", async () => {
  await withDir(async (root) => {
    const plain = await CheckpointManager.open(`${root}/local`);
    await plain.save(makeCheckpoint(1), { shards: 3 });
    await plain.close();
    const m = await MirroredManager.open(`${root}/local`, `${root}/mirror`, { retryDelay: 20, onWarning: () => {} });
    assert.equal(await m.mirrored(10_000), true);
    await m.close();
    const mirror = await CheckpointManager.open(`${root}/mirror`, { readOnly: true });
    const [entry] = await mirror.list();
    assert.deepEqual([entry!.step, entry!.kind, entry!.status], [1, "sharded", "ok"]);
    assert.equal((await readShardManifest(entry!.path)).manifest.parts.length, 3);
    await mirror.close();
  });
});

s3Test("a sharded manager save to s3:// with a writer beside it, retention deleting parts", async (bucket) => {
  const storage = {
    s3: {
      endpoint: bucket.endpoint.endpoint,
      region: bucket.endpoint.region,
      credentials: bucket.endpoint.credentials,
    },
  };
  const address = `s3://${bucket.name}/runs/sharded`;
  const manager = await CheckpointManager.open(address, { storage, maxToKeep: 1, onWarning: () => {} });
  for (const step of [1, 2]) {
    const shards = { writers: 2, saveId: `step-${step}`, external: true, poll: 50 };
    await Promise.all([
      manager.save(makeCheckpoint(step), { shards }),
      saveManagedShard(address, makeCheckpoint(step), { writer: 1, writers: 2, saveId: shards.saveId, storage }),
    ]);
  }
  await manager.close();
  const again = await CheckpointManager.open(address, { storage, readOnly: true });
  assert.deepEqual((await again.list()).map((e) => [e.step, e.kind, e.status]), [[2, "sharded", "ok"]]);
  assert.deepEqual(exact((await again.latest())!.tensors), exact(tensorsOf(2)));
  await again.close();
  const keys = await Array.fromAsync(bucket.store({ prefix: "runs/sharded/" }).list(""), (o) => o.key);
  assert.equal(keys.filter((k) => k.includes("000000001")).length, 0, keys.join(", "));
  assert.equal(keys.filter((k) => k.includes("000000002")).length, 5, keys.join(", ")); // manifest, 2 parts, 2 done
});
