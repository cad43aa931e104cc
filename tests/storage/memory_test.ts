import assert from "node:assert/strict";
import { MemoryStore } from "../../src/storage/memory.ts";
import { ObjectNotFoundError, PreconditionFailedError } from "../../src/storage/types.ts";
import { testObjectStore } from "./_contract.ts";

const bytes = (...b: number[]) => new Uint8Array(b);
const read = async (body: ReadableStream<Uint8Array>) => new Uint8Array(await new Response(body).arrayBuffer());

Deno.test("MemoryStore round-trips an object and copies it in and out", async () => {
  const store = new MemoryStore();
  const data = bytes(1, 2, 3);
  const info = await store.put("a/b", data);
  data[0] = 99; // the caller's buffer is theirs again
  assert.deepEqual([info.key, info.size], ["a/b", 3]);
  const got = await store.get("a/b");
  assert.deepEqual(await read(got.body), bytes(1, 2, 3));
  assert.deepEqual([got.offset, got.length, got.info.version], [0, 3, info.version]);
});

Deno.test("MemoryStore streams a large body in bounded chunks", async () => {
  const store = new MemoryStore();
  const big = new Uint8Array(300_000).map((_, i) => i & 255);
  await store.put("big", big);
  const sizes: number[] = [];
  const out: Uint8Array[] = [];
  for await (const c of (await store.get("big")).body) {
    sizes.push(c.byteLength);
    out.push(c);
  }
  assert.ok(Math.max(...sizes) <= 64 * 1024);
  assert.deepEqual(new Uint8Array(await new Blob(out as Uint8Array<ArrayBuffer>[]).arrayBuffer()), big);
});

