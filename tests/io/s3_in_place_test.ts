// Where FFI is granted, a load from s3:// has the transport write each body straight into its
// tensor's memory (src/storage/object_reader.ts `memoryAlias`); without FFI, through the reader's
// buffer. Both read the same bytes, bit for bit, against a real S3 endpoint, in child processes
// run with and without --allow-ffi, through a proxy that cuts the first GET of each mid-body (a
// resumed body lands in place too).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { saveCheckpoint } from "../../mod.ts";
import type { TensorInput } from "../../src/format/types.ts";
import { FaultProxy } from "../storage/_fault_proxy.ts";
import { jsonChild } from "../_util.ts";
import { s3Test } from "../_s3.ts";

const MiB = 2 ** 20;
const CHILD = new URL("./_s3_in_place_child.ts", import.meta.url).pathname;

interface Read {
  object: string;
  stats: { requests: number; bytesFetched: number; bytesDirect: number };
  tensors: string;
}

s3Test("a load from s3:// reads bodies in place where FFI is granted, bit for bit, a cut GET resumed", async (b) => {
  const input: TensorInput[] = [
    { name: "a", dtype: "float32", shape: [5 * MiB / 4], data: new Float32Array(5 * MiB / 4).map((_, i) => i % 251) },
    { name: "b", dtype: "int32", shape: [3], data: new Int32Array([1, -2, 3]) },
    { name: "c", dtype: "uint8", shape: [2 * MiB + 7], data: new Uint8Array(2 * MiB + 7).map((_, i) => i * 13) },
  ];
  const store = b.store();
  await saveCheckpoint({ store, key: "c.ckpt" }, { metadata: { step: 3 }, tensors: input });
  const got = await store.get("c.ckpt");
  const object = createHash("sha256").update(new Uint8Array(await new Response(got.body).arrayBuffer())).digest("hex");
  const hash = createHash("sha256");
  for (const t of input) hash.update(new Uint8Array((t.data as Uint8Array).buffer));
  const tensors = hash.digest("hex");

  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    const spec = JSON.stringify({ ...b.endpoint, endpoint: proxy.endpoint, bucket: b.name, key: "c.ckpt" });
    for (const flags of [["-A"], ["-A", "--deny-ffi"]]) {
      // The first GET of each read (the reader's, then the load's) is cut after 64 KiB and resumed.
      let gets = 0;
      proxy.rule = (r) => r.method === "GET" && gets++ % 2 === 0 && r.range === undefined ? "cut" : undefined;
      const cutsBefore = proxy.count("cut");
      const read = await jsonChild<Read>(CHILD, flags, [spec]);
      assert.equal(read.object, object, flags.join(" "));
      assert.equal(read.tensors, tensors, flags.join(" "));
      assert.equal(read.stats.bytesFetched, got.info.size);
      assert.equal(read.stats.requests, 1); // the reader's own count: the resume is the store's
      assert.ok(proxy.count("cut") - cutsBefore >= 1, "a GET was cut");
      if (flags.includes("--deny-ffi")) assert.equal(read.stats.bytesDirect, 0);
      // In place: all but the bytes read before a 3 MiB piece began (the first chunk, the magic).
      else assert.ok(read.stats.bytesDirect > got.info.size - 2 * MiB, `${read.stats.bytesDirect} in place`);
    }
  } finally {
    await proxy.close();
  }
});
