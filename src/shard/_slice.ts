// One slice's record, read by itself from its part and checked against what the manifest says:
// the record's layout, its head (name, dtype, the slice's shape, group), its record digest as
// computed and as the manifest pins it. Only the record's bytes are read: a positioned read from
// a local part, one ranged GET from any other store.
import { ChecksumMismatchError } from "../format/errors.ts";
import { equalBytes, sha256, toHex } from "../format/_hash.ts";
import { readFull } from "../storage/_file_io.ts";
import type { ObjectStore } from "../storage/types.ts";
import type { RandomAccessReader } from "../format/codec.ts";
import { SeekMode } from "../runtime/files.ts";
import {
  BINARY_ALIGNMENT,
  checkBodyLength,
  checkBools,
  checkDescriptor,
  decodeRecordHeader,
  decodeTensorBody,
  DIGEST_BYTES,
  FLAG_BYTEGROUP,
  parseJson,
  RECORD_HEADER_BYTES,
  RecordKind,
} from "../format/codecs/_binary_layout.ts";
import type { ShardSlice, ShardTensorEntry } from "./manifest.ts";

/**
 * `length` bytes at `offset` of object `key`, in a fresh buffer that starts `slack` bytes
 * earlier (so data aligned in the object is aligned in memory).
 */
export async function readRange(
  store: ObjectStore,
  key: string,
  offset: number,
  length: number,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const slack = offset % BINARY_ALIGNMENT;
  const buf = new Uint8Array(slack + length);
  const want = buf.subarray(slack);
  const url = store.url + key;
  if (store.files) {
    const file = await store.files.open(key);
    try {
      await file.seek(offset, SeekMode.Start);
      const n = await readFull(file, want);
      if (n !== length) throw new SyntaxError(`Cannot read ${url}: ${n} bytes at offset ${offset}, needed ${length}`);
    } finally {
      file.close();
    }
    return want;
  }
  const got = await store.get(key, { range: { offset, length }, ...(signal ? { signal } : {}) });
  if (got.offset !== offset || got.length !== length) {
    await got.body.cancel().catch(() => {});
    throw new SyntaxError(
      `Cannot read ${url}: asked for ${length} bytes at ${offset}, got ${got.length} at ${got.offset}`,
    );
  }
  let at = 0;
  for await (const chunk of got.body) {
    if (at + chunk.byteLength > length) {
      throw new SyntaxError(`Cannot read ${url}: more than ${length} bytes at ${offset}`);
    }
    want.set(chunk, at);
    at += chunk.byteLength;
  }
  if (at !== length) throw new SyntaxError(`Cannot read ${url}: ${at} bytes at offset ${offset}, needed ${length}`);
  return want;
}

/**
 * `length` bytes at each of `offsets` of object `key`: positioned reads of one open file for a
 * local store, else ranged reads (through `reader` when given), at most 16 at a time.
 */
export async function readEach(
  store: ObjectStore,
  key: string,
  offsets: readonly number[],
  length: number,
  reader?: RandomAccessReader,
): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  if (store.files) {
    const file = await store.files.open(key);
    try {
      for (const offset of offsets) {
        const buf = new Uint8Array(length);
        await file.seek(offset, SeekMode.Start);
        if (await readFull(file, buf) !== length) {
          throw new SyntaxError(`Cannot read ${store.url}${key}: fewer than ${length} bytes at offset ${offset}`);
        }
        out.push(buf);
      }
    } finally {
      file.close();
    }
    return out;
  }
  for (let i = 0; i < offsets.length; i += 16) {
    const batch = offsets.slice(i, i + 16);
    out.push(
      ...await Promise.all(batch.map((o) => reader ? reader.read(o, length) : readRange(store, key, o, length))),
    );
  }
  return out;
}

/**
 * The slice's rows (its decoded body) from its record bytes `record` (read at `slice.offset`),
 * after checking the record against the manifest's entry: a malformed record is a `SyntaxError`,
 * a digest that differs from the computed one or the manifest's a `ChecksumMismatchError`.
 */
export async function sliceBody(
  record: Uint8Array,
  tensor: ShardTensorEntry,
  slice: ShardSlice,
  url: string,
): Promise<Uint8Array> {
  const { offset, length } = slice;
  const fail = (why: string): never => {
    throw new SyntaxError(
      `Cannot read slice of tensor ${JSON.stringify(tensor.name)} from ${url}: ${why} at offset ${offset}`,
    );
  };
  const rh = decodeRecordHeader(record, offset);
  if (rh.kind !== RecordKind.tensor) fail(`record of kind ${rh.kind} where the manifest has a tensor`);
  const headEnd = RECORD_HEADER_BYTES + rh.headBytes;
  const pad = (BINARY_ALIGNMENT - ((offset + headEnd) % BINARY_ALIGNMENT)) % BINARY_ALIGNMENT;
  if (headEnd + pad + rh.bodyBytes + DIGEST_BYTES !== length) {
    fail(`record is ${headEnd + pad + rh.bodyBytes + DIGEST_BYTES} bytes, the manifest says ${length}`);
  }
  const head = parseJson(record.subarray(RECORD_HEADER_BYTES, headEnd), "tensor head", offset + RECORD_HEADER_BYTES);
  const d = checkDescriptor(head, `at offset ${offset + RECORD_HEADER_BYTES}`, undefined, true);
  const shape = tensor.shape.length === 0 ? [] : [slice.rows[1] - slice.rows[0], ...tensor.shape.slice(1)];
  if (
    d.name !== tensor.name || d.dtype !== tensor.dtype || d.group !== tensor.group || d.shape.join() !== shape.join()
  ) {
    fail(
      `record holds ${
        JSON.stringify(d.name)
      } ${d.dtype} [${d.shape}] where the manifest has ${tensor.dtype} [${shape}]`,
    );
  }
  if (record.subarray(headEnd, headEnd + pad).some((b) => b !== 0)) fail("non-zero padding");
  let body = record.subarray(headEnd + pad, length - DIGEST_BYTES);
  if (d.encoding !== undefined) {
    checkBodyLength(d, rh.bodyBytes, FLAG_BYTEGROUP, offset);
    body = await decodeTensorBody(d, body, offset + headEnd + pad);
  } else if (body.byteLength !== d.byteLength) fail(`body of ${body.byteLength} bytes, needs ${d.byteLength}`);
  const stored = record.subarray(length - DIGEST_BYTES, length);
  const actual = sha256().update(record.subarray(0, headEnd + pad)).update(body).digest();
  if (!equalBytes(actual, stored)) {
    throw new ChecksumMismatchError(
      `tensor ${JSON.stringify(tensor.name)} slice in ${url}`,
      toHex(stored),
      toHex(actual),
      `at offset ${offset}`,
    );
  }
  if (toHex(stored) !== slice.digest) {
    throw new ChecksumMismatchError(
      `tensor ${JSON.stringify(tensor.name)} slice in ${url} (against the manifest)`,
      slice.digest,
      toHex(stored),
      `at offset ${offset}`,
    );
  }
  if (d.dtype === "bool") checkBools(body, d.name, `at offset ${offset}`);
  return body;
}
