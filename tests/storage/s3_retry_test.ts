// S3Store's retries, through a fault-injecting proxy between it and RGW: connection resets in
// the middle of a part, 503 and SlowDown answers and stalls are retried and the object is still
// bit for bit what was written; past the retry budget the write fails with an error naming the
// object, and leaves the previous object and no multipart upload behind.
import assert from "node:assert/strict";
import { S3Error } from "../../src/storage/s3.ts";
import { PreconditionFailedError } from "../../src/storage/types.ts";
import { s3Test } from "../_s3.ts";
import { bytesOf, randomBytes } from "./_contract.ts";
import { type FaultAction, FaultProxy, type SeenRequest } from "./_fault_proxy.ts";

const KiB = 1024;

/** A rule that answers the first `times` requests matching `match` with `action`, then passes. */
function once(match: (r: SeenRequest) => boolean, action: FaultAction, times = 1) {
  let left = times;
  return (r: SeenRequest): FaultAction | undefined => {
    if (left > 0 && match(r)) {
      left--;
      return action;
    }
  };
}

const part = (n: number) => (r: SeenRequest) => r.query.get("partNumber") === String(n);

async function writeAll(
  store: { writer(key: string): Promise<{ write(c: Uint8Array): Promise<void>; close(): Promise<unknown> }> },
  key: string,
  data: Uint8Array,
) {
  const w = await store.writer(key);
  for (let off = 0; off < data.byteLength; off += 100 * KiB) await w.write(data.subarray(off, off + 100 * KiB));
  return await w.close();
}

s3Test("S3Store retries resets mid-part, 503, SlowDown and stalls; the object is bit for bit", async (b) => {
  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    const store = b.store({ endpoint: proxy.endpoint, partSize: 128 * KiB, concurrency: 2, retries: 3, timeout: 1000 });
    const rules = [
      once((r) => r.query.has("uploads") && r.method === "POST", "slowdown"),
      once(part(1), "stall"),
      once(part(2), "reset", 2),
      once(part(3), "503"),
      once((r) => r.method === "POST" && r.query.has("uploadId"), "reset"), // CompleteMultipartUpload
      once((r) => r.method === "HEAD", "503"),
    ];
    proxy.rule = (r) => {
      for (const rule of rules) {
        const a = rule(r);
        if (a) return a;
      }
    };
    const data = randomBytes(600 * KiB + 5, 31);
    const info = await writeAll(store, "retry/obj.bin", data) as { size: number };
    assert.equal(info.size, data.byteLength);
    assert.deepEqual(
      ["slowdown", "stall", "reset", "503"].map((a) => proxy.count(a as FaultAction)),
      [1, 1, 3, 2],
      "every fault was injected",
    );
    proxy.rule = once((r) => r.method === "GET", "503", 2);
    assert.deepEqual(await bytesOf((await store.get("retry/obj.bin")).body), data);
    assert.equal(proxy.count("503"), 4);
    // A download cut twice, and stalled once, resumes where it stopped.
    const cuts = [once((r) => r.method === "GET", "cut", 2), once((r) => r.method === "GET", "stall")];
    proxy.rule = (r) => cuts[0]!(r) ?? cuts[1]!(r);
    const ranged = await store.get("retry/obj.bin", { range: { offset: 1000, length: 500 * KiB } });
    assert.deepEqual(await bytesOf(ranged.body), data.subarray(1000, 1000 + 500 * KiB));
    assert.deepEqual([proxy.count("cut"), proxy.count("stall")], [2, 2]);
    const ranges = proxy.log.slice(-4).map((l) => l.request.range!.match(/^bytes=(\d+)-(\d+)$/)!.slice(1).map(Number));
    assert.equal(ranges[0]![0], 1000, "the first request asks for the whole range");
    assert.ok(ranges[1]![0]! > 1000 && ranges[2]![0]! > ranges[1]![0]!, "each resumes where the last stopped");
    assert.deepEqual(ranges[3], ranges[2], "a stalled request is asked again from the same byte");
    assert.ok(ranges.every((r) => r[1] === 1000 + 500 * KiB - 1));
    assert.deepEqual(await b.store().uploads(), []);

    // A small object and a conditional put go through the same retries.
    proxy.rule = once((r) => r.method === "PUT", "reset");
    const v = await store.put("retry/small.bin", new Uint8Array(1000).fill(3), { mode: "create" });
    assert.deepEqual(await bytesOf((await b.store().get("retry/small.bin")).body), new Uint8Array(1000).fill(3));
    proxy.rule = once((r) => r.method === "PUT", "503");
    await store.put("retry/small.bin", new Uint8Array([4]), { mode: { ifMatch: v.version } });
    assert.deepEqual(await bytesOf((await b.store().get("retry/small.bin")).body), new Uint8Array([4]));
  } finally {
    await proxy.close();
  }
});

