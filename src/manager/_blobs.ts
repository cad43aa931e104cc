// Content-addressed tensor storage for incremental checkpoints. A blob is a tensor's raw bytes
// (optionally gzip), stored as `blobs/XX/<sha256 of the raw bytes>[.gz]` and written atomically;
// a manifest is a small JSON object naming the metadata and, per tensor, its blob. Nothing read
// back is trusted: the manifest is checked against the digest the index holds, and every blob
// against the digest in its name.

import {
  bytesOf,
  checkTensorName,
  DTYPES,
  elementCount,
  isDType,
  typedArrayFrom,
  validateTensor,
} from "../format/dtype.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import type { DecodeLimits } from "../format/limits.ts";
import { metadataFromJson, metadataToJson } from "../format/metadata.ts";
import type { Checkpoint, Metadata, Tensor, TensorInput } from "../format/types.ts";
import { sha256 } from "../format/_hash.ts";
import { BLOB_KEY } from "./_index.ts";
import { readableFrom } from "../format/_streams.ts";
import type { Location } from "./_location.ts";
import { OsErrors } from "../runtime/errors.ts";

/** The blob store's directory inside a checkpoint directory. */
export const BLOBS_DIR = "blobs";
const FORMAT = "ckpt-manifest";
const VERSION = 1;

/** One tensor of a manifest. */
export interface ManifestTensor {
  name: string;
  dtype: Tensor["dtype"];
  shape: number[];
  group: string;
  /** Bytes of the tensor's data. */
  bytes: number;
  /** The blob holding them. */
  blob: string;
}

/** The key of a blob inside the checkpoint directory: `blobs/XX/KEY`. */
export function blobKey(key: string): string {
  return `${BLOBS_DIR}/${key.slice(0, 2)}/${key}`;
}

