// S3Store against a real S3 endpoint (Ceph RGW from scripts/ceph.sh in CI): the ObjectStore
// contract, then what is particular to S3 (multipart, abort, conditional writes, retries).
import assert from "node:assert/strict";
import { type PartWriter, S3Error, S3Store } from "../../src/storage/s3.ts";
import { ObjectNotFoundError } from "../../src/storage/types.ts";
import { prng } from "../_util.ts";
import { s3Fetch, s3Fixture, s3Ignore, s3Test } from "../_s3.ts";
import { bytesOf, randomBytes, testObjectStore } from "./_contract.ts";
import { FaultProxy } from "./_fault_proxy.ts";

// A 1 MiB part size, so the contract's writer tests go through multipart uploads of many parts;
// smaller objects take the one-PUT path.
testObjectStore("S3Store", () => s3Fixture({ partSize: 2 ** 20, concurrency: 3 }), {
  ignore: s3Ignore,
  sanitize: false,
});

const KiB = 1024;

/** A fetch that counts the UploadPart requests in flight, and the most there ever were. */
function countingFetch() {
  const stats = { inFlight: 0, maxInFlight: 0, parts: 0, requests: [] as string[] };
  const f: typeof fetch = async (input, init) => {
    const req = input instanceof Request ? input : new Request(input, init);
    const url = new URL(req.url);
    stats.requests.push(`${req.method} ${url.search}`);
    const isPart = url.searchParams.has("partNumber");
    if (isPart) {
      stats.parts++;
      stats.maxInFlight = Math.max(stats.maxInFlight, ++stats.inFlight);
    }
    try {
      return await fetch(req);
    } finally {
      if (isPart) stats.inFlight--;
    }
  };
  return { stats, fetch: f };
}

s3Test(
  "S3Store writer: many small parts round-trip bit for bit, never more than `concurrency` in flight",
  async (b) => {
    const { stats, fetch } = countingFetch();
    const store = b.store({ partSize: 256 * KiB, concurrency: 3, fetch });
    const data = randomBytes(3 * 2 ** 20 + 777, 21);
    const next = prng(22);
    const w = await store.writer("mp/obj.bin");
    for (let off = 0; off < data.byteLength;) {
      const n = Math.min(data.byteLength - off, 1 + Math.floor(next() * 300 * KiB));
      await w.write(data.subarray(off, off + n));
      off += n;
    }
    const info = await w.close();
    assert.equal(stats.parts, Math.ceil(data.byteLength / (256 * KiB)));
    assert.ok(stats.maxInFlight <= 3, `at most 3 parts in flight, saw ${stats.maxInFlight}`);
    assert.equal(info.size, data.byteLength);
    // RGW's CompleteMultipartUpload gives no ETag; the version comes from HEAD and works for ifMatch.
    assert.ok(info.version.length > 0 && !info.version.includes('"'));
    assert.deepEqual(await bytesOf((await store.get("mp/obj.bin")).body), data);
    const replaced = await store.put("mp/obj.bin", new Uint8Array([1]), { mode: { ifMatch: info.version } });
    assert.notEqual(replaced.version, info.version);
  },
);

s3Test("S3Store writer: every part is sent with its Content-Length, small objects in one PUT", async (b) => {
  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    const store = b.store({ endpoint: proxy.endpoint, partSize: 128 * KiB, concurrency: 2 });
    const w = await store.writer("cl/obj.bin");
    await w.write(randomBytes(300 * KiB, 23));
    await w.close();
    const parts = proxy.log.filter((l) => l.request.query.has("partNumber")).map((l) => l.request.length);
    assert.deepEqual(parts, [128 * KiB, 128 * KiB, 44 * KiB]);
    const before = proxy.log.length;
    const small = await store.writer("cl/small.bin");
    await small.write(new Uint8Array(1000));
    await small.close();
    assert.deepEqual(proxy.log.slice(before).map((l) => [l.request.method, l.request.length]), [["PUT", 1000]]);
  } finally {
    await proxy.close();
  }
});

s3Test("S3Store writer: the parts of an upload go over kept-alive connections, not one each", async (b) => {
  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    const store = b.store({ endpoint: proxy.endpoint, partSize: 128 * KiB, concurrency: 2 });
    const data = randomBytes(12 * 128 * KiB, 27);
    const w = await store.writer("ka/obj.bin");
    await w.write(data);
    await w.close();
    assert.equal(proxy.log.filter((l) => l.request.query.has("partNumber")).length, 12);
    // Two for the parts (two in flight), a few for the requests without a body (fetch's own pool).
    assert.ok(proxy.connections <= 5, `${proxy.connections} connections for 12 parts`);
    assert.deepEqual(await bytesOf((await store.get("ka/obj.bin")).body), data);
  } finally {
    await proxy.close();
  }
});