s3Test("S3Store past its retry budget fails naming the object and leaves the old one, no upload", async (b) => {
  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    const store = b.store({ endpoint: proxy.endpoint, partSize: 128 * KiB, concurrency: 2, retries: 2 });
    const old = randomBytes(10 * KiB, 32);
    await store.put("budget/obj.bin", old);
    proxy.rule = (r) => part(3)(r) ? "slowdown" : undefined;
    await assert.rejects(
      () => writeAll(store, "budget/obj.bin", randomBytes(600 * KiB, 33)),
      (e: unknown) => {
        assert.ok(e instanceof S3Error, String(e));
        assert.equal(
          e.message,
          `Cannot UploadPart 3 of s3://${b.name}/budget/obj.bin: 503 SlowDown injected by the test proxy (after 3 attempts)`,
        );
        assert.equal(e.code, "SlowDown");
        return true;
      },
    );
    assert.equal(proxy.count("slowdown"), 3);
    proxy.rule = () => "pass";
    assert.deepEqual(await b.store().uploads(), [], "the multipart upload was aborted");
    assert.deepEqual(await bytesOf((await store.get("budget/obj.bin")).body), old);
    assert.deepEqual((await Array.fromAsync(store.list())).map((o) => o.key), ["budget/obj.bin"]);

    // A stall past the budget is a timeout error, not a hang.
    const quick = b.store({ endpoint: proxy.endpoint, retries: 1, timeout: 300 });
    proxy.rule = () => "stall";
    await assert.rejects(
      () => quick.put("budget/stalled.bin", new Uint8Array(10)),
      /^S3Error: Cannot PUT s3:\/\/[^/]+\/budget\/stalled\.bin: no response within 300 ms \(after 2 attempts\)$/,
    );
    proxy.rule = () => "pass";
    assert.equal(await b.store().head("budget/stalled.bin"), undefined);

    // A download cut, then stalled on every resume, fails naming the object and the byte.
    await b.store().put("budget/big.bin", randomBytes(300 * KiB, 34));
    let gets = 0;
    proxy.rule = (r) => r.method === "GET" ? (gets++ === 0 ? "cut" : "stall") : undefined;
    const { body } = await quick.get("budget/big.bin");
    await assert.rejects(
      () => bytesOf(body),
      /^S3Error: Cannot GET s3:\/\/[^/]+\/budget\/big\.bin: the body failed at byte \d+ \(.*\) \(after 2 attempts\)$/,
    );
  } finally {
    await proxy.close();
  }
});

s3Test("S3Store never splices two versions: a resumed download of a replaced object fails", async (b) => {
  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    const store = b.store({ endpoint: proxy.endpoint });
    await store.put("v.bin", randomBytes(300 * KiB, 35));
    // The first GET is cut; the body resumes by itself in the background (it reads ahead of its
    // reader), so the resume (a range request) is held until the object was replaced.
    proxy.rule = (r) => r.method !== "GET" ? undefined : r.range === undefined ? "cut" : "hold";
    const { body } = await store.get("v.bin");
    await b.store().put("v.bin", randomBytes(300 * KiB, 36));
    proxy.release();
    await assert.rejects(
      () => bytesOf(body),
      /^S3Error: Cannot GET s3:\/\/[^/]+\/v\.bin: 412 the object changed while it was read$/,
    );
  } finally {
    await proxy.close();
  }
});

s3Test(
  "a conditional PUT whose response was lost, retried, succeeds when the store holds our bytes; a real conflict still fails",
  async (b) => {
    const proxy = new FaultProxy(b.endpoint.endpoint);
    try {
      const store = b.store({ endpoint: proxy.endpoint, retries: 3 });
      const losePut = (times: number) => {
        let left = times;
        proxy.rule = (r) => r.method === "PUT" && left-- > 0 ? "lose" : undefined;
      };
      // create: the store made the object, the answer never came, the retry meets its own object.
      const first = randomBytes(3 * KiB, 41);
      losePut(1);
      const created = await store.put("cond/index.json", first, { mode: "create" });
      assert.equal(proxy.count("lose"), 1, "the first answer was lost");
      assert.deepEqual(await bytesOf((await b.store().get("cond/index.json")).body), first);
      assert.equal(created.size, first.byteLength);

      // replace-if-unchanged, likewise: the retry's If-Match names the version our write replaced.
      const second = randomBytes(3 * KiB, 42);
      losePut(1);
      const replaced = await store.put("cond/index.json", second, { mode: { ifMatch: created.version! } });
      assert.equal(proxy.count("lose"), 2);
      assert.deepEqual(await bytesOf((await b.store().get("cond/index.json")).body), second);
      assert.equal(replaced.version, (await b.store().head("cond/index.json"))!.version);

      // Another writer's object: the lost answer was a 412, and the retry's 412 is a real conflict.
      losePut(1);
      await assert.rejects(
        () => store.put("cond/index.json", randomBytes(3 * KiB, 43), { mode: "create" }),
        PreconditionFailedError,
      );
      losePut(1);
      await assert.rejects(
        () => store.put("cond/index.json", randomBytes(3 * KiB, 44), { mode: { ifMatch: created.version! } }),
        PreconditionFailedError,
      );
      assert.deepEqual(await bytesOf((await b.store().get("cond/index.json")).body), second, "untouched");
    } finally {
      await proxy.close();
    }
  },
);
