// The binary format's layout: its constants and the pure encoders and parsers of its fixed parts
// (header, record header, footer, tensor descriptor, index), shared by the streaming codec
// (binary.ts) and random access (binary_file.ts), which import it and never each other.
//
// Doc examples import through binary.ts, which re-exports the public part.
import { checkTensorName, DTYPES, elementCount, isDType } from "../dtype.ts";
import { type DecodeLimits, resolveLimits } from "../limits.ts";
import type { Tensor, TensorInput } from "../types.ts";
import {
  BYTEGROUP_ENCODING,
  BYTEGROUP_HEADER_BYTES,
  decodeByteGroupParts,
  decodeByteGroups,
  isByteGroupable,
  PLANE_ENTRY_BYTES,
  type PlaneScratch,
} from "./_bytegroup.ts";
import { withArticle } from "../_article.ts";

/** The 8 bytes every binary checkpoint starts with: `\x89CKPT\r\n\x1a`. */
export const BINARY_MAGIC: Uint8Array = new Uint8Array([0x89, 0x43, 0x4b, 0x50, 0x54, 0x0d, 0x0a, 0x1a]);
/** The 8 bytes every binary checkpoint ends with: `CKPTEND\n`. */
export const BINARY_END_MAGIC: Uint8Array = new Uint8Array([0x43, 0x4b, 0x50, 0x54, 0x45, 0x4e, 0x44, 0x0a]);
/** The format version this module writes and reads. */
export const BINARY_VERSION = 1;
/**
 * Header flag: tensor records may hold byte-grouped bodies (`"encoding":"bytegroup"` in their
 * head). Readers that do not know a flag reject the stream at its header.
 */
export const FLAG_BYTEGROUP = 1;
/** Tensor data starts at a multiple of this many bytes from the start of the stream. */
export const BINARY_ALIGNMENT = 64;

/** Byte sizes of the fixed parts. */
export const HEADER_BYTES = 16;
/** Bytes of a record header: kind, reserved, head length, body length. */
export const RECORD_HEADER_BYTES = 16;
/** Bytes of a SHA-256 digest. */
export const DIGEST_BYTES = 32;
/** Bytes of the footer: index offset, stream digest, end magic. */
export const FOOTER_BYTES = 48;

/** Record kinds. */
export const RecordKind = Object.freeze({ metadata: 1, tensor: 2, index: 3 } as const);

export const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** One entry of the trailing index. */
export interface IndexEntry {
  /** Tensor name. */
  name: string;
  /** Element type. */
  dtype: Tensor["dtype"];
  /** Dimensions. */
  shape: number[];
  /** Group, such as `"params"`. */
  group: string;
  /** Offset of the tensor's record from the start of the stream. */
  offset: number;
  /** How the body is stored, when not raw: `"bytegroup"` (byte planes, some deflated). */
  encoding?: "bytegroup";
  /** Bytes of the whole record, digest included. */
  length: number;
}

export function fail(why: string, offset: number): never {
  throw new SyntaxError(`Cannot decode checkpoint: ${why} at offset ${offset}`);
}

export function padTo(position: number): number {
  return (BINARY_ALIGNMENT - (position % BINARY_ALIGNMENT)) % BINARY_ALIGNMENT;
}

/**
 * The 16-byte stream header: magic, version, flags ({@linkcode FLAG_BYTEGROUP} or 0).
 *
 * @example
 * ```ts
 * import { encodeHeader } from "./binary.ts";
 * import assert from "node:assert/strict";
 * assert.equal(encodeHeader().byteLength, 16);
 * ```
 */
export function encodeHeader(flags = 0): Uint8Array {
  const b = new Uint8Array(HEADER_BYTES);
  b.set(BINARY_MAGIC);
  const v = new DataView(b.buffer);
  v.setUint32(8, BINARY_VERSION, true);
  v.setUint32(12, flags, true);
  return b;
}