Deno.test("MemoryStore reads ranges, suffixes and clips past the end", async () => {
  const store = new MemoryStore();
  await store.put("x", bytes(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  const cases: [Parameters<MemoryStore["get"]>[1], number, number[]][] = [
    [{ range: { offset: 2, length: 3 } }, 2, [2, 3, 4]],
    [{ range: { offset: 7 } }, 7, [7, 8, 9]],
    [{ range: { suffix: 4 } }, 6, [6, 7, 8, 9]],
    [{ range: { suffix: 40 } }, 0, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]],
    [{ range: { offset: 8, length: 10 } }, 8, [8, 9]],
    [{ range: { offset: 20 } }, 10, []],
    [{ range: { offset: 3, length: 0 } }, 3, []],
  ];
  for (const [options, offset, want] of cases) {
    const got = await store.get("x", options);
    assert.equal(got.offset, offset, JSON.stringify(options));
    assert.equal(got.length, want.length);
    assert.equal(got.info.size, 10);
    assert.deepEqual(await read(got.body), bytes(...want), JSON.stringify(options));
  }
  await store.put("empty", bytes());
  assert.deepEqual(await read((await store.get("empty", { range: { suffix: 8 } })).body), bytes());
  await assert.rejects(store.get("x", { range: { offset: -1 } }), RangeError);
  await assert.rejects(store.get("x", { range: { offset: 0, length: 1.5 } }), RangeError);
});

Deno.test("MemoryStore names an absent object in ObjectNotFoundError", async () => {
  const store = new MemoryStore({ name: "t" });
  await store.get("no/such").then(
    () => assert.fail("expected a rejection"),
    (err) => {
      assert.ok(err instanceof ObjectNotFoundError);
      assert.equal(err.url, "memory://t/no/such");
    },
  );
  assert.equal(await store.head("no/such"), undefined);
});

Deno.test("MemoryStore honours create and ifMatch and changes nothing when they fail", async () => {
  const store = new MemoryStore();
  const v1 = await store.put("idx", bytes(1), { mode: "create" });
  await assert.rejects(store.put("idx", bytes(2), { mode: "create" }), /already exists/);
  const v2 = await store.put("idx", bytes(3), { mode: { ifMatch: v1.version } });
  assert.notEqual(v2.version, v1.version);
  await assert.rejects(store.put("idx", bytes(4), { mode: { ifMatch: v1.version } }), PreconditionFailedError);
  assert.deepEqual(await read((await store.get("idx")).body), bytes(3));
  await store.delete("idx");
  await assert.rejects(store.put("idx", bytes(5), { mode: { ifMatch: v2.version } }), PreconditionFailedError);
  assert.equal(await store.head("idx"), undefined);
  // @ts-expect-error: an unknown mode is a bad argument
  await assert.rejects(store.put("idx", bytes(5), { mode: "append" }), TypeError);
});

Deno.test("MemoryStore gives a new version to every write, even of the same bytes", async () => {
  const store = new MemoryStore();
  const a = await store.put("k", bytes(1));
  const b = await store.put("k", bytes(1));
  const w = await store.writer("k");
  await w.write(bytes(1));
  const c = await w.close();
  assert.equal(new Set([a.version, b.version, c.version]).size, 3);
  assert.equal((await store.head("k"))?.version, c.version);
});

Deno.test("MemoryStore writer publishes only on close and copies chunks", async () => {
  const store = new MemoryStore();
  await store.put("k", bytes(7));
  const w = await store.writer("k");
  const chunk = bytes(1, 2);
  await w.write(chunk);
  chunk.fill(0);
  await w.write(bytes(3));
  assert.deepEqual(await read((await store.get("k")).body), bytes(7));
  assert.deepEqual(await Array.fromAsync(store.list()), [await store.head("k")]);
  const info = await w.close();
  assert.equal(info.size, 3);
  assert.deepEqual(await read((await store.get("k")).body), bytes(1, 2, 3));
  await assert.rejects(w.write(bytes(1)), /already closed/);
  await assert.rejects(w.close(), /already closed/);
});

Deno.test("MemoryStore writer abort keeps the previous object and is safe twice", async () => {
  const store = new MemoryStore();
  await store.put("k", bytes(7));
  const w = await store.writer("k");
  await w.write(bytes(1));
  await w.abort(new Error("stop"));
  await w.abort();
  await assert.rejects(w.close(), /already aborted/);
  assert.deepEqual(await read((await store.get("k")).body), bytes(7));
  assert.equal(await store.sweep(), 0);
});

Deno.test("MemoryStore writer honours its abort signal", async () => {
  const store = new MemoryStore();
  const controller = new AbortController();
  const w = await store.writer("k", { signal: controller.signal });
  await w.write(bytes(1));
  controller.abort(new Error("cancelled"));
  await assert.rejects(w.close(), /cancelled/);
  assert.equal(await store.head("k"), undefined);
  await assert.rejects(store.writer("k", { signal: controller.signal }), /cancelled/);
  await assert.rejects(store.put("k", bytes(1), { signal: controller.signal }), /cancelled/);
});

Deno.test("MemoryStore get body stops when its signal aborts", async () => {
  const store = new MemoryStore();
  await store.put("big", new Uint8Array(200_000));
  const controller = new AbortController();
  const { body } = await store.get("big", { signal: controller.signal });
  const reader = body.getReader();
  await reader.read();
  controller.abort(new Error("enough"));
  await assert.rejects(reader.read(), /enough/);
});

Deno.test("MemoryStore lists by prefix in ascending key order", async () => {
  const store = new MemoryStore();
  for (const k of ["run/b", "run/a/2", "other", "run/a/10", "run/A", "runx"]) await store.put(k, bytes(1));
  assert.deepEqual((await Array.fromAsync(store.list("run/"))).map((o) => o.key), [
    "run/A",
    "run/a/10",
    "run/a/2",
    "run/b",
  ]);
  assert.equal((await Array.fromAsync(store.list())).length, 6);
  assert.deepEqual(await Array.fromAsync(store.list("zzz")), []);
});

Deno.test("MemoryStore sweep discards open writers under a prefix only", async () => {
  const store = new MemoryStore();
  const mine = await store.writer("run/.tmp/a");
  const theirs = await store.writer("other/b");
  await mine.write(bytes(1));
  assert.equal(await store.sweep("run/"), 1);
  assert.equal(await store.sweep("run/"), 0);
  await assert.rejects(mine.close(), /swept/);
  await theirs.write(bytes(2));
  await theirs.close();
  assert.equal(await store.head("run/.tmp/a"), undefined);
  assert.equal((await store.head("other/b"))?.size, 1);
});

Deno.test("MemoryStore refuses malformed keys with a TypeError naming them", async () => {
  const store = new MemoryStore();
  for (const key of ["", "/abs", "a//b", "a/./b", "../up", "dir/"]) {
    await assert.rejects(store.put(key, bytes()), TypeError, key);
    await assert.rejects(store.get(key), TypeError);
    await assert.rejects(store.writer(key), TypeError);
    await assert.rejects(store.head(key), TypeError);
    await assert.rejects(store.delete(key), TypeError);
  }
});

testObjectStore("MemoryStore", () => {
  const store = new MemoryStore();
  return Promise.resolve({
    store,
    seed: async (key: string, bytes: Uint8Array) => void await store.put(key, bytes),
    close: () => Promise.resolve(),
  });
});