s3Test("S3Store writer: writePart sends the caller's parts as they are; a short part is the last", async (b) => {
  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    const store = b.store({ endpoint: proxy.endpoint, partSize: 128 * KiB, concurrency: 2 });
    const data = randomBytes(300 * KiB, 26);
    const w = await store.writer("wp/obj.bin") as PartWriter;
    assert.equal(w.partSize, 128 * KiB);
    assert.equal(w.concurrency, 2);
    const parts = [data.slice(0, 128 * KiB), data.slice(128 * KiB, 256 * KiB), data.slice(256 * KiB)];
    const sent: Promise<void>[] = [];
    for (const part of parts) sent.push((await w.writePart(part)).sent);
    await assert.rejects(() => w.writePart(new Uint8Array(1)), TypeError, "nothing after a short part");
    await assert.rejects(() => w.write(new Uint8Array(1)), TypeError);
    await Promise.all(sent);
    for (const part of parts) part.fill(0); // the caller's again once sent
    const info = await w.close();
    assert.equal(info.size, data.byteLength);
    assert.deepEqual(await bytesOf((await store.get("wp/obj.bin")).body), data);
    const lengths = proxy.log.filter((l) => l.request.query.has("partNumber")).map((l) => l.request.length);
    assert.deepEqual(lengths, [128 * KiB, 128 * KiB, 44 * KiB]);

    const mixed = await store.writer("wp/mixed.bin") as PartWriter;
    await assert.rejects(() => mixed.writePart(new Uint8Array(128 * KiB + 1)), TypeError, "larger than a part");
    await mixed.write(new Uint8Array(10));
    await assert.rejects(() => mixed.writePart(new Uint8Array(128 * KiB)), /after write left bytes of a part buffered/);
    await mixed.abort();
  } finally {
    await proxy.close();
  }
});

s3Test(
  "S3Store writer: begin starts the multipart upload before any part; a begun writer closed empty or aborted leaves no upload",
  async (b) => {
    const proxy = new FaultProxy(b.endpoint.endpoint);
    try {
      const store = b.store({ endpoint: proxy.endpoint, partSize: 128 * KiB, concurrency: 2 });
      const data = randomBytes(300 * KiB, 27);
      const w = await store.writer("bg/obj.bin") as PartWriter;
      w.begin();
      w.begin(); // once
      while ((await store.uploads()).length === 0) await new Promise((r) => setTimeout(r, 5));
      assert.equal(proxy.log.filter((l) => l.request.query.has("partNumber")).length, 0, "no part yet");
      for (let at = 0; at < data.byteLength; at += 128 * KiB) await w.writePart(data.slice(at, at + 128 * KiB));
      assert.equal((await w.close()).size, data.byteLength);
      assert.deepEqual(await bytesOf((await store.get("bg/obj.bin")).body), data);
      const creates = proxy.log.filter((l) => l.request.method === "POST" && l.request.query.has("uploads"));
      assert.equal(creates.length, 1, "one CreateMultipartUpload");

      const empty = await store.writer("bg/empty.bin") as PartWriter;
      empty.begin();
      assert.equal((await empty.close()).size, 0);
      assert.equal((await store.head("bg/empty.bin"))?.size, 0);
      const dropped = await store.writer("bg/dropped.bin") as PartWriter;
      dropped.begin();
      await dropped.abort(new Error("changed my mind"));
      assert.deepEqual(await store.uploads(), [], "no multipart upload left open");
      assert.equal(await store.head("bg/dropped.bin"), undefined);
    } finally {
      await proxy.close();
    }
  },
);

s3Test("S3Store writer: abort after parts were uploaded leaves no multipart upload and the old object", async (b) => {
  const store = b.store({ partSize: 128 * KiB, concurrency: 2 });
  const old = randomBytes(5000, 24);
  await store.put("ab/obj.bin", old);
  const w = await store.writer("ab/obj.bin");
  await w.write(randomBytes(700 * KiB, 25));
  assert.equal((await store.uploads()).length, 1, "the upload is under way");
  await w.abort(new Error("changed my mind"));
  assert.deepEqual(await store.uploads(), []);
  assert.deepEqual(await bytesOf((await store.get("ab/obj.bin")).body), old);
  assert.deepEqual((await Array.fromAsync(store.list())).map((o) => o.key), ["ab/obj.bin"]);
});

