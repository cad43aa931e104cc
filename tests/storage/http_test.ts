import assert from "node:assert/strict";
import { join } from "node:path";
import { loadCheckpoint, readCheckpointIndex, saveCheckpoint, verifyCheckpoint } from "../../mod.ts";
import type { TensorInput } from "../../src/format/types.ts";
import { HttpStatusError, HttpStore, parseContentRange } from "../../src/storage/http.ts";
import { openRandomAccess } from "../../src/storage/random_access.ts";
import { resolveObject } from "../../src/storage/resolve.ts";
import { ObjectNotFoundError } from "../../src/storage/types.ts";
import { bytesOf, randomBytes, testObjectStore } from "./_contract.ts";
import { serveDirectory, type ServerOptions, type StaticServer } from "./_http_server.ts";

function fixture(options: ServerOptions = {}) {
  return async () => {
    const dir = await Deno.makeTempDir({ prefix: "ckpt-http-" });
    const server = serveDirectory(dir, options);
    return {
      store: new HttpStore(server.url),
      async seed(key: string, bytes: Uint8Array) {
        const path = join(dir, ...key.split("/"));
        await Deno.mkdir(join(path, ".."), { recursive: true });
        await Deno.writeFile(path, bytes);
      },
      async close() {
        await server.close();
        await Deno.remove(dir, { recursive: true });
      },
    };
  };
}

testObjectStore("HttpStore", fixture(), { readOnly: true, list: false });
testObjectStore("HttpStore (server ignores Range)", fixture({ ignoreRange: true }), { readOnly: true, list: false });
testObjectStore("HttpStore (server refuses HEAD)", fixture({ noHead: true }), { readOnly: true, list: false });

async function withServer(
  fn: (server: StaticServer, dir: string) => Promise<void>,
  options: ServerOptions = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-http-" });
  const server = serveDirectory(dir, options);
  try {
    await fn(server, dir);
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function tensors(n: number, bytes: number): TensorInput[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `layer${i}/kernel`,
    dtype: "float32" as const,
    shape: [bytes / 4],
    data: new Float32Array(randomBytes(bytes, 100 + i).buffer),
  }));
}

Deno.test("loadCheckpoint over http with { only } fetches the tail, the head and the wanted records only", async () => {
  await withServer(async (server, dir) => {
    const ts = tensors(6, 2 ** 20);
    await saveCheckpoint(join(dir, "m.ckpt"), { metadata: { step: 9 }, tensors: ts });
    const size = (await Deno.stat(join(dir, "m.ckpt"))).size;
    const back = await loadCheckpoint(`${server.url}m.ckpt`, { only: ["layer4/kernel", "layer1/kernel"] });
    assert.equal(back.metadata.step, 9);
    assert.deepEqual(back.tensors.map((t) => t.name), ["layer1/kernel", "layer4/kernel"]);
    assert.deepEqual(
      new Uint8Array(back.tensors[0]!.data.buffer, back.tensors[0]!.data.byteOffset, 2 ** 20),
      new Uint8Array(ts[1]!.data.buffer),
    );
    assert.deepEqual(
      new Uint8Array(back.tensors[1]!.data.buffer, back.tensors[1]!.data.byteOffset, 2 ** 20),
      new Uint8Array(ts[4]!.data.buffer),
    );
    // tail (footer + index), head (header + metadata), one range per wanted tensor
    assert.equal(server.log.length, 4, server.log.join("\n"));
    assert.match(server.log[0]!, /^GET \/m\.ckpt bytes=-65536$/);
    assert.match(server.log[1]!, /^GET \/m\.ckpt bytes=0-4095$/);
    // Each record: its header, head, padding and digest, and up to 63 bytes before it (reads start aligned).
    assert.ok(server.bytesSent <= 65536 + 4096 + 2 * (2 ** 20 + 256), `${server.bytesSent} bytes sent`);
    assert.ok(server.bytesSent < size / 2);
  });
});

Deno.test("readCheckpointIndex over http reads two ranges: the tail and the head", async () => {
  await withServer(async (server, dir) => {
    await saveCheckpoint(join(dir, "m.ckpt"), { metadata: { step: 2 }, tensors: tensors(4, 2 ** 20) });
    const index = await readCheckpointIndex(`${server.url}m.ckpt`);
    assert.equal(index.metadata.step, 2);
    assert.equal(index.tensors.length, 4);
    assert.equal(index.bytes, (await Deno.stat(join(dir, "m.ckpt"))).size);
    assert.deepEqual(server.log, ["GET /m.ckpt bytes=-65536", "GET /m.ckpt bytes=0-4095"]);
    assert.equal(server.bytesSent, 65536 + 4096);
  });
});

