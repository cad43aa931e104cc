// A sharded manager save under Node, from the installed package: Node's CheckpointManager writes
// part 0 and commits, a Deno writer's part (saveManagedShard, written by harness.ts) is the other.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cp, readdir } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { CheckpointManager } from "@ckpt/ckpt";
import { readShardManifest } from "@ckpt/ckpt/shard";
import { fixtureCheckpoint } from "./_fixture.mjs";
import { withTempDir } from "./_util.mjs";

const DENO = process.env.CKPT_DENO_FIXTURES ?? "";

const bytesOf = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const byName = (tensors) => [...tensors].sort((a, b) => (a.name < b.name ? -1 : 1));

test("Node's manager commits a sharded save whose other part a Deno writer wrote; latest() reads it bit for bit", async () => {
  await withTempDir(async (dir) => {
    const run = join(dir, "run");
    // The committer opens first (its open removes uncommitted parts), then the Deno part arrives.
    const manager = await CheckpointManager.open(run);
    for (const name of await readdir(join(DENO, "managed"))) {
      await cp(join(DENO, "managed", name), join(run, name), { recursive: true });
    }
    const c = fixtureCheckpoint();
    const shards = { writers: 2, saveId: "managed-mixed", external: true, splitBytes: 1024, deadline: 10_000 };
    const entry = await manager.save(c, { shards });
    assert.equal(entry.kind, "sharded");
    const { manifest } = await readShardManifest(entry.path);
    const kernel = manifest.tensors.find((t) => t.name === "dense/kernel");
    assert.deepEqual(kernel.slices.map((s) => s.part), [0, 1], "the large tensor is split between Node and Deno");
    const back = await manager.latest();
    assert.deepEqual(back.metadata, c.metadata);
    const want = byName(c.tensors);
    for (const [i, t] of byName(back.tensors).entries()) {
      assert.equal(t.name, want[i].name);
      assert.equal(Buffer.compare(bytesOf(t.data), bytesOf(want[i].data)), 0, `${t.name} differs`);
    }
    await manager.close();
  });
});
