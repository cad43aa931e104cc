// The ObjectStore contract as tests: every backend runs this suite against itself
// (`testObjectStore("FileStore", factory)`), so code above the storage layer can rely on the
// same behaviour whichever store it has. Read-only stores run the read rules, with objects
// seeded some other way (files behind an HTTP server, say).
import assert from "node:assert/strict";
import {
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  PreconditionFailedError,
} from "../../src/storage/types.ts";
import { prng } from "../_util.ts";

/** One store under test, fresh and empty, and how to end it. */
export interface StoreFixture {
  store: ObjectStore;
  /** Makes an object exist with these bytes (for read-only stores: behind the store's back). */
  seed(key: string, bytes: Uint8Array): Promise<void>;
  /** Releases everything the fixture made. */
  close(): Promise<void>;
}

/** How to run the suite. */
export interface ContractOptions {
  /** Run only the read rules (for read-only stores such as HTTP). @default {false} */
  readOnly?: boolean;
  /** Register the tests but skip them (a backend whose server is absent). @default {false} */
  ignore?: boolean;
  /** Whether the store can list (HTTP cannot). @default {true} */
  list?: boolean;
  /** Sanitizers off, for stores that keep connections alive between tests. @default {true} */
  sanitize?: boolean;
  /** Whether keys may hold a backslash (a file store on POSIX). @default {false} */
  backslashKeys?: boolean;
  /** Rules this backend cannot keep, each with the reason (printed, and the rule skipped). */
  cannot?: Record<string, string>;
}

/** Reads a body to the end. */
export async function bytesOf(body: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(body).arrayBuffer());
}

/** Deterministic pseudo-random bytes. */
export function randomBytes(n: number, seed = 1): Uint8Array {
  const next = prng(seed);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(next() * 256);
  return out;
}

async function keysOf(store: ObjectStore, prefix?: string): Promise<string[]> {
  return (await Array.fromAsync(store.list(prefix))).map((o: ObjectInfo) => o.key);
}

const BAD_KEYS = ["", "/a", "a/../b", "..", "./a", "a/.", "a//b", "a/", "a\\b", "a\0b"];

/**
 * Registers the ObjectStore contract tests for one backend, named `"<name> <rule>"`. `fixture`
 * is called once per test and must give an empty store.
 */
