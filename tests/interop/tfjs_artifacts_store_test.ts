// TF.js artifacts on every kind of store: a memory store (round trips, and a write failing at
// every step), a local HTTP server honouring Range (reads), and S3 (Ceph RGW: writes and reads).
import assert from "node:assert/strict";
import { join } from "node:path";
import { ChecksumMismatchError, encodeCheckpoint, saveCheckpoint } from "../../mod.ts";
import type { Checkpoint, CheckpointInput, TensorInput } from "../../src/format/types.ts";
import { readTfjsArtifacts, writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import {
  type GetOptions,
  type GetResult,
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  type ObjectWriter,
  type PutOptions,
  type WriteOptions,
} from "../../src/storage/types.ts";
import { s3Fetch, s3Test } from "../_s3.ts";
import { serveDirectory } from "../storage/_http_server.ts";

const encoder = new TextEncoder();

/** Tensors of several dtypes (some converted for TF.js), `n` floats each, distinct per `seed`. */
function model(seed: number, n = 1000): CheckpointInput {
  const f = new Float32Array(n).map((_, i) => seed * 1e4 + i + 0.5);
  const h = new Uint16Array(n).map((_, i) => (seed + i) & 0x7bff);
  const b = new Uint8Array(n).map((_, i) => (seed + i) & 1);
  return {
    metadata: { step: seed, metrics: { loss: 1 / (seed + 1) }, custom: { run: "store-test" } },
    tensors: [
      { name: "dense/kernel", dtype: "float32", shape: [n], data: f },
      { name: "dense/bias", dtype: "float16", shape: [n], data: h, group: "buffers" },
      { name: "mask", dtype: "bool", shape: [n], data: b },
      { name: "opt/iter", dtype: "int8", shape: [1], data: new Int8Array([seed]), group: "optimizer" },
    ] satisfies TensorInput[],
  };
}

/** The binary checkpoint bytes of `c`: equal bytes mean an identical checkpoint, bit for bit. */
async function ckptBytes(c: CheckpointInput | Checkpoint): Promise<Uint8Array> {
  return new Uint8Array(await new Response(encodeCheckpoint(c as CheckpointInput)).arrayBuffer());
}

async function objects(store: ObjectStore): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  for await (const o of store.list()) {
    out.set(o.key, new Uint8Array(await new Response((await store.get(o.key)).body).arrayBuffer()));
  }
  return out;
}