Deno.test("an index larger than the first tail read costs one more request, no more", async () => {
  await withServer(async (server, dir) => {
    const many = Array.from({ length: 1500 }, (_, i) => ({
      name: `a/rather/long/tensor/name/number/${i}`,
      dtype: "int8" as const,
      shape: [3],
      data: new Int8Array([i & 127, 1, 2]),
    }));
    await saveCheckpoint(join(dir, "many.ckpt"), { metadata: { step: 1 }, tensors: many });
    const back = await loadCheckpoint(`${server.url}many.ckpt`, { only: ["a/rather/long/tensor/name/number/1400"] });
    assert.deepEqual([...back.tensors[0]!.data], [1400 & 127, 1, 2]);
    // tail, the rest of the index before it, head, the record
    assert.equal(server.log.length, 4, server.log.join("\n"));
  });
});

Deno.test("loadCheckpoint over http from a server that ignores Range is still right, and the store counts it", async () => {
  await withServer(async (server, dir) => {
    const ts = tensors(3, 4096);
    await saveCheckpoint(join(dir, "m.ckpt"), { metadata: { step: 4 }, tensors: ts });
    await saveCheckpoint(join(dir, "big.ckpt"), { metadata: { step: 5 }, tensors: tensors(3, 2 ** 17) });
    const big = new HttpStore(server.url);
    const part = await loadCheckpoint({ store: big, key: "big.ckpt" }, { only: ["layer1/kernel"] });
    assert.equal(part.tensors[0]!.data.byteLength, 2 ** 17);
    assert.equal(big.rangeIgnored, big.requests);
    assert.ok(big.requests >= 3, `${big.requests} requests`);
    const store = new HttpStore(server.url);
    const back = await loadCheckpoint({ store, key: "m.ckpt" }, { only: ["layer2/kernel"] });
    assert.deepEqual(
      new Uint8Array(back.tensors[0]!.data.buffer, back.tensors[0]!.data.byteOffset, 4096),
      new Uint8Array(ts[2]!.data.buffer),
    );
    // The object is smaller than the tail asked for: one request, answered with the whole object.
    assert.equal(store.rangeIgnored, 1);
    assert.equal(store.requests, 1);
    // A full load over http verifies everything too.
    const all = await loadCheckpoint(`${server.url}m.ckpt`);
    assert.equal(all.tensors.length, 3);
  }, { ignoreRange: true });
});

Deno.test("loadCheckpoint over http with sha256 streams the object and checks it", async () => {
  await withServer(async (server, dir) => {
    const { sha256 } = await saveCheckpoint(join(dir, "m.ckpt"), { metadata: { step: 4 }, tensors: tensors(2, 4096) }, {
      sha256sum: true,
    });
    const back = await loadCheckpoint(`${server.url}m.ckpt`, { sha256 });
    assert.equal(back.tensors.length, 2);
    await assert.rejects(
      () => loadCheckpoint(`${server.url}m.ckpt`, { sha256: "0".repeat(64) }),
      /ChecksumMismatch|mismatch/i,
    );
  });
});

Deno.test("HttpStore errors name the URL and the status; 404 is ObjectNotFoundError", async () => {
  await withServer(async (server) => {
    const store = new HttpStore(server.url);
    const e = await store.get("missing.ckpt").then(() => undefined, (e) => e);
    assert.ok(e instanceof ObjectNotFoundError);
    assert.equal(e.url, `${server.url}missing.ckpt`);
    await assert.rejects(() => loadCheckpoint(`${server.url}missing.ckpt`, { only: ["x"] }), ObjectNotFoundError);
  });
  await withServer(async (server) => {
    const store = new HttpStore(server.url);
    const e = await store.get("x.ckpt").then(() => undefined, (e) => e);
    assert.ok(e instanceof HttpStatusError, String(e));
    assert.equal(e.status, 503);
    assert.equal(e.message, `Cannot read ${server.url}x.ckpt: HTTP 503 Service Unavailable`);
    await assert.rejects(() => store.head("x.ckpt"), /HTTP 503/);
  }, { failWith: 503 });
});