export function testObjectStore(
  name: string,
  fixture: () => Promise<StoreFixture>,
  options: ContractOptions = {},
): void {
  const readOnly = options.readOnly ?? false;
  const canList = options.list ?? true;
  const sanitize = options.sanitize ?? true;
  const test = (rule: string, fn: (f: StoreFixture) => Promise<void>, only?: "write" | "list") => {
    if (only === "write" && readOnly) return;
    if (only === "list" && !canList) return;
    const cannot = options.cannot?.[rule];
    if (cannot && !options.ignore) console.log(`${name} ${rule}: not run: ${cannot}`);
    Deno.test({
      name: `${name} ${rule}`,
      ignore: (options.ignore ?? false) || cannot !== undefined,
      sanitizeOps: sanitize,
      sanitizeResources: sanitize,
      async fn() {
        const f = await fixture();
        try {
          await fn(f);
        } finally {
          await f.close();
        }
      },
    });
  };

  // --- Reads -------------------------------------------------------------------------------

  test("get returns the whole object and describes it", async ({ store, seed }) => {
    const data = randomBytes(100_000, 2);
    await seed("dir/obj.bin", data);
    const r = await store.get("dir/obj.bin");
    assert.equal(r.offset, 0);
    assert.equal(r.length, data.byteLength);
    assert.equal(r.info.key, "dir/obj.bin");
    assert.equal(r.info.size, data.byteLength);
    assert.equal(typeof r.info.version, "string");
    assert.ok(r.info.version.length > 0);
    assert.deepEqual(await bytesOf(r.body), data);
  });

  test("head describes an object like get does, and gives undefined for an absent one", async ({ store, seed }) => {
    await seed("a.bin", new Uint8Array([1, 2, 3]));
    const info = await store.head("a.bin");
    assert.ok(info);
    assert.equal(info.key, "a.bin");
    assert.equal(info.size, 3);
    const r = await store.get("a.bin");
    await r.body.cancel();
    assert.equal(r.info.version, info.version);
    assert.equal(await store.head("absent.bin"), undefined);
    assert.equal(await store.head("no/such/dir/x"), undefined);
  });

  test("get of an absent object is an ObjectNotFoundError naming it", async ({ store }) => {
    const e = await store.get("missing/obj.bin").then(() => undefined, (e) => e);
    assert.ok(e instanceof ObjectNotFoundError, `got ${e}`);
    assert.match(e.url, /missing\/obj\.bin$/);
    assert.ok(e.url.startsWith(store.url), `${e.url} is not under ${store.url}`);
  });

  test("get with a range returns exactly those bytes, clipped to the object", async ({ store, seed }) => {
    const data = randomBytes(10_000, 3);
    await seed("r.bin", data);
    const cases: [Parameters<ObjectStore["get"]>[1], number, number][] = [
      [{ range: { offset: 0, length: 10 } }, 0, 10],
      [{ range: { offset: 1234, length: 4321 } }, 1234, 4321],
      [{ range: { offset: 9000 } }, 9000, 1000],
      [{ range: { offset: 9990, length: 100 } }, 9990, 10], // runs past the end: clipped
      [{ range: { offset: 10_000 } }, 10_000, 0], // starts at the end: empty
      [{ range: { offset: 20_000, length: 5 } }, 10_000, 0], // starts past the end: empty
      [{ range: { offset: 5, length: 0 } }, 5, 0],
      [{ range: { suffix: 64 } }, 10_000 - 64, 64],
      [{ range: { suffix: 10_000 } }, 0, 10_000],
      [{ range: { suffix: 65_536 } }, 0, 10_000], // longer than the object: all of it
    ];
    for (const [opts, offset, length] of cases) {
      const r = await store.get("r.bin", opts);
      const got = await bytesOf(r.body);
      const what = JSON.stringify(opts);
      assert.equal(r.offset, offset, what);
      assert.equal(r.length, length, what);
      assert.equal(r.info.size, 10_000, what);
      assert.deepEqual(got, data.subarray(offset, offset + length), what);
    }
  });

  test("an empty object reads as an empty body, with or without a range", async ({ store, seed }) => {
    await seed("empty", new Uint8Array(0));
    for (const range of [undefined, { suffix: 10 }, { offset: 0, length: 10 }, { offset: 3 }]) {
      const r = await store.get("empty", range ? { range } : {});
      assert.equal(r.info.size, 0);
      assert.equal(r.length, 0);
      assert.equal((await bytesOf(r.body)).byteLength, 0);
    }
  });

  test("get refuses a malformed range with a RangeError", async ({ store, seed }) => {
    await seed("m.bin", new Uint8Array(8));
    for (const range of [{ offset: -1 }, { offset: 1.5 }, { offset: 0, length: -2 }, { suffix: -1 }, { suffix: NaN }]) {
      await assert.rejects(() => store.get("m.bin", { range }), RangeError, JSON.stringify(range));
    }
  });

  test("a cancelled body releases the object", async ({ store, seed }) => {
    await seed("c.bin", randomBytes(3 * 2 ** 20, 4));
    const r = await store.get("c.bin");
    const reader = r.body.getReader();
    const first = await reader.read();
    assert.ok(!first.done && first.value.byteLength > 0);
    await reader.cancel();
    // The sanitizers (where on) check that nothing stays open.
  });

  test("keys are validated: empty, absolute, . and .. segments are a TypeError", async ({ store }) => {
    for (const key of BAD_KEYS.filter((k) => !(options.backslashKeys && k.includes("\\")))) {
      const what = JSON.stringify(key);
      await assert.rejects(async () => await store.get(key), TypeError, what);
      await assert.rejects(async () => await store.head(key), TypeError, what);
      if (!readOnly) {
        await assert.rejects(async () => await store.put(key, new Uint8Array(1)), TypeError, what);
        await assert.rejects(async () => await store.writer(key), TypeError, what);
        await assert.rejects(async () => await store.delete(key), TypeError, what);
      }
    }
  });

  test("keys may hold spaces, unicode and many segments", async ({ store, seed }) => {
    const keys = ["with space.bin", "ünï/cødé/🙂.bin", "a/b/c/d/e/f.bin", "percent%20sign", "q?x#y"];
    for (const [i, key] of keys.entries()) await seed(key, new Uint8Array([i]));
    for (const [i, key] of keys.entries()) {
      const r = await store.get(key);
      assert.equal(r.info.key, key);
      assert.deepEqual(await bytesOf(r.body), new Uint8Array([i]));
    }
  });

  // --- Listing -----------------------------------------------------------------------------

  test("list gives every object under a prefix in ascending key order", async ({ store, seed }) => {
    const keys = ["run/b.ckpt", "run/a.ckpt", "run/sub/c.ckpt", "runs/x", "other/y", "top"];
    for (const key of keys) await seed(key, new TextEncoder().encode(key));
    assert.deepEqual(await keysOf(store), [...keys].sort());
    assert.deepEqual(await keysOf(store, ""), [...keys].sort());
    assert.deepEqual(await keysOf(store, "run/"), ["run/a.ckpt", "run/b.ckpt", "run/sub/c.ckpt"]);
    assert.deepEqual(await keysOf(store, "run"), ["run/a.ckpt", "run/b.ckpt", "run/sub/c.ckpt", "runs/x"]);
    assert.deepEqual(await keysOf(store, "run/a"), ["run/a.ckpt"]);
    assert.deepEqual(await keysOf(store, "nothing/"), []);
    const infos = await Array.fromAsync(store.list("run/"));
    assert.deepEqual(infos.map((o) => o.size), [10, 10, 14]);
    await assert.rejects(() => Array.fromAsync(store.list("../")), TypeError);
    await assert.rejects(() => Array.fromAsync(store.list("/abs")), TypeError);
  }, "list");

  test("list of an empty store gives nothing", async ({ store }) => {
    assert.deepEqual(await keysOf(store), []);
  }, "list");

  // --- Writes ------------------------------------------------------------------------------

  test("put then get returns the same bytes, and put overwrites", async ({ store }) => {
    const a = randomBytes(5000, 5);
    const infoA = await store.put("p/x.bin", a);
    assert.equal(infoA.key, "p/x.bin");
    assert.equal(infoA.size, 5000);
    assert.deepEqual(await bytesOf((await store.get("p/x.bin")).body), a);
    assert.equal((await store.head("p/x.bin"))?.version, infoA.version);
    const b = randomBytes(300, 6);
    const infoB = await store.put("p/x.bin", b);
    assert.notEqual(infoB.version, infoA.version);
    assert.deepEqual(await bytesOf((await store.get("p/x.bin")).body), b);
    assert.equal((await store.head("p/x.bin"))?.version, infoB.version);
  }, "write");

  test('put "create" writes only when no object exists', async ({ store }) => {
    const info = await store.put("c.bin", new Uint8Array([1]), { mode: "create" });
    assert.equal(info.size, 1);
    const e = await store.put("c.bin", new Uint8Array([2, 2]), { mode: "create" }).then(() => undefined, (e) => e);
    assert.ok(e instanceof PreconditionFailedError, `got ${e}`);
    assert.match(e.url, /c\.bin$/);
    assert.deepEqual(await bytesOf((await store.get("c.bin")).body), new Uint8Array([1]));
    assert.deepEqual(await keysOf(store), ["c.bin"]);
  }, "write");

  test('concurrent "create" puts: exactly one wins', async ({ store }) => {
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => store.put("race.bin", new Uint8Array([i]), { mode: "create" })),
    );
    const won = results.filter((r) => r.status === "fulfilled");
    assert.equal(won.length, 1);
    for (const r of results) {
      if (r.status === "rejected") assert.ok(r.reason instanceof PreconditionFailedError, String(r.reason));
    }
    const got = await bytesOf((await store.get("race.bin")).body);
    assert.equal((won[0] as PromiseFulfilledResult<ObjectInfo>).value.size, 1);
    assert.equal(got.byteLength, 1);
    assert.deepEqual(await keysOf(store), ["race.bin"]);
  }, "write");

  test("put { ifMatch } replaces only the version it names", async ({ store }) => {
    const v1 = await store.put("i.json", new TextEncoder().encode("one"));
    const v2 = await store.put("i.json", new TextEncoder().encode("two!"), { mode: { ifMatch: v1.version } });
    assert.notEqual(v2.version, v1.version);
    // v1 is stale now.
    const e = await store.put("i.json", new TextEncoder().encode("three"), { mode: { ifMatch: v1.version } })
      .then(() => undefined, (e) => e);
    assert.ok(e instanceof PreconditionFailedError, `got ${e}`);
    assert.equal(new TextDecoder().decode(await bytesOf((await store.get("i.json")).body)), "two!");
    // An absent object matches no version.
    await assert.rejects(
      () => store.put("absent.json", new Uint8Array(1), { mode: { ifMatch: v2.version } }),
      PreconditionFailedError,
    );
    assert.equal(await store.head("absent.json"), undefined);
    assert.deepEqual(await keysOf(store), ["i.json"]);
  }, "write");

  test("concurrent { ifMatch } puts of one version: exactly one wins", async ({ store }) => {
    const v = await store.put("idx", new Uint8Array([0]));
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => store.put("idx", new Uint8Array([i + 1]), { mode: { ifMatch: v.version } })),
    );
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
    for (const r of results) {
      if (r.status === "rejected") assert.ok(r.reason instanceof PreconditionFailedError, String(r.reason));
    }
  }, "write");

  test("put refuses a bad mode with a TypeError", async ({ store }) => {
    // deno-lint-ignore no-explicit-any
    await assert.rejects(() => store.put("m", new Uint8Array(1), { mode: "append" as any }), TypeError);
    assert.equal(await store.head("m"), undefined);
  }, "write");

  test("a writer streams an object of many chunks bit for bit", async ({ store }) => {
    const data = randomBytes(20 * 2 ** 20 + 12345, 7);
    const next = prng(8);
    const w = await store.writer("big/obj.bin", { sizeHint: data.byteLength });
    for (let off = 0; off < data.byteLength;) {
      const n = Math.min(data.byteLength - off, 1 + Math.floor(next() * 3 * 2 ** 20));
      await w.write(data.subarray(off, off + n));
      off += n;
    }
    const info = await w.close();
    assert.equal(info.key, "big/obj.bin");
    assert.equal(info.size, data.byteLength);
    assert.equal((await store.head("big/obj.bin"))?.version, info.version);
    assert.deepEqual(await bytesOf((await store.get("big/obj.bin")).body), data);
  }, "write");

  test("a writer holds no reference to a chunk once write resolves", async ({ store }) => {
    const buf = new Uint8Array(1000).fill(7);
    const w = await store.writer("reuse-chunk.bin");
    await w.write(buf);
    buf.fill(9); // the caller recycles its buffer
    await w.write(buf);
    await w.close();
    const got = await bytesOf((await store.get("reuse-chunk.bin")).body);
    assert.deepEqual(got, new Uint8Array([...new Uint8Array(1000).fill(7), ...new Uint8Array(1000).fill(9)]));
  }, "write");

  test("readers never see a partial object: the previous one until close, then the new one", async ({ store }) => {
    const old = randomBytes(4096, 9);
    await store.put("atomic.bin", old);
    const w = await store.writer("atomic.bin");
    await w.write(randomBytes(3 * 2 ** 20, 10));
    assert.deepEqual(await bytesOf((await store.get("atomic.bin")).body), old);
    assert.equal((await store.head("atomic.bin"))?.size, 4096);
    if (canList) assert.deepEqual(await keysOf(store), ["atomic.bin"]);
    const fresh = randomBytes(2 ** 20, 11);
    await w.write(fresh);
    const info = await w.close();
    assert.equal(info.size, 4 * 2 ** 20);
    const got = await bytesOf((await store.get("atomic.bin")).body);
    assert.equal(got.byteLength, 4 * 2 ** 20);
    assert.deepEqual(got.subarray(3 * 2 ** 20), fresh);
  }, "write");

  test("a new object is invisible until its writer closes", async ({ store }) => {
    const w = await store.writer("new/obj.bin");
    await w.write(new Uint8Array(100));
    assert.equal(await store.head("new/obj.bin"), undefined);
    await assert.rejects(() => store.get("new/obj.bin"), ObjectNotFoundError);
    if (canList) assert.deepEqual(await keysOf(store), []);
    await w.close();
    assert.equal((await store.head("new/obj.bin"))?.size, 100);
  }, "write");

  test("abort leaves the previous object and nothing else; abort twice is safe", async ({ store }) => {
    const old = randomBytes(1000, 12);
    await store.put("ab.bin", old);
    const w = await store.writer("ab.bin");
    await w.write(randomBytes(2 * 2 ** 20, 13));
    await w.abort(new Error("stop"));
    await w.abort();
    await assert.rejects(() => w.write(new Uint8Array(1)));
    await assert.rejects(() => w.close());
    assert.deepEqual(await bytesOf((await store.get("ab.bin")).body), old);
    if (canList) assert.deepEqual(await keysOf(store), ["ab.bin"]);
    const fresh = await store.writer("never.bin");
    await fresh.write(new Uint8Array(10));
    await fresh.abort();
    assert.equal(await store.head("never.bin"), undefined);
    if (canList) assert.deepEqual(await keysOf(store), ["ab.bin"]);
    if (store.sweep) assert.equal(await store.sweep(), 0);
  }, "write");

  test("an aborted signal stops a writer and keeps the previous object", async ({ store }) => {
    await store.put("sig.bin", new Uint8Array([1, 2, 3]));
    const ac = new AbortController();
    const w = await store.writer("sig.bin", { signal: ac.signal });
    await w.write(new Uint8Array(1024));
    ac.abort(new Error("cancelled by the test"));
    await assert.rejects(() => w.write(new Uint8Array(1)), /cancelled by the test/);
    await assert.rejects(() => w.close());
    assert.deepEqual(await bytesOf((await store.get("sig.bin")).body), new Uint8Array([1, 2, 3]));
    if (canList) assert.deepEqual(await keysOf(store), ["sig.bin"]);
    const done = new AbortController();
    done.abort();
    await assert.rejects(() => store.writer("x.bin", { signal: done.signal }));
    await assert.rejects(() => store.put("x.bin", new Uint8Array(1), { signal: done.signal }));
    assert.equal(await store.head("x.bin"), undefined);
  }, "write");

  test(
    "a writer with reuse writes the right bytes whatever the store does with the recycled object",
    async ({ store }) => {
      await store.put("old/step-1.ckpt", randomBytes(3 * 2 ** 20, 14));
      const data = randomBytes(2 ** 20 + 3, 15);
      const w = await store.writer("new/step-2.ckpt", { reuse: "old/step-1.ckpt" });
      await w.write(data);
      const info = await w.close();
      assert.equal(info.size, data.byteLength);
      assert.deepEqual(await bytesOf((await store.get("new/step-2.ckpt")).body), data);
      // Reusing an absent object is fine too.
      const w2 = await store.writer("c.bin", { reuse: "absent.bin" });
      await w2.write(new Uint8Array([4]));
      await w2.close();
      assert.deepEqual(await bytesOf((await store.get("c.bin")).body), new Uint8Array([4]));
    },
    "write",
  );

  test("delete removes an object; deleting an absent one is not an error", async ({ store }) => {
    await store.put("d/x", new Uint8Array([1]));
    await store.put("d/y", new Uint8Array([2]));
    await store.delete("d/x");
    await store.delete("d/x");
    await store.delete("never/was");
    assert.equal(await store.head("d/x"), undefined);
    await assert.rejects(() => store.get("d/x"), ObjectNotFoundError);
    if (canList) assert.deepEqual(await keysOf(store), ["d/y"]);
  }, "write");

  test("an object written is listed with the size and version head gives", async ({ store }) => {
    const a = await store.put("l/a", new Uint8Array(3));
    const w = await store.writer("l/b");
    await w.write(new Uint8Array(5));
    const b = await w.close();
    const listed = await Array.fromAsync(store.list("l/"));
    assert.deepEqual(listed.map((o) => [o.key, o.size, o.version]), [["l/a", 3, a.version], ["l/b", 5, b.version]]);
  }, "write");

  if (readOnly) {
    test("write methods throw a TypeError", async ({ store }) => {
      assert.equal(store.writable, false);
      await assert.rejects(async () => await store.put("a", new Uint8Array(1)), TypeError);
      await assert.rejects(async () => await store.writer("a"), TypeError);
      await assert.rejects(async () => await store.delete("a"), TypeError);
    });
  } else {
    test("is writable", ({ store }) => {
      assert.equal(store.writable, true);
      return Promise.resolve();
    });
  }
}