/**
 * Checks the 16-byte stream header at `offset` (for messages) and returns its flags. Throws a
 * `SyntaxError` on a wrong magic, an unknown version or an unknown flag.
 *
 * @example
 * ```ts
 * import { decodeHeader, encodeHeader, FLAG_BYTEGROUP } from "./binary.ts";
 * import assert from "node:assert/strict";
 * assert.equal(decodeHeader(encodeHeader(FLAG_BYTEGROUP)), FLAG_BYTEGROUP);
 * assert.throws(() => decodeHeader(new Uint8Array(16)), SyntaxError);
 * ```
 */
export function decodeHeader(bytes: Uint8Array, offset = 0): number {
  for (let i = 0; i < BINARY_MAGIC.length; i++) {
    if (bytes[i] !== BINARY_MAGIC[i]) fail("not a ckpt binary stream (wrong magic)", offset + i);
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = v.getUint32(8, true);
  if (version !== BINARY_VERSION) {
    fail(`unsupported format version ${version} (this reader knows ${BINARY_VERSION})`, offset + 8);
  }
  const flags = v.getUint32(12, true);
  if ((flags & ~FLAG_BYTEGROUP) !== 0) fail(`unknown flags 0x${flags.toString(16)}`, offset + 12);
  return flags;
}

/** A record's fixed header. */
export interface RecordHeader {
  /** 1 metadata, 2 tensor, 3 index. */
  kind: number;
  /** Bytes of the JSON head. */
  headBytes: number;
  /** Bytes of the body (tensor data). */
  bodyBytes: number;
}

/**
 * Encodes a record prefix: the 16-byte record header, the head, and for tensors the zero padding
 * that puts the body at a multiple of 64 from the stream start (`position` is where the record
 * begins).
 *
 * @example
 * ```ts
 * import { encodeRecordPrefix, RecordKind } from "./binary.ts";
 * import assert from "node:assert/strict";
 * const p = encodeRecordPrefix(RecordKind.tensor, new Uint8Array(10), 4, 16);
 * assert.equal((16 + p.byteLength) % 64, 0);
 * ```
 */
export function encodeRecordPrefix(kind: number, head: Uint8Array, bodyBytes: number, position: number): Uint8Array {
  const fixed = RECORD_HEADER_BYTES + head.byteLength;
  const pad = kind === RecordKind.tensor ? padTo(position + fixed) : 0;
  const b = new Uint8Array(fixed + pad);
  const v = new DataView(b.buffer);
  b[0] = kind;
  v.setUint32(4, head.byteLength, true);
  v.setBigUint64(8, BigInt(bodyBytes), true);
  b.set(head, RECORD_HEADER_BYTES);
  return b;
}

/**
 * Reads a 16-byte record header found at `offset`, checking the reserved bytes are zero and the
 * lengths are within `limits`.
 *
 * @example
 * ```ts
 * import { decodeRecordHeader } from "./binary.ts";
 * import assert from "node:assert/strict";
 * const h = decodeRecordHeader(new Uint8Array([2, 0, 0, 0, 5, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0]), 16);
 * assert.deepEqual(h, { kind: 2, headBytes: 5, bodyBytes: 8 });
 * ```
 */
export function decodeRecordHeader(bytes: Uint8Array, offset: number, limits?: DecodeLimits): RecordHeader {
  const lim = resolveLimits(limits);
  if (bytes.byteLength < RECORD_HEADER_BYTES) {
    fail(`${bytes.byteLength} bytes cannot hold ${withArticle(`${RECORD_HEADER_BYTES}-byte`)} record header`, offset);
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, RECORD_HEADER_BYTES);
  const kind = bytes[0]!;
  if (kind < RecordKind.metadata || kind > RecordKind.index) fail(`unknown record kind ${kind}`, offset);
  if (bytes[1] !== 0 || bytes[2] !== 0 || bytes[3] !== 0) fail("non-zero reserved bytes in record header", offset + 1);
  const headBytes = v.getUint32(4, true);
  if (headBytes === 0) fail("record head is empty", offset + 4);
  const headCap = lim.maxHeaderBytes;
  if (headBytes > headCap) {
    throw new RangeError(
      `Cannot decode checkpoint: record head of ${headBytes} bytes exceeds maxHeaderBytes ${headCap} at offset ${
        offset + 4
      }`,
    );
  }
  const body = v.getBigUint64(8, true);
  if (kind !== RecordKind.tensor && body !== 0n) {
    fail(`record kind ${kind} must have no body, declares ${body}`, offset + 8);
  }
  if (body > BigInt(lim.maxTensorBytes)) {
    throw new RangeError(
      `Cannot decode checkpoint: tensor body of ${body} bytes exceeds maxTensorBytes ${lim.maxTensorBytes} at offset ${
        offset + 8
      }`,
    );
  }
  return { kind, headBytes, bodyBytes: Number(body) };
}

/**
 * The canonical head of a tensor record: JSON with keys name, dtype, shape, group in that order,
 * then `encoding` for a body that is not raw.
 *
 * @example
 * ```ts
 * import { tensorHead } from "./binary.ts";
 * import assert from "node:assert/strict";
 * const h = tensorHead({ name: "w", dtype: "int8", shape: [2] });
 * assert.equal(new TextDecoder().decode(h), '{"name":"w","dtype":"int8","shape":[2],"group":"params"}');
 * ```
 */
export function tensorHead(t: Omit<TensorInput, "data">, encoding?: "bytegroup"): Uint8Array {
  const head = { name: t.name, dtype: t.dtype, shape: [...t.shape], group: t.group ?? "params" };
  return utf8.encode(JSON.stringify(encoding ? { ...head, encoding } : head));
}

/**
 * The most bytes a raw tensor's record prefix (header, head, padding) can take wherever the
 * record starts, rounded up to 8 so the tensor after it stays aligned: what an allocator leaves
 * in front of a tensor's data for the encoder to lay the prefix there.
 */
export function prefixRoom(t: Omit<TensorInput, "data">): number {
  const most = RECORD_HEADER_BYTES + tensorHead(t).byteLength + BINARY_ALIGNMENT - 1;
  return Math.ceil(most / 8) * 8;
}

export function parseJson(bytes: Uint8Array, what: string, offset: number): unknown {
  let text: string;
  try {
    text = utf8Strict.decode(bytes);
  } catch {
    fail(`${what} is not valid UTF-8`, offset);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    fail(`${what} is not valid JSON (${(e as Error).message})`, offset);
  }
}

/** A tensor descriptor read from a head, checked. */
export interface TensorDescriptor {
  /** Tensor name. */
  name: string;
  /** Element type. */
  dtype: Tensor["dtype"];
  /** Dimensions. */
  shape: number[];
  /** Group. */
  group: string;
  /** How the body is stored, when not raw (binary codec only). */
  encoding?: "bytegroup";
  /** Bytes of data the descriptor implies. */
  byteLength: number;
}

/**
 * Checks a parsed tensor descriptor (`{name, dtype, shape, group}`, nothing else) from untrusted
 * input: shape dimensions non-negative safe integers, rank and size within `limits`. Shared by
 * every codec that stores descriptors as JSON. With `encodings`, a float tensor's descriptor may
 * also say `"encoding":"bytegroup"` (the binary codec's byte-grouped bodies).
 *
 * @example
 * ```ts
 * import { checkDescriptor } from "./binary.ts";
 * import assert from "node:assert/strict";
 * const d = checkDescriptor({ name: "w", dtype: "float64", shape: [2, 2], group: "params" }, "at offset 0");
 * assert.equal(d.byteLength, 32);
 * assert.throws(() => checkDescriptor({ name: "w", dtype: "float64", shape: [-2], group: "p" }, "x"), SyntaxError);
 * ```
 */
export function checkDescriptor(
  value: unknown,
  where: string,
  limits?: DecodeLimits,
  encodings = false,
): TensorDescriptor {
  const lim = resolveLimits(limits);
  const bad = (why: string): never => {
    throw new SyntaxError(`Cannot decode checkpoint: invalid tensor descriptor ${where}: ${why}`);
  };
  if (typeof value !== "object" || value === null || Array.isArray(value)) bad("not a JSON object");
  const d = value as Record<string, unknown>;
  const extra = Object.keys(d).find((k) =>
    k !== "name" && k !== "dtype" && k !== "shape" && k !== "group" && (k !== "encoding" || !encodings)
  );
  if (extra !== undefined) bad(`unknown field ${JSON.stringify(extra)}`);
  const nameProblem = checkTensorName(d.name);
  if (nameProblem) bad(nameProblem);
  const name = d.name as string;
  if (!isDType(d.dtype)) bad(`tensor ${JSON.stringify(name)} has unknown dtype ${JSON.stringify(d.dtype)}`);
  if (typeof d.group !== "string") bad(`tensor ${JSON.stringify(name)} has no string group`);
  if (!Array.isArray(d.shape)) bad(`tensor ${JSON.stringify(name)} has no shape array`);
  const shape = d.shape as unknown[];
  if (shape.length > lim.maxRank) {
    throw new RangeError(
      `Cannot decode checkpoint: tensor ${
        JSON.stringify(name)
      } has rank ${shape.length}, over maxRank ${lim.maxRank} ${where}`,
    );
  }
  let count: number;
  try {
    count = elementCount(shape, `tensor ${JSON.stringify(name)}`);
  } catch (e) {
    bad((e as Error).message);
  }
  const dtype = d.dtype as Tensor["dtype"];
  const byteLength = count! * DTYPES[dtype].bytes;
  if (!Number.isSafeInteger(byteLength) || byteLength > lim.maxTensorBytes) {
    throw new RangeError(
      `Cannot decode checkpoint: tensor ${JSON.stringify(name)} of shape [${
        shape.join(", ")
      }] needs ${byteLength} bytes, over maxTensorBytes ${lim.maxTensorBytes} ${where}`,
    );
  }
  const out: TensorDescriptor = { name, dtype, shape: shape as number[], group: d.group as string, byteLength };
  if (d.encoding !== undefined) {
    if (d.encoding !== BYTEGROUP_ENCODING) {
      bad(`tensor ${JSON.stringify(name)} has unknown encoding ${JSON.stringify(d.encoding)}`);
    }
    if (!isByteGroupable(dtype)) bad(`tensor ${JSON.stringify(name)} of dtype ${dtype} cannot be byte-grouped`);
    out.encoding = BYTEGROUP_ENCODING;
  }
  return out;
}

/**
 * Checks the stored length of a tensor body against its descriptor before any of it is read: a
 * raw body holds exactly the tensor's bytes; a byte-grouped one is smaller than the tensor plus
 * its plane table, and needs {@linkcode FLAG_BYTEGROUP} in the header. `at` is the offset of the
 * record.
 *
 * @example
 * ```ts
 * import { checkBodyLength } from "./binary.ts";
 * import assert from "node:assert/strict";
 * const d = { name: "w", dtype: "float32" as const, shape: [2], group: "params", byteLength: 8 };
 * checkBodyLength(d, 8, 0, 0);
 * assert.throws(() => checkBodyLength(d, 12, 0, 0), SyntaxError);
 * ```
 */
export function checkBodyLength(d: TensorDescriptor, bodyBytes: number, flags: number, at: number): void {
  if (d.encoding === undefined) {
    if (d.byteLength !== bodyBytes) {
      fail(
        `tensor ${JSON.stringify(d.name)} of dtype ${d.dtype} and shape [${
          d.shape.join(", ")
        }] needs ${d.byteLength} bytes but its record declares ${bodyBytes}`,
        at + 8,
      );
    }
    return;
  }
  if ((flags & FLAG_BYTEGROUP) === 0) {
    fail(`tensor ${JSON.stringify(d.name)} is byte-grouped but the header does not set flag ${FLAG_BYTEGROUP}`, at);
  }
  const most = d.byteLength + BYTEGROUP_HEADER_BYTES + PLANE_ENTRY_BYTES * DTYPES[d.dtype].bytes;
  if (bodyBytes > most) {
    fail(
      `byte-grouped tensor ${
        JSON.stringify(d.name)
      } of ${d.byteLength} bytes declares a body of ${bodyBytes}, over ${most}`,
      at + 8,
    );
  }
}

/**
 * The tensor bytes of a checked record body: the body itself when raw, else its byte planes
 * inflated (into `scratch`'s buffers where given) and interleaved (every length checked against
 * the descriptor first) into `alloc(n)` where given. `at` is the offset of the body in the stream.
 *
 * @example
 * ```ts
 * import { decodeTensorBody } from "./binary.ts";
 * import assert from "node:assert/strict";
 * const d = { name: "w", dtype: "int8" as const, shape: [2], group: "params", byteLength: 2 };
 * assert.deepEqual(await decodeTensorBody(d, new Uint8Array([1, 2]), 64), new Uint8Array([1, 2]));
 * ```
 */
export function decodeTensorBody(
  d: TensorDescriptor,
  body: Uint8Array,
  at: number,
  alloc?: (n: number) => Uint8Array,
  scratch?: PlaneScratch,
): Promise<Uint8Array> {
  if (d.encoding === undefined) return Promise.resolve(body);
  const count = d.byteLength / DTYPES[d.dtype].bytes;
  return decodeByteGroups(body, d.dtype, count, d.name, at, { alloc, scratch });
}

/**
 * {@linkcode decodeTensorBody} of a byte-grouped body a part at a time (see
 * `decodeByteGroupParts`): the buffer the tensor's bytes go into, and a generator that fills it
 * in order, yielding each filled part of up to 1 MiB.
 *
 * @example
 * ```ts
 * import { decodeTensorBodyParts } from "./_binary_layout.ts";
 * import { encodeByteGroups } from "./_bytegroup.ts";
 * import { concatBytes } from "../dtype.ts";
 * import assert from "node:assert/strict";
 * const bytes = new Uint8Array(new Float32Array(4096).map((_, i) => Math.sin(i) / 50).buffer);
 * const body = concatBytes(encodeByteGroups("float32", bytes)!.parts);
 * const d = { name: "w", dtype: "float32" as const, shape: [4096], group: "params", byteLength: 16384 };
 * const { data, parts } = decodeTensorBodyParts({ ...d, encoding: "bytegroup" }, body, 64);
 * for await (const _ of parts);
 * assert.deepEqual(data, bytes);
 * ```
 */
export function decodeTensorBodyParts(
  d: TensorDescriptor,
  body: Uint8Array,
  at: number,
  alloc?: (n: number) => Uint8Array,
  scratch?: PlaneScratch,
): { data: Uint8Array; parts: AsyncGenerator<Uint8Array, void, undefined> } {
  const count = d.byteLength / DTYPES[d.dtype].bytes;
  return decodeByteGroupParts(body, d.dtype, count, d.name, at, { alloc, scratch });
}

/**
 * Checks that a bool tensor holds only 0 and 1. Throws a `SyntaxError` naming the element
 * (`first` is the index of `data[0]` in the tensor, for a tensor checked piece by piece).
 *
 * @example
 * ```ts
 * import { checkBools } from "./binary.ts";
 * import assert from "node:assert/strict";
 * checkBools(new Uint8Array([0, 1]), "w", "at offset 0");
 * assert.throws(() => checkBools(new Uint8Array([2]), "w", "at offset 0"), SyntaxError);
 * ```
 */
export function checkBools(data: Uint8Array, name: string, where: string, first = 0): void {
  const i = data.findIndex((v) => v > 1);
  if (i >= 0) {
    throw new SyntaxError(
      `Cannot decode checkpoint: bool tensor ${JSON.stringify(name)} element ${first + i} is ${
        data[i]
      }, not 0 or 1 ${where}`,
    );
  }
}

/**
 * The 48-byte footer: index offset, stream digest, end magic.
 *
 * @example
 * ```ts
 * import { decodeFooter, encodeFooter } from "./binary.ts";
 * import assert from "node:assert/strict";
 * const f = decodeFooter(encodeFooter(128, new Uint8Array(32)), 256);
 * assert.equal(f.indexOffset, 128);
 * ```
 */
export function encodeFooter(indexOffset: number, digest: Uint8Array): Uint8Array {
  const b = new Uint8Array(FOOTER_BYTES);
  new DataView(b.buffer).setBigUint64(0, BigInt(indexOffset), true);
  b.set(digest, 8);
  b.set(BINARY_END_MAGIC, 40);
  return b;
}

/** Fewest bytes an index record can take: its header, a one-byte head, its digest. */
const MIN_INDEX_RECORD = RECORD_HEADER_BYTES + 1 + DIGEST_BYTES;

/**
 * Reads the footer found at `offset` (where it starts in the stream). Throws a `SyntaxError` on a
 * wrong end magic, or an index offset that leaves no room for an index record between the stream
 * header and the footer.
 *
 * @example
 * ```ts
 * import { decodeFooter } from "./binary.ts";
 * import assert from "node:assert/strict";
 * assert.throws(() => decodeFooter(new Uint8Array(48), 100), SyntaxError);
 * ```
 */
export function decodeFooter(bytes: Uint8Array, offset: number): { indexOffset: number; digest: Uint8Array } {
  for (let i = 0; i < BINARY_END_MAGIC.length; i++) {
    if (bytes[40 + i] !== BINARY_END_MAGIC[i]) fail("footer has a wrong end magic", offset + 40 + i);
  }
  const off = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (off < HEADER_BYTES || off > offset - MIN_INDEX_RECORD) {
    fail(
      `footer points to an index at ${off}, outside the file (an index record of at least ${MIN_INDEX_RECORD} bytes must lie between offset ${HEADER_BYTES} and the footer)`,
      offset,
    );
  }
  return { indexOffset: Number(off), digest: bytes.subarray(8, 40) };
}

/**
 * Checks the parsed head of an index record against the caps; returns its entries.
 *
 * @example
 * ```ts
 * import { checkIndex } from "./binary.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(checkIndex({ tensors: [] }, "at offset 0"), []);
 * assert.throws(() => checkIndex({ tensors: {} }, "at offset 0"), SyntaxError);
 * ```
 */
export function checkIndex(value: unknown, where: string, limits?: DecodeLimits): IndexEntry[] {
  const lim = resolveLimits(limits);
  const bad = (why: string): never => {
    throw new SyntaxError(`Cannot decode checkpoint: invalid index ${where}: ${why}`);
  };
  if (typeof value !== "object" || value === null || Array.isArray(value)) bad("not a JSON object");
  const v = value as Record<string, unknown>;
  if (Object.keys(v).length !== 1 || !Array.isArray(v.tensors)) bad('expected exactly {"tensors": [...]}');
  const list = v.tensors as unknown[];
  if (list.length > lim.maxTensors) {
    throw new RangeError(
      `Cannot decode checkpoint: index lists ${list.length} tensors, over maxTensors ${lim.maxTensors} ${where}`,
    );
  }
  return list.map((e, i) => {
    if (typeof e !== "object" || e === null || Array.isArray(e)) bad(`entry ${i} is not an object`);
    const { offset, length, ...rest } = e as Record<string, unknown>;
    const d = checkDescriptor(rest, `${where}, entry ${i}`, limits, true);
    if (!Number.isSafeInteger(offset) || (offset as number) < 0) bad(`entry ${i} has a bad offset`);
    if (!Number.isSafeInteger(length) || (length as number) <= 0) bad(`entry ${i} has a bad length`);
    return indexEntry(d, offset as number, length as number);
  });
}

/** An index entry, keys in the order the index stores them. */
export function indexEntry(
  d: Pick<TensorDescriptor, "name" | "dtype" | "shape" | "group" | "encoding">,
  offset: number,
  length: number,
): IndexEntry {
  const { name, dtype, shape, group, encoding } = d;
  return encoding
    ? { name, dtype, shape, group, encoding, offset, length }
    : { name, dtype, shape, group, offset, length };
}
