// Sharded checkpoints under Node, from the installed package (`@ckpt/ckpt/shard`): a Deno writer
// and a Node writer in one checkpoint, and a Node round trip read back by row ranges.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cp } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { loadCheckpoint } from "@ckpt/ckpt";
import { readShardManifest, readShards, saveShard, saveSharded } from "@ckpt/ckpt/shard";
import { fixtureCheckpoint } from "./_fixture.mjs";
import { withTempDir } from "./_util.mjs";

const DENO = process.env.CKPT_DENO_FIXTURES ?? "";

function bytesOf(a) {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

function assertSame(back, expected) {
  assert.deepEqual(back.metadata, expected.metadata);
  assert.deepEqual(back.tensors.map((t) => t.name), expected.tensors.map((t) => t.name));
  for (const [i, t] of expected.tensors.entries()) {
    const b = back.tensors[i];
    assert.equal(b.dtype, t.dtype);
    assert.deepEqual(b.shape, t.shape);
    assert.equal(Buffer.compare(bytesOf(b.data), bytesOf(t.data)), 0, `${t.name} differs`);
  }
}

test("a Deno writer and a Node writer write one sharded checkpoint; Node commits and reads it bit for bit", async () => {
  await withTempDir(async (dir) => {
    // Deno wrote writer 0's part and done record (harness.ts); Node writes writer 1's and commits.
    await cp(join(DENO, "sharded.ckpt.parts"), join(dir, "sharded.ckpt.parts"), { recursive: true });
    const address = join(dir, "sharded.ckpt");
    const c = fixtureCheckpoint();
    const r = await saveShard(address, c, {
      writer: 1,
      writers: 2,
      saveId: "mixed",
      splitBytes: 1024,
      commit: true,
      deadline: 10_000,
    });
    assert.match(r.digest, /^[0-9a-f]{64}$/);
    const { manifest } = await readShardManifest(address);
    assert.deepEqual(manifest.parts.map((p) => p.name), ["part-00001-of-00002.ckpt", "part-00002-of-00002.ckpt"]);
    const kernel = manifest.tensors.find((t) => t.name === "dense/kernel");
    assert.deepEqual(kernel.slices.map((s) => s.part), [0, 1], "the large tensor is split between Deno and Node");
    assertSame(await loadCheckpoint(address, { sha256: r.digest }), c);
  });
});

test("saveSharded under Node, read back whole and by row ranges", async () => {
  await withTempDir(async (dir) => {
    const c = fixtureCheckpoint();
    const address = join(dir, "a.ckpt");
    await saveSharded(address, c, { writers: 3, splitBytes: 1024 });
    assertSame(await loadCheckpoint(address), c);
    const rows = await readShards(address, { rows: [{ tensor: "dense/kernel", start: 10, end: 50 }] });
    assert.equal(
      Buffer.compare(bytesOf(rows.tensors[0].data), bytesOf(c.tensors[0].data).subarray(10 * 128, 50 * 128)),
      0,
    );
  });
});