async function gzip(bytes: Uint8Array): Promise<Uint8Array> {
  const stream = readableFrom([bytes]).pipeThrough(
    new CompressionStream("gzip") as ReadableWritablePair<Uint8Array, Uint8Array>,
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function gunzip(bytes: Uint8Array, maxBytes: number, what: string): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for await (
      const c of readableFrom([bytes]).pipeThrough(
        new DecompressionStream("gzip") as ReadableWritablePair<Uint8Array, Uint8Array>,
      )
    ) {
      total += c.byteLength;
      if (total > maxBytes) {
        throw new RangeError(`Cannot load ${what}: it holds more than the ${maxBytes} bytes expected`);
      }
      chunks.push(c);
    }
  } catch (e) {
    if (e instanceof RangeError) throw e;
    throw new SyntaxError(`Cannot load ${what}: gzip data is corrupt (${(e as Error).message})`);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** Hex SHA-256 of a tensor's bytes: its blob key without the compression suffix. */
export function digestOf(tensor: TensorInput): string {
  return sha256().update(bytesOf(tensor.data)).digest("hex");
}

/** Writes a blob atomically (and durably when `sync`); returns its size in the store. */
export async function writeBlob(
  loc: Location,
  key: string,
  data: Uint8Array,
  options: { gzip: boolean; sync: boolean },
): Promise<number> {
  const bytes = options.gzip ? await gzip(data) : data;
  return (await loc.write(blobKey(key), bytes, options.sync)).size;
}

/** The bytes of a manifest and their SHA-256. */
export function encodeManifest(metadata: Metadata, tensors: readonly ManifestTensor[]): {
  bytes: Uint8Array;
  sha256: string;
} {
  const text = JSON.stringify({
    format: FORMAT,
    version: VERSION,
    metadata: JSON.parse(metadataToJson(metadata)),
    tensors,
  });
  const bytes = new TextEncoder().encode(text + "\n");
  return { bytes, sha256: sha256().update(bytes).digest("hex") };
}

/** A manifest's contents, checked field by field; `path` names it in errors. */
export function decodeManifest(
  bytes: Uint8Array,
  path: string,
  limits: Required<DecodeLimits>,
): { metadata: Metadata; tensors: ManifestTensor[] } {
  const fail = (why: string): never => {
    throw new SyntaxError(`Cannot load checkpoint manifest ${path}: ${why}`);
  };
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    fail(`not valid UTF-8 JSON (${(e as Error).message})`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail("not a JSON object");
  const o = v as Record<string, unknown>;
  if (o.format !== FORMAT || o.version !== VERSION) fail(`not a version ${VERSION} ${FORMAT}`);
  let metadata: Metadata;
  try {
    metadata = metadataFromJson(o.metadata, "in the manifest");
  } catch (e) {
    fail((e as Error).message.replace(/^Cannot decode checkpoint: /, ""));
  }
  if (!Array.isArray(o.tensors)) fail("tensors is not an array");
  const list = o.tensors as unknown[];
  if (list.length > limits.maxTensors) {
    throw new RangeError(
      `Cannot load checkpoint manifest ${path}: ${list.length} tensors is over maxTensors ${limits.maxTensors}`,
    );
  }
  const names = new Set<string>();
  const tensors = list.map((t, i): ManifestTensor => {
    if (typeof t !== "object" || t === null || Array.isArray(t)) fail(`tensor ${i} is not an object`);
    const x = t as Record<string, unknown>;
    const bad = checkTensorName(x.name);
    if (bad) fail(`tensor ${i}: ${bad}`);
    const name = x.name as string;
    const where = `tensor ${JSON.stringify(name)}`;
    if (names.has(name)) fail(`${where} is listed twice`);
    names.add(name);
    if (!isDType(x.dtype)) fail(`${where} has unknown dtype ${JSON.stringify(x.dtype)}`);
    if (typeof x.group !== "string") fail(`${where} has no group`);
    if (!Array.isArray(x.shape)) fail(`${where} has no shape`);
    const shape = x.shape as unknown[];
    if (shape.length > limits.maxRank) {
      throw new RangeError(`Cannot load checkpoint manifest ${path}: ${where} has rank ${shape.length} over maxRank`);
    }
    let n = 0;
    try {
      n = elementCount(shape, where);
    } catch (e) {
      fail((e as Error).message);
    }
    const byteLength = n * DTYPES[x.dtype as Tensor["dtype"]].bytes;
    if (x.bytes !== byteLength) fail(`${where} declares ${x.bytes} bytes, its shape and dtype need ${byteLength}`);
    if (byteLength > limits.maxTensorBytes) {
      throw new RangeError(
        `Cannot load checkpoint manifest ${path}: ${where} of ${byteLength} bytes is over maxTensorBytes`,
      );
    }
    if (typeof x.blob !== "string" || !BLOB_KEY.test(x.blob)) fail(`${where} has a malformed blob key`);
    return {
      name,
      dtype: x.dtype as Tensor["dtype"],
      shape: shape as number[],
      group: x.group as string,
      bytes: byteLength,
      blob: x.blob as string,
    };
  });
  return { metadata: metadata!, tensors };
}

/** Reads one tensor back from its blob, verified against the digest its key names. */
export async function readBlobTensor(loc: Location, t: ManifestTensor): Promise<Tensor> {
  const path = loc.name(blobKey(t.blob));
  const what = `blob ${path} of tensor ${JSON.stringify(t.name)}`;
  // A blob larger than its tensor could be (gzip adds little) is refused before it is read.
  const got = await loc.read(blobKey(t.blob), 2 * t.bytes + 1024, "blob");
  if (got === undefined) {
    throw new OsErrors.NotFound(`Cannot load tensor ${JSON.stringify(t.name)}: its blob ${path} is missing`);
  }
  const raw = got.bytes;
  const data = t.blob.endsWith(".gz") ? await gunzip(raw, t.bytes, what) : raw;
  const expected = t.blob.slice(0, 64);
  if (data.byteLength !== t.bytes) {
    throw new ChecksumMismatchError(
      what,
      expected,
      sha256().update(data).digest("hex"),
      `(${data.byteLength} bytes, expected ${t.bytes})`,
    );
  }
  const actual = sha256().update(data).digest("hex");
  if (actual !== expected) throw new ChecksumMismatchError(what, expected, actual);
  const tensor: Tensor = {
    name: t.name,
    dtype: t.dtype,
    shape: t.shape,
    group: t.group,
    data: typedArrayFrom(t.dtype, data),
  };
  validateTensor(tensor);
  return tensor;
}

/** An incremental checkpoint read back whole, from its verified manifest. */
export async function readIncremental(
  loc: Location,
  manifest: { metadata: Metadata; tensors: ManifestTensor[] },
): Promise<Checkpoint> {
  const tensors: Tensor[] = [];
  for (const t of manifest.tensors) tensors.push(await readBlobTensor(loc, t));
  return { metadata: manifest.metadata, tensors };
}