Deno.test("HttpStore refuses a 206 whose Content-Range is not the range asked for", async () => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response(new Uint8Array(10), { status: 206, headers: { "content-range": "bytes 0-9/100" } }),
  );
  try {
    const store = new HttpStore(`http://127.0.0.1:${server.addr.port}/`);
    await assert.rejects(
      () => store.get("x", { range: { offset: 50, length: 10 } }),
      SyntaxError,
      "the server sent bytes 0-9/100",
    );
  } finally {
    await server.shutdown();
  }
});

Deno.test("HttpStore refuses non-http URLs and is read-only", async () => {
  assert.throws(() => new HttpStore("ftp://x/"), TypeError);
  const store = new HttpStore("http://127.0.0.1:9/a");
  assert.equal(store.url, "http://127.0.0.1:9/a/");
  await assert.rejects(
    () => saveCheckpoint({ store, key: "x.ckpt" }, { metadata: { step: 1 }, tensors: [] }),
    TypeError,
  );
  await assert.rejects(() => Array.fromAsync(store.list()), TypeError);
});

Deno.test("parseContentRange reads the forms servers send and refuses the rest", () => {
  assert.deepEqual(parseContentRange("bytes 0-0/1"), { offset: 0, length: 1, size: 1 });
  assert.deepEqual(parseContentRange("bytes 5-9/*"), { offset: 5, length: 5, size: undefined });
  assert.deepEqual(parseContentRange("bytes */0"), { offset: undefined, length: 0, size: 0 });
  for (const bad of ["bytes 0-10/10", "bytes 9-5/20", "items 0-1/2", "", "bytes 0-1"]) {
    assert.equal(parseContentRange(bad), undefined, bad);
  }
});

Deno.test("openRandomAccess refuses to mix bytes of two versions of an object", async () => {
  await withServer(async (server, dir) => {
    await Deno.writeFile(join(dir, "x.bin"), randomBytes(200_000, 1));
    const reader = await openRandomAccess(new HttpStore(server.url), "x.bin");
    await new Promise((r) => setTimeout(r, 5));
    await Deno.writeFile(join(dir, "x.bin"), randomBytes(200_001, 2)); // another version meanwhile
    await assert.rejects(() => reader.read(0, 100), /changed while being read/);
  });
});

Deno.test("resolveObject keeps a pre-signed URL's query for every request", async () => {
  await withServer(async (server, dir) => {
    await Deno.writeFile(join(dir, "x.bin"), new Uint8Array([1, 2, 3]));
    const { store, key } = resolveObject(`${server.url}x.bin?X-Amz-Signature=abc`);
    assert.equal(key, "x.bin");
    assert.deepEqual(await bytesOf((await store.get(key)).body), new Uint8Array([1, 2, 3]));
    assert.deepEqual(server.log, ["GET /x.bin?X-Amz-Signature=abc"]);
  });
});

Deno.test("verifyCheckpoint over http reads the object once, keeps no tensor, and names a corrupted one", async () => {
  await withServer(async (server, dir) => {
    const ts = tensors(3, 3 * 2 ** 20);
    const saved = await saveCheckpoint(join(dir, "v.ckpt"), { metadata: { step: 4 }, tensors: ts });
    const sent = server.bytesSent;
    const ok = await verifyCheckpoint(`${server.url}v.ckpt`);
    assert.equal(ok.digest, saved.digest);
    assert.equal(server.bytesSent - sent, saved.bytes, "every byte sent once");
    assert.deepEqual(server.log.filter((l) => l.startsWith("GET")), ["GET /v.ckpt"]);
    assert.deepEqual(ok.tensors.map((t) => [t.name, t.byteLength]), ts.map((t) => [t.name, 3 * 2 ** 20]));
    const bytes = await Deno.readFile(join(dir, "v.ckpt"));
    bytes[bytes.byteLength - 2 * 2 ** 20]! ^= 1; // inside the last tensor's body
    await Deno.writeFile(join(dir, "v.ckpt"), bytes);
    await assert.rejects(
      () => verifyCheckpoint(`${server.url}v.ckpt`),
      /Checksum mismatch for tensor "layer2\/kernel"/,
    );
  });
});
