// saveCheckpoint and loadCheckpoint on s3:// addresses against a real S3 endpoint (Ceph RGW in
// CI): the digest a save returns is the digest of the bytes stored, and a load of a few tensors
// fetches the footer, the index and just those records (requests and bytes counted).
import assert from "node:assert/strict";
import { loadCheckpoint, readCheckpointIndex, saveCheckpoint } from "../../mod.ts";
import type { TensorInput } from "../../src/format/types.ts";
import { s3Test } from "../_s3.ts";

const MiB = 2 ** 20;

/** A fetch that records each request's method and Range, and counts the response bytes read. */
function meteredFetch() {
  const log: { method: string; range: string | null; bytes: number }[] = [];
  const f: typeof fetch = async (input, init) => {
    const req = new Request(input, init);
    const entry = { method: req.method, range: req.headers.get("range"), bytes: 0 };
    log.push(entry);
    const res = await fetch(req);
    if (!res.body) return res;
    const counted = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          entry.bytes += chunk.byteLength;
          c.enqueue(chunk);
        },
      }),
    );
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return { log, fetch: f };
}

function tensors(): TensorInput[] {
  const big = (seed: number) => new Float32Array(MiB / 4).map((_, i) => Math.sin(i * seed));
  return [
    { name: "layer0/kernel", dtype: "float32", shape: [512, 512], data: big(1) },
    { name: "layer1/kernel", dtype: "float32", shape: [512, 512], data: big(2) },
    { name: "head/bias", dtype: "float32", shape: [3], data: new Float32Array([0.5, -1, 2]) },
    { name: "layer2/kernel", dtype: "float32", shape: [512, 512], data: big(3) },
  ];
}

s3Test(
  "saveCheckpoint to s3:// returns the digest of the stored bytes; load with only reads just those records",
  async (b) => {
    const { log, fetch } = meteredFetch();
    const storage = {
      s3: {
        endpoint: b.endpoint.endpoint,
        region: b.endpoint.region,
        credentials: b.endpoint.credentials,
        fetch,
        partSize: MiB,
      },
    };
    const url = `s3://${b.name}/runs/a/step-100.ckpt`;
    const saved = await saveCheckpoint(url, { metadata: { step: 100 }, tensors: tensors() }, { storage });
    assert.ok(log.filter((l) => l.method === "PUT").length >= 4, "a multipart upload of several parts");

    // The digest is the digest of the object's bytes.
    const whole = new Uint8Array(await new Response((await b.store().get("runs/a/step-100.ckpt")).body).arrayBuffer());
    assert.equal(whole.byteLength, saved.bytes);
    const digest = Array.from(
      new Uint8Array(await crypto.subtle.digest("SHA-256", whole)),
      (x) => x.toString(16).padStart(2, "0"),
    ).join("");
    assert.equal(digest, saved.sha256);

    // One small tensor: a few ranged GETs, a few KiB, not the 3 MiB object.
    log.length = 0;
    const some = await loadCheckpoint(url, { only: ["head/bias"], storage });
    assert.deepEqual(
      some.tensors.map((t) => t.name),
      ["head/bias"],
    );
    assert.deepEqual(some.tensors[0]!.data, new Float32Array([0.5, -1, 2]));
    const gets = log.filter((l) => l.method === "GET");
    assert.ok(gets.length > 0 && gets.every((l) => l.range !== null), `every GET is ranged: ${JSON.stringify(log)}`);
    // The tail (footer and index, 64 KiB at most), the head, and the one record.
    const read = log.reduce((n, l) => n + l.bytes, 0);
    assert.ok(read <= 64 * 1024 + 4096 + 1024, `read ${read} bytes of ${saved.bytes}: ${JSON.stringify(log)}`);
    assert.ok(log.length <= 4, `${log.length} requests: ${JSON.stringify(log)}`);
    assert.ok(gets.some((l) => l.bytes < 1024), "the record itself is fetched on its own");

    // The index alone, likewise.
    log.length = 0;
    const index = await readCheckpointIndex(url, { storage });
    assert.equal(index.tensors.length, 4);
    assert.ok(log.reduce((n, l) => n + l.bytes, 0) <= 64 * 1024 + 4096, JSON.stringify(log));

    // A whole load verifies every digest and the file digest.
    const back = await loadCheckpoint(url, { sha256: saved.sha256, storage });
    assert.deepEqual(back.tensors.map((t) => t.data), tensors().map((t) => t.data));
    assert.deepEqual(back.metadata.step, 100);
  },
);
