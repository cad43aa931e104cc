import assert from "node:assert/strict";
import { loadCheckpoint, readCheckpointIndex, saveCheckpoint } from "../../mod.ts";
import { FileStore } from "../../src/storage/file.ts";
import { HttpStore } from "../../src/storage/http.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import { isAddress, resolveDirectory, resolveObject } from "../../src/storage/resolve.ts";

Deno.test("resolveObject maps paths, file:, http(s):, s3: and { store, key } to a store and a key", () => {
  const local = resolveObject("/data/runs/step-5.ckpt");
  assert.ok(local.store instanceof FileStore);
  assert.deepEqual([local.store.url, local.key], ["file:///data/runs/", "step-5.ckpt"]);
  const rel = resolveObject("x.ckpt");
  assert.equal(rel.store.url, new URL(`file://${Deno.cwd()}/`).href);
  const url = resolveObject(new URL("file:///data/a%20b.ckpt"));
  assert.deepEqual([url.store.url, url.key], ["file:///data/", "a b.ckpt"]);
  const http = resolveObject("https://host.example/models/v1/m%C3%BC.ckpt");
  assert.ok(http.store instanceof HttpStore);
  assert.deepEqual([http.store.url, http.key, http.store.writable], [
    "https://host.example/models/v1/",
    "mü.ckpt",
    false,
  ]);
  const s3 = resolveObject("s3://bucket/run/sub/step-5.ckpt");
  assert.deepEqual([s3.store.url, s3.key, s3.store.writable], ["s3://bucket/run/sub/", "step-5.ckpt", true]);
  const top = resolveObject("s3://bucket/a.ckpt");
  assert.deepEqual([top.store.url, top.key], ["s3://bucket/", "a.ckpt"]);
  const mine = { store: new MemoryStore(), key: "k" };
  assert.equal(resolveObject(mine), mine);
});

Deno.test("resolveObject refuses what names no object, and unknown schemes, with a TypeError", () => {
  for (const bad of ["", "https://host/dir/", "s3://bucket/prefix/", "s3:///key", "ftp://host/x", "/"]) {
    assert.throws(() => resolveObject(bad), TypeError, JSON.stringify(bad));
  }
  assert.throws(() => resolveObject(42 as unknown as string), TypeError);
});

Deno.test("resolveDirectory gives a store rooted at a directory address", () => {
  assert.ok(resolveDirectory("/data/runs") instanceof FileStore);
  assert.equal(resolveDirectory("/data/runs").url, "file:///data/runs/");
  assert.equal(resolveDirectory("s3://bucket/run").url, "s3://bucket/run/");
  assert.equal(resolveDirectory("s3://bucket").url, "s3://bucket/");
  assert.equal(resolveDirectory("http://127.0.0.1:1/m").url, "http://127.0.0.1:1/m/");
  const store = new MemoryStore();
  assert.equal(resolveDirectory(store), store);
  assert.throws(() => resolveDirectory("gs://x/y"), TypeError);
});

Deno.test("isAddress tells addresses from bytes and streams", () => {
  assert.ok(isAddress("a.ckpt"));
  assert.ok(isAddress(new URL("https://h/x")));
  assert.ok(isAddress({ store: new MemoryStore(), key: "x" }));
  assert.ok(!isAddress(new Uint8Array(1)));
  assert.ok(!isAddress(ReadableStream.from([])));
  assert.ok(!isAddress({ key: "x" }));
});

Deno.test("save, load and readCheckpointIndex work on a { store, key } of any store", async () => {
  const store = new MemoryStore();
  const tensors = [
    { name: "a", dtype: "float32" as const, shape: [3], data: new Float32Array([1, 2, 3]) },
    { name: "b", dtype: "int8" as const, shape: [2], data: new Int8Array([-1, 1]) },
  ];
  const { digest, bytes } = await saveCheckpoint({ store, key: "run/x.ckpt" }, { metadata: { step: 3 }, tensors });
  assert.equal((await store.head("run/x.ckpt"))?.size, bytes);
  const all = await loadCheckpoint({ store, key: "run/x.ckpt" }, { sha256: digest });
  assert.deepEqual(all.tensors.map((t) => [...t.data]), [[1, 2, 3], [-1, 1]]);
  const some = await loadCheckpoint({ store, key: "run/x.ckpt" }, { only: ["b"] });
  assert.deepEqual(some.tensors.map((t) => t.name), ["b"]);
  const index = await readCheckpointIndex({ store, key: "run/x.ckpt" });
  assert.deepEqual(index.tensors.map((t) => t.name), ["a", "b"]);
  assert.equal(index.bytes, bytes);
});

Deno.test("opfs: addresses name the browser's Origin Private File System; in Deno using one says why not", async () => {
  const { store, key } = resolveObject("opfs:///runs/demo/step-5.ckpt");
  assert.deepEqual([store.url, key], ["opfs:///runs/demo/", "step-5.ckpt"]);
  assert.equal(resolveObject("opfs:///a.ckpt").store.url, "opfs:///");
  assert.equal(resolveDirectory("opfs:///runs/demo").url, "opfs:///runs/demo/");
  assert.throws(() => resolveObject("opfs://runs/a.ckpt"), /has no host \(write opfs:\/\/\/runs\/a\.ckpt\)/);
  assert.throws(() => resolveObject("opfs:///runs/"), /names a directory/);
  await assert.rejects(store.head(key), /no navigator\.storage\.getDirectory\(\)/);
});

Deno.test("an s3:// address resolves to a store that says how it reads whole objects, before its module loads", () => {
  // loadCheckpoint reads an object with `ranged` as a file (src/storage/object_reader.ts); without
  // it an s3:// address fell back to decoding the stream of one GET, hashed on the main thread.
  assert.deepEqual(resolveObject("s3://bucket/run/a.ckpt").store.ranged, { concurrency: 1, partSize: 8 * 2 ** 20 });
  const tuned = resolveObject("s3://bucket/a.ckpt", { s3: { readConcurrency: 4, partSize: 16 * 2 ** 20 } });
  assert.deepEqual(tuned.store.ranged, { concurrency: 4, partSize: 16 * 2 ** 20 });
});