s3Test("S3Store sweep aborts the incomplete multipart uploads under its prefix, and only those", async (b) => {
  const store = b.store({ prefix: "run" });
  const other = b.store({ prefix: "other" });
  for (const key of ["run/a.ckpt", "run/b/c.ckpt", "other/d.ckpt"]) {
    const res = await s3Fetch(`/${b.name}/${key}?uploads`, { method: "POST" });
    assert.equal(res.status, 200, await res.text());
  }
  assert.deepEqual((await store.uploads()).map((u) => u.key).sort(), ["a.ckpt", "b/c.ckpt"]);
  assert.equal(await store.sweep("b/"), 1);
  assert.equal(await store.sweep(), 1);
  assert.equal(await store.sweep(), 0);
  assert.deepEqual((await other.uploads()).map((u) => u.key), ["d.ckpt"]);
});

s3Test("S3Store lists and sweeps page by page, in key order", async (b) => {
  const { stats, fetch } = countingFetch();
  const store = b.store({ prefix: "many", listPageSize: 3, fetch });
  const keys = Array.from({ length: 8 }, (_, i) => `k/${String(i).padStart(2, "0")} é`);
  await Promise.all(keys.map((k) => store.put(k, new Uint8Array(1))));
  await store.put("l", new Uint8Array(1));
  stats.requests.length = 0;
  assert.deepEqual((await Array.fromAsync(store.list("k/"))).map((o) => o.key), keys);
  assert.equal(stats.requests.length, 3, "8 keys in pages of 3");
  for (const key of keys.slice(0, 7)) {
    const res = await s3Fetch(`/${b.name}/many/${encodeURIComponent(key).replaceAll("%2F", "/")}?uploads`, {
      method: "POST",
    });
    assert.equal(res.status, 200, await res.text());
  }
  assert.equal(await store.sweep("k/"), 7);
  assert.deepEqual(await store.uploads(), []);
});

s3Test("S3Store errors name the object, the status and the S3 code", async (b) => {
  const wrong = b.store({ credentials: { accessKeyId: "nobody", secretAccessKey: "wrong" } });
  await assert.rejects(
    () => wrong.put("x/y.bin", new Uint8Array(1)),
    (e: unknown) =>
      e instanceof S3Error && e.status === 403 && e.code === "InvalidAccessKeyId" &&
      e.message.startsWith(`Cannot PUT s3://${b.name}/x/y.bin: 403 InvalidAccessKeyId`),
  );
  const noBucket = new S3Store({
    bucket: `${b.name}-absent`,
    endpoint: b.endpoint.endpoint,
    credentials: b.endpoint.credentials,
  });
  await assert.rejects(
    () => noBucket.get("a.bin"),
    (e: unknown) =>
      e instanceof S3Error && e.code === "NoSuchBucket" && e.message.includes(`s3://${b.name}-absent/a.bin`),
  );
  await assert.rejects(() => b.store().get("absent.bin"), ObjectNotFoundError);
});

s3Test("S3Store presign gives a URL that reads the object, with ranges, without credentials", async (b) => {
  const store = b.store({ prefix: "pub" });
  const data = randomBytes(10_000, 41);
  await store.put("a b/c.bin", data);
  const url = await store.presign("a b/c.bin", { expires: 60 });
  const whole = await fetch(url);
  assert.equal(whole.status, 200);
  assert.deepEqual(new Uint8Array(await whole.arrayBuffer()), data);
  const tail = await fetch(url, { headers: { range: "bytes=-100" } });
  assert.equal(tail.status, 206);
  assert.deepEqual(new Uint8Array(await tail.arrayBuffer()), data.subarray(-100));
  const tampered = await fetch(url.replace("c.bin", "d.bin"));
  assert.equal(tampered.status, 403);
  await tampered.body?.cancel();
});

s3Test("S3Store writer: a size hint past 10 000 parts raises the part size to fit", async (b) => {
  const { stats, fetch } = countingFetch();
  const store = b.store({ partSize: 128 * KiB, fetch });
  const data = randomBytes(600 * KiB, 42);
  const hinted = await store.writer("hint/a.bin", { sizeHint: 10_000 * 512 * KiB });
  await hinted.write(data);
  await hinted.close();
  assert.equal(stats.parts, 2, "parts of 512 KiB, not 128 KiB");
  const plain = await store.writer("hint/b.bin", { sizeHint: data.byteLength });
  await plain.write(data);
  await plain.close();
  assert.equal(stats.parts, 2 + 5);
  assert.deepEqual(await bytesOf((await store.get("hint/a.bin")).body), data);
});