Deno.test("TF.js artifacts in a memory store round trip bit for bit, byte-identical to a local export", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-tfjs-store-" });
  try {
    for (const shardBytes of [undefined, 1500]) {
      const options = shardBytes === undefined ? {} : { shardBytes };
      const store = new MemoryStore({ name: "web" });
      const out = await writeTfjsArtifacts(store, model(1), options);
      assert.equal(out.modelJson, "memory://web/model.json");
      const back = await readTfjsArtifacts(out.object);
      assert.deepEqual(await ckptBytes(back), await ckptBytes(model(1)));
      // The same checkpoint exported to a directory gives the same objects, names included.
      const local = await writeTfjsArtifacts(join(dir, String(shardBytes)), model(1), options);
      const stored = await objects(store);
      assert.deepEqual(
        [...stored.keys()].sort(),
        ["model.json", ...local.shards.map((p) => p.slice(p.lastIndexOf("/") + 1))].sort(),
      );
      for (const [key, bytes] of stored) {
        assert.deepEqual(bytes, await Deno.readFile(join(dir, String(shardBytes), key)), key);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js export to a store names shards from a binary source's index, and by number where no index says", async () => {
  const src = new MemoryStore({ name: "src" });
  await saveCheckpoint({ store: src, key: "a.ckpt" }, model(2));
  await saveCheckpoint({ store: src, key: "a.jsonl" }, model(2), { codec: "json" });
  // A binary checkpoint: its index gives the weight bytes (4000 + 2000 + 1000 + 4), so the names are TF.js's.
  const fromIndex = new MemoryStore();
  const a = await writeTfjsArtifacts(fromIndex, { store: src, key: "a.ckpt" }, { shardBytes: 3000 });
  assert.deepEqual(a.shards, [1, 2, 3].map((i) => `memory://store/weights-shard${i}of3.bin`));
  // JSON Lines has no index: the count is unknown until the end, so shards are numbered only.
  const fromJson = new MemoryStore();
  const b = await writeTfjsArtifacts(fromJson, { store: src, key: "a.jsonl" }, { shardBytes: 3000 });
  assert.deepEqual(b.shards, [1, 2, 3].map((i) => `memory://store/weights-shard${i}.bin`));
  for (const store of [fromIndex, fromJson]) {
    assert.deepEqual(await ckptBytes(await readTfjsArtifacts({ store, key: "model.json" })), await ckptBytes(model(2)));
  }
  // A dtype TF.js cannot hold is refused before anything is written when the index tells it.
  const wide = new MemoryStore();
  await saveCheckpoint({ store: src, key: "f64.ckpt" }, {
    metadata: { step: 0 },
    tensors: [{ name: "d", dtype: "float64", shape: [1], data: new Float64Array([0.1]) }],
  });
  await assert.rejects(
    writeTfjsArtifacts(wide, { store: src, key: "f64.ckpt" }),
    /dtype float64 has no TF.js weight type/,
  );
  assert.deepEqual(await objects(wide), new Map());
});

/**
 * A memory store whose `fail`-th write operation (delete, put, opening a writer, a write, a
 * close) throws, as a store that goes away mid-export does: what was published before stays,
 * the failing object is not published.
 */
class FailingStore implements ObjectStore {
  readonly url: string;
  readonly writable = true;
  ops = 0;
  #inner: MemoryStore;
  #fail: number;
  constructor(inner: MemoryStore, fail: number) {
    this.#inner = inner;
    this.#fail = fail;
    this.url = inner.url;
  }
  #step(what: string): void {
    if (++this.ops === this.#fail) throw new Error(`injected failure at operation ${this.ops} (${what})`);
  }
  get(key: string, options?: GetOptions): Promise<GetResult> {
    return this.#inner.get(key, options);
  }
  head(key: string): Promise<ObjectInfo | undefined> {
    return this.#inner.head(key);
  }
  async put(key: string, data: Uint8Array, options?: PutOptions): Promise<ObjectInfo> {
    this.#step(`put ${key}`);
    return await this.#inner.put(key, data, options);
  }
  async delete(key: string): Promise<void> {
    this.#step(`delete ${key}`);
    await this.#inner.delete(key);
  }
  list(prefix?: string): AsyncIterable<ObjectInfo> {
    return this.#inner.list(prefix);
  }
  async writer(key: string, options?: WriteOptions): Promise<ObjectWriter> {
    this.#step(`writer ${key}`);
    const w = await this.#inner.writer(key, options);
    return {
      write: async (chunk) => {
        this.#step(`write ${key}`);
        await w.write(chunk);
      },
      close: async () => {
        try {
          this.#step(`close ${key}`);
        } catch (e) {
          await w.abort(e);
          throw e;
        }
        return await w.close();
      },
      abort: (reason) => w.abort(reason),
    };
  }
}

Deno.test("TF.js export failing at every step of a write to a store: readers get the old set, the new one, or a clear error", async () => {
  const oldBytes = await ckptBytes(model(1));
  const newBytes = await ckptBytes(model(2));
  const outcomes = new Map<string, number>();
  let succeeded = false;
  for (let fail = 1; !succeeded && fail < 200; fail++) {
    const inner = new MemoryStore({ name: "web" });
    await writeTfjsArtifacts(inner, model(1), { shardBytes: 1500 });
    const oldModelJson = (await objects(inner)).get("model.json")!;
    const store = new FailingStore(inner, fail);
    try {
      await writeTfjsArtifacts(store, model(2), { shardBytes: 1500 });
      succeeded = true;
    } catch (e) {
      assert.match((e as Error).message, /injected failure/);
    }
    let outcome: string;
    try {
      const got = await ckptBytes(await readTfjsArtifacts({ store: inner, key: "model.json" }));
      outcome = equal(got, oldBytes) ? "old" : equal(got, newBytes) ? "new" : "MIXED";
    } catch (e) {
      assert.ok(e instanceof ObjectNotFoundError, `after a failure at operation ${fail}: ${e}`);
      outcome = "no model.json";
    }
    assert.notEqual(outcome, "MIXED", `after a failure at operation ${fail}`);
    assert.equal(outcome === "new", succeeded, `after a failure at operation ${fail}: ${outcome}`);
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    if (!succeeded && outcome === "no model.json") {
      // A reader that fetched the old model.json before the export began, and its shards after:
      // shards not yet replaced are the old ones, and the shard digests in its "ckpt" record catch
      // any that were.
      await inner.put("model.json", oldModelJson);
      try {
        assert.deepEqual(await ckptBytes(await readTfjsArtifacts({ store: inner, key: "model.json" })), oldBytes);
        outcomes.set("old model.json, old shards", (outcomes.get("old model.json, old shards") ?? 0) + 1);
      } catch (e) {
        assert.ok(e instanceof ChecksumMismatchError, `after a failure at operation ${fail}: ${e}`);
        assert.match(e.message, /TF\.js shard "weights-shard[1-5]of5\.bin"/);
        outcomes.set("old model.json, new shards", (outcomes.get("old model.json, new shards") ?? 0) + 1);
      }
    }
  }
  assert.ok(succeeded, "the export never got through");
  // The delete of the old model.json failing leaves the old set; anything later, none until the end.
  assert.equal(outcomes.get("old"), 1);
  assert.ok((outcomes.get("no model.json") ?? 0) >= 10, JSON.stringify([...outcomes]));
  assert.ok((outcomes.get("old model.json, new shards") ?? 0) >= 10, JSON.stringify([...outcomes]));
});

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && a.every((v, i) => v === b[i]);
}

Deno.test("TF.js re-export into fewer shards removes the old shards the new model.json no longer names, and nothing else", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-tfjs-stale-" });
  try {
    for (const store of [dir, new MemoryStore({ name: "web" })]) {
      const names = async () =>
        typeof store === "string"
          ? [...Deno.readDirSync(store)].map((e) => e.name).sort()
          : [...(await objects(store)).keys()].sort();
      const put = (key: string, text: string) =>
        typeof store === "string" ? Deno.writeTextFile(join(store, key), text) : store.put(key, encoder.encode(text));
      const first = await writeTfjsArtifacts(store, model(1), { shardBytes: 1500 }); // 7004 bytes: 5 shards
      assert.equal(first.shards.length, 5);
      assert.deepEqual(first.removed, []);
      await put("notes.txt", "not a shard");
      const second = await writeTfjsArtifacts(store, model(2), { shardBytes: 4000 }); // 2 shards
      assert.deepEqual(second.removed, first.shards);
      const base = (p: string) => p.slice(p.lastIndexOf("/") + 1);
      assert.deepEqual(await names(), ["model.json", "notes.txt", ...second.shards.map(base)].sort());
      const back = await readTfjsArtifacts(second.object);
      assert.deepEqual(await ckptBytes(back), await ckptBytes(model(2)));
      // Same shard names again: rewritten in place, nothing removed.
      assert.deepEqual((await writeTfjsArtifacts(store, model(3), { shardBytes: 4000 })).removed, []);
      // A model.json this module would not read (a path leaving the directory) removes nothing.
      await put("model.json", JSON.stringify({ weightsManifest: [{ paths: ["../x.bin", "notes.txt"], weights: [] }] }));
      assert.deepEqual((await writeTfjsArtifacts(store, model(3))).removed, []);
      assert.ok((await names()).includes("notes.txt"));
      // A foreign model.json (TF.js's own names) is replaced with its shards.
      await put("group1-shard1of1.bin", "old weights");
      await put(
        "model.json",
        JSON.stringify({ weightsManifest: [{ paths: ["./group1-shard1of1.bin"], weights: [] }] }),
      );
      const last = await writeTfjsArtifacts(store, model(4));
      assert.deepEqual(last.removed.map(base), ["group1-shard1of1.bin"]);
      assert.ok(!(await names()).includes("group1-shard1of1.bin"));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js import from a store refuses shard paths that leave model.json's prefix, naming them, before reading", async () => {
  const store = new MemoryStore();
  await store.put("secret.bin", new Uint8Array(new Float32Array([666]).buffer));
  await store.put("web/w.bin", new Uint8Array(new Float32Array([1]).buffer));
  const cases: [string, RegExp][] = [
    ["../secret.bin", /weightsManifest\[0\]\.paths\[0\] "\.\.\/secret\.bin" is not a plain relative path/],
    ["/secret.bin", /"\/secret\.bin" is not a plain relative path/],
    ["a/../../secret.bin", /"a\/\.\.\/\.\.\/secret\.bin" is not a plain relative path/],
    ["s3://other/secret.bin", /"s3:\/\/other\/secret\.bin" is not a plain relative path/],
    [".", /"\." is not a plain relative path/],
  ];
  for (const [path, pattern] of cases) {
    await store.put(
      "web/model.json",
      encoder.encode(JSON.stringify({
        weightsManifest: [{ paths: [path], weights: [{ name: "w", shape: [1], dtype: "float32" }] }],
      })),
    );
    await assert.rejects(readTfjsArtifacts({ store, key: "web/model.json" }), (e: Error) => {
      assert.ok(e instanceof SyntaxError, `${path}: ${e}`);
      assert.match(e.message, pattern);
      return true;
    });
  }
  // "./w.bin" is the shard beside model.json.
  await store.put(
    "web/model.json",
    encoder.encode(JSON.stringify({
      weightsManifest: [{ paths: ["./w.bin"], weights: [{ name: "w", shape: [1], dtype: "float32" }] }],
    })),
  );
  assert.deepEqual((await readTfjsArtifacts({ store, key: "web/model.json" })).tensors[0]!.data, new Float32Array([1]));
  // A missing shard is the store's not-found error, naming the object.
  await store.delete("web/w.bin");
  await assert.rejects(readTfjsArtifacts({ store, key: "web/model.json" }), (e: Error) => {
    assert.ok(e instanceof ObjectNotFoundError, String(e));
    assert.match(e.message, /memory:\/\/store\/web\/w\.bin/);
    return true;
  });
  // model.json over maxHeaderBytes, and not JSON.
  await assert.rejects(readTfjsArtifacts({ store, key: "web/model.json" }, { maxHeaderBytes: 10 }), RangeError);
  await store.put("web/model.json", encoder.encode("{not json"));
  await assert.rejects(
    readTfjsArtifacts({ store, key: "web/model.json" }),
    /memory:\/\/store\/web\/model\.json is not UTF-8 JSON/,
  );
  await assert.rejects(readTfjsArtifacts({ store, key: "web/none.json" }), ObjectNotFoundError);
});

Deno.test("TF.js import over http:// reads model.json and each shard once, and a tampered shard fails", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-tfjs-http-" });
  const server = serveDirectory(dir);
  try {
    const out = await writeTfjsArtifacts(join(dir, "web"), model(3), { shardBytes: 2048 });
    assert.equal(out.shards.length, 4);
    const back = await readTfjsArtifacts(`${server.url}web/model.json`);
    assert.deepEqual(await ckptBytes(back), await ckptBytes(model(3)));
    assert.deepEqual(server.log, [
      "GET /web/model.json",
      ...[1, 2, 3, 4].map((i) => `GET /web/weights-shard${i}of4.bin`),
    ]);
    const shard = await Deno.readFile(out.shards[2]!);
    shard[7]! ^= 1;
    await Deno.writeFile(out.shards[2]!, shard);
    await assert.rejects(readTfjsArtifacts(new URL(`${server.url}web/model.json`)), (e: Error) => {
      assert.ok(e instanceof ChecksumMismatchError, String(e));
      assert.match(e.message, /TF\.js shard "weights-shard3of4\.bin"/);
      return true;
    });
    await assert.rejects(writeTfjsArtifacts(`${server.url}web2`, model(3)), /is read-only/);
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});

s3Test(
  "TF.js artifacts on s3://: export from a local checkpoint, import bit for bit, and a failed export leaves no model.json",
  async (b) => {
    const storage = {
      s3: { endpoint: b.endpoint.endpoint, region: b.endpoint.region, credentials: b.endpoint.credentials },
    };
    const dir = await Deno.makeTempDir({ prefix: "ckpt-tfjs-s3-" });
    try {
      await saveCheckpoint(join(dir, "a.ckpt"), model(4, 300_000));
      const web = `s3://${b.name}/web/model`;
      const out = await writeTfjsArtifacts(web, join(dir, "a.ckpt"), { storage });
      // 1.2 MB + 0.6 MB + 0.3 MB + 1 byte of weights in 4 MiB shards: one.
      assert.deepEqual([out.modelJson, out.shards], [`${web}/model.json`, [`${web}/weights.bin`]]);
      const back = await readTfjsArtifacts(`${web}/model.json`, { storage });
      assert.deepEqual(await ckptBytes(back), await Deno.readFile(join(dir, "a.ckpt")));
      // Byte-identical to a local export of the same checkpoint.
      const local = await writeTfjsArtifacts(join(dir, "web"), join(dir, "a.ckpt"));
      const bucket = b.store({ prefix: "web/model/" });
      const stored = await objects(bucket);
      assert.deepEqual([...stored.keys()], ["model.json", "weights.bin"]);
      assert.deepEqual(stored.get("model.json"), await Deno.readFile(local.modelJson));
      assert.deepEqual(stored.get("weights.bin"), await Deno.readFile(local.shards[0]!));

      // Several shards, through { store, key } too.
      const many = await writeTfjsArtifacts(b.store({ prefix: "many/" }), model(5, 300_000), { shardBytes: 2 ** 20 });
      assert.equal(many.shards.length, 3);
      const again = await readTfjsArtifacts(`s3://${b.name}/many/model.json`, { storage });
      assert.deepEqual(await ckptBytes(again), await ckptBytes(model(5, 300_000)));

      // An export that fails after its first shard was uploaded (the tensors' source breaks).
      const breaking = async function* (): AsyncGenerator<TensorInput> {
        const t = model(6, 300_000).tensors as TensorInput[];
        yield t[0]!;
        yield t[1]!;
        throw new Error("the source broke");
      };
      await assert.rejects(
        writeTfjsArtifacts(web, { metadata: { step: 6 }, tensors: breaking() }, { storage, shardBytes: 2 ** 20 }),
        /the source broke/,
      );
      await assert.rejects(readTfjsArtifacts(`${web}/model.json`, { storage }), ObjectNotFoundError);
      // Nothing half-written: the shard in progress was aborted, no incomplete upload is left.
      assert.equal(await bucket.sweep(), 0);
      assert.deepEqual(
        (await Array.fromAsync(bucket.list())).map((o) => o.key),
        ["weights-shard1.bin", "weights.bin"],
      );
      // Unsafe shard paths are refused on S3 too, naming the path.
      await bucket.put(
        "model.json",
        encoder.encode(JSON.stringify({
          weightsManifest: [{ paths: ["../../secret.bin"], weights: [{ name: "w", shape: [1], dtype: "float32" }] }],
        })),
      );
      await assert.rejects(
        readTfjsArtifacts(`${web}/model.json`, { storage }),
        /paths\[0\] "\.\.\/\.\.\/secret\.bin" is not a plain relative path/,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);

s3Test(
  "TF.js export to s3:// killed with SIGKILL mid-way: no model.json, the finished shards, no incomplete upload",
  async (b) => {
    const storage = {
      s3: { endpoint: b.endpoint.endpoint, region: b.endpoint.region, credentials: b.endpoint.credentials },
    };
    const web = `s3://${b.name}/web`;
    await writeTfjsArtifacts(web, model(1), { storage });
    assert.deepEqual(
      await ckptBytes(await readTfjsArtifacts(`${web}/model.json`, { storage })),
      await ckptBytes(model(1)),
    );
    const config = { ...storage.s3, bucket: b.name, prefix: "web" };
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_tfjs_s3_kill_child.ts", import.meta.url).pathname, JSON.stringify(config), "2"],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    // A child that never gets there is killed too, and the assertion on `text` below says so.
    const guard = setTimeout(() => child.kill("SIGKILL"), 60_000);
    let text = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      if (text.includes("stopped")) break;
    }
    clearTimeout(guard);
    try {
      child.kill("SIGKILL");
    } catch { /* already killed by the guard */ }
    const status = await child.status;
    const err = await new Response(child.stderr).text();
    assert.ok(text.includes("stopped"), `the child should have stopped mid-export: ${text} ${err}`);
    assert.equal(status.signal, "SIGKILL");
    // The old model.json is gone (deleted before the first shard), the new shards 1 and 2 are there.
    await assert.rejects(readTfjsArtifacts(`${web}/model.json`, { storage }), ObjectNotFoundError);
    const keys = (await Array.fromAsync(b.store({ prefix: "web/" }).list())).map((o) => o.key);
    assert.deepEqual(keys, ["weights-shard1.bin", "weights-shard2.bin", "weights.bin"]);
    // 4 MiB shards are under the 8 MiB part size: each is one PUT, so a kill leaves no incomplete upload.
    const res = await s3Fetch(`/${b.name}?uploads&prefix=web/`);
    const listing = await res.text();
    assert.ok(res.ok, listing);
    assert.equal(listing.split("<Upload>").length - 1, 0, listing);
    // The next export to the same place gives a complete set again.
    await writeTfjsArtifacts(web, model(3), { storage });
    assert.deepEqual(
      await ckptBytes(await readTfjsArtifacts(`${web}/model.json`, { storage })),
      await ckptBytes(model(3)),
    );
  },
);
