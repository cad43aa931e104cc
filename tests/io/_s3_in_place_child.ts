// Reads one S3 object with the flags it was run with (with or without --allow-ffi) and prints,
// as JSON, the SHA-256 of what the one-GET reader (openObjectStream) read and its counts, and the
// SHA-256 of the tensors loadCheckpoint gave. Args: a JSON { endpoint, region, credentials,
// bucket, key } (tests/io/s3_in_place_test.ts).
import { createHash } from "node:crypto";
import { loadCheckpoint } from "../../mod.ts";
import { S3Store } from "../../src/storage/s3.ts";
import { openObjectStream } from "../../src/storage/object_reader.ts";
import { freshBuffer } from "../../src/storage/_huge_pages.ts";

const { bucket, key, ...where } = JSON.parse(Deno.args[0]!);
const store = new S3Store({ bucket, ...where, retries: 3, timeout: 2000 });

// The object in pieces of 3 MiB + 1 byte (so reads start at odd places), as a decoder reads a body.
const r = await openObjectStream(store, key, { allocate: freshBuffer });
const bytes = freshBuffer(r.size);
for (let at = 0; at < r.size;) {
  const n = await r.read(bytes.subarray(at, Math.min(r.size, at + 3 * 2 ** 20 + 1)));
  if (n === null) throw new Error(`the object ended at ${at} of ${r.size}`);
  at += n;
}
if (await r.read(new Uint8Array(1)) !== null) throw new Error("bytes past the object's size");
r.close();

const back = await loadCheckpoint({ store, key });
const tensors = createHash("sha256");
for (const t of back.tensors) tensors.update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
console.log(JSON.stringify({
  object: createHash("sha256").update(bytes).digest("hex"),
  stats: r.stats,
  tensors: tensors.digest("hex"),
}));
