/**
 * The safetensors codec: read and write `.safetensors` files (the format Python tools load) with
 * the same streams, hashing and atomic saves as ckpt's own codecs.
 *
 * Layout (public specification): 8 bytes little-endian `N`, then `N` bytes of UTF-8 JSON, one
 * object (a map from tensor name to `{"dtype", "shape", "data_offsets": [begin, end]}`, plus an
 * optional `"__metadata__"` map of strings) with only whitespace around it (ckpt writes "{" first
 * and pads with spaces after), then the tensor bytes, little endian, row-major, back to back with
 * no gap, covering the rest of the file exactly.
 *
 * @module
 */
import type { CheckpointEncoder, Codec, RandomAccessReader } from "../format/codec.ts";
import { bytesOf, checkTensorName, DTYPES, elementCount, typedArrayFrom } from "../format/dtype.ts";
import { type DecodeLimits, resolveLimits } from "../format/limits.ts";
import type { Checkpoint, CheckpointRecord, DType, Metadata, Tensor, TensorInput } from "../format/types.ts";
import { ChunkReader } from "../format/_chunk_reader.ts";
import { sha256 } from "../format/_hash.ts";
import { generatorPair, type Settle, settled } from "../format/_pair.ts";
import { EncodeGuard } from "../format/_encode_guard.ts";
import { checkBools } from "../format/codecs/binary.ts";
import { parseStrictJson, type StrictJson } from "./_json_strict.ts";
import { loneSurrogate, metadataFromSafetensors, metadataToSafetensors } from "./safetensors_metadata.ts";

/** The safetensors name of each ckpt dtype. */
export const SAFETENSORS_DTYPES: Readonly<Record<DType, string>> = Object.freeze({
  float32: "F32",
  float64: "F64",
  float16: "F16",
  bfloat16: "BF16",
  int8: "I8",
  uint8: "U8",
  int16: "I16",
  uint16: "U16",
  int32: "I32",
  uint32: "U32",
  int64: "I64",
  uint64: "U64",
  bool: "BOOL",
});

const FROM_SAFETENSORS: ReadonlyMap<string, DType> = new Map(
  Object.entries(SAFETENSORS_DTYPES).map(([ours, theirs]) => [theirs, ours as DType]),
);

/** safetensors dtypes that ckpt's data model has no typed array for. */
const UNSUPPORTED_SAFETENSORS_DTYPES: ReadonlySet<string> = new Set([
  "F8_E5M2",
  "F8_E4M3",
  "F8_E4M3FNUZ",
  "F8_E5M2FNUZ",
  "F8_E8M0",
  "F6_E2M3",
  "F6_E3M2",
  "F4",
  "C64",
]);

/** What the JSON header may start with: "{", or JSON whitespace in front of it. */
const HEADER_FIRST_BYTES: ReadonlySet<number> = new Set([0x7b, 0x20, 0x09, 0x0a, 0x0d]);

/** Bytes of the little-endian header length that starts every file. */
export const SAFETENSORS_PREFIX_BYTES = 8;
/** Data bytes handed on per chunk by the encoder. */
const BODY_SLICE = 4 * 2 ** 20;

/** What the header says about a tensor before its data is read. */
export interface SafetensorsTensorDescriptor {
  /** Unique, non-empty name. */
  name: string;
  /** Element type. */
  dtype: DType;
  /** Dimensions. */
  shape: readonly number[];
  /**
   * Group, kept in `__metadata__` under `ckpt.groups`.
   *
   * @default {"params"}
   */
  group?: string;
}

/** One tensor of a parsed header, with where its bytes are. */
export interface SafetensorsEntry {
  /** Tensor name. */
  name: string;
  /** Element type. */
  dtype: DType;
  /** Dimensions. */
  shape: number[];
  /** Group (`"params"` unless `ckpt.groups` says otherwise). */
  group: string;
  /** Offset of the first byte from the start of the file. */
  offset: number;
  /** Bytes of data. */
  byteLength: number;
}

/** A parsed, validated header. */
export interface SafetensorsHeader {
  /** Metadata decoded from `__metadata__`. */
  metadata: Metadata;
  /** Tensors in the order of their data. */
  tensors: SafetensorsEntry[];
  /** `N`: bytes of JSON header, padding included. */
  headerBytes: number;
  /** Bytes of tensor data after the header. */
  dataBytes: number;
  /** What the file's length must be: 8 + `headerBytes` + `dataBytes`. */
  fileBytes: number;
}

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function fail(why: string, offset: number): never {
  throw new SyntaxError(`Cannot decode safetensors: ${why} at offset ${offset}`);
}

function checkDescriptors(tensors: readonly SafetensorsTensorDescriptor[]): void {
  if (!Array.isArray(tensors)) throw new TypeError("Invalid safetensors descriptors: expected an array");
  const names = new Set<string>();
  for (const t of tensors) {
    const bad = checkTensorName(t?.name);
    if (bad) throw new TypeError(`Invalid safetensors descriptor: ${bad}`);
    const where = `tensor ${JSON.stringify(t.name)}`;
    if (!Object.hasOwn(SAFETENSORS_DTYPES, t.dtype)) {
      throw new TypeError(`Invalid safetensors descriptor for ${where}: unknown dtype ${JSON.stringify(t.dtype)}`);
    }
    if (!Array.isArray(t.shape)) {
      throw new TypeError(`Invalid safetensors descriptor for ${where}: shape must be an array`);
    }
    elementCount(t.shape, where);
    if (t.group !== undefined && typeof t.group !== "string") {
      throw new TypeError(`Invalid safetensors descriptor for ${where}: group must be a string`);
    }
    if (names.has(t.name)) {
      throw new TypeError(`Invalid safetensors descriptors: duplicate tensor name ${JSON.stringify(t.name)}`);
    }
    names.add(t.name);
  }
}

/**
 * The bytes that precede the tensor data: the 8-byte length and the JSON header, padded with
 * spaces so the data starts at a multiple of 8. `__metadata__` comes first (left out when empty),
 * then the tensors in the given order, which is also the order of their data. Depends only on
 * names, dtypes, shapes, groups and metadata, so it can be written before any tensor data exists.
 *
 * @example
 * ```ts
 * import { encodeSafetensorsHeader } from "./safetensors.ts";
 * import assert from "node:assert/strict";
 * const b = encodeSafetensorsHeader({ step: 1 }, [{ name: "w", dtype: "float32", shape: [2] }]);
 * assert.equal(b.byteLength % 8, 0);
 * assert.equal(
 *   new TextDecoder().decode(b.subarray(8)).trimEnd(),
 *   '{"__metadata__":{"ckpt.step":"1"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
 * );
 * ```
 */
export function encodeSafetensorsHeader(
  metadata: Metadata,
  tensors: readonly SafetensorsTensorDescriptor[],
): Uint8Array {
  checkDescriptors(tensors);
  const groups: Record<string, string> = {};
  for (const t of tensors) {
    const g = t.group ?? "params";
    if (g !== "params") Object.defineProperty(groups, t.name, { value: g, enumerable: true });
  }
  const meta = metadataToSafetensors(metadata, groups);
  // No "__metadata__" at all when there is nothing to say, as the reference writes a file without
  // metadata (so such a file, read and written back, keeps its bytes).
  const parts = meta.length === 0
    ? []
    : [`"__metadata__":{${meta.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(",")}}`];
  let offset = 0;
  for (const t of tensors) {
    const end = offset + elementCount(t.shape) * DTYPES[t.dtype].bytes;
    if (!Number.isSafeInteger(end)) throw new RangeError("Cannot encode safetensors: data larger than 2^53 bytes");
    parts.push(
      `${JSON.stringify(t.name)}:{"dtype":"${SAFETENSORS_DTYPES[t.dtype]}","shape":${
        JSON.stringify([...t.shape])
      },"data_offsets":[${offset},${end}]}`,
    );
    offset = end;
  }
  const json = utf8.encode(`{${parts.join(",")}}`);
  const padded = json.byteLength + ((8 - (json.byteLength % 8)) % 8);
  const out = new Uint8Array(SAFETENSORS_PREFIX_BYTES + padded).fill(0x20, SAFETENSORS_PREFIX_BYTES + json.byteLength);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(json, SAFETENSORS_PREFIX_BYTES);
  return out;
}

/**
 * Reads the 8-byte header length and checks it against `maxHeaderBytes` (a `RangeError`) and
 * the smallest possible header (a `SyntaxError`).
 *
 * @example
 * ```ts
 * import { decodeSafetensorsLength } from "./safetensors.ts";
 * import assert from "node:assert/strict";
 * assert.equal(decodeSafetensorsLength(new Uint8Array([8, 0, 0, 0, 0, 0, 0, 0])), 8);
 * assert.throws(() => decodeSafetensorsLength(new Uint8Array([0, 0, 0, 0, 0, 0, 0, 1])), RangeError);
 * ```
 */
export function decodeSafetensorsLength(bytes: Uint8Array, limits?: DecodeLimits): number {
  const lim = resolveLimits(limits);
  if (bytes.byteLength < SAFETENSORS_PREFIX_BYTES) {
    fail(`file of ${bytes.byteLength} bytes is shorter than the 8-byte header length`, 0);
  }
  const n = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(lim.maxHeaderBytes)) {
    throw new RangeError(
      `Cannot decode safetensors: header of ${n} bytes exceeds maxHeaderBytes ${lim.maxHeaderBytes} at offset 0`,
    );
  }
  if (n < 2n) fail(`header of ${n} bytes cannot hold a JSON object`, 0);
  return Number(n);
}

function isObject(v: StrictJson | undefined): v is Map<string, StrictJson> {
  return v instanceof Map;
}

function exactInteger(v: StrictJson | undefined, what: string, at: number): number {
  if (typeof v !== "bigint" || v < 0n) fail(`${what} is ${describe(v)}, not a non-negative integer`, at);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new RangeError(`Cannot decode safetensors: ${what} is ${v}, over 2^53 - 1 at offset ${at}`);
  }
  return Number(v);
}

function describe(v: StrictJson | undefined): string {
  if (v === undefined) return "missing";
  if (v instanceof Map) return "an object";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "bigint") return String(v);
  if (Object.is(v, -0)) return "-0";
  return JSON.stringify(v);
}

/**
 * Parses and validates the `N` JSON header bytes (those after the 8-byte length), exactly as
 * strictly as the reference implementation and then some: valid UTF-8, one JSON object with
 * only whitespace around it, no duplicate keys, `__metadata__` a map of valid Unicode strings,
 * every tensor entry exactly `dtype`, `shape` and `data_offsets`, a dtype ckpt holds, offsets that
 * tile the data from 0 with no gap or overlap, and each byte length equal to elements × dtype
 * size. Messages give the file offset (the header starts at 8).
 *
 * @example
 * ```ts
 * import { decodeSafetensorsHeader, encodeSafetensorsHeader } from "./safetensors.ts";
 * import assert from "node:assert/strict";
 * const b = encodeSafetensorsHeader({ step: 2 }, [{ name: "w", dtype: "int8", shape: [3] }]);
 * const h = decodeSafetensorsHeader(b.subarray(8));
 * assert.equal(h.metadata.step, 2);
 * assert.deepEqual(h.tensors[0], { name: "w", dtype: "int8", shape: [3], group: "params", offset: b.byteLength, byteLength: 3 });
 * ```
 */
export function decodeSafetensorsHeader(bytes: Uint8Array, limits?: DecodeLimits): SafetensorsHeader {
  const lim = resolveLimits(limits);
  const base = SAFETENSORS_PREFIX_BYTES;
  try {
    utf8Strict.decode(bytes);
  } catch {
    fail("header is not valid UTF-8", base);
  }
  const root = parseStrictJson(bytes, base, (why, at) => fail(`header is not valid JSON: ${why}`, at));
  if (!isObject(root)) fail("header is not a JSON object", base);
  const raw: { name: string; dtype: DType; shape: number[]; begin: number; end: number; order: number }[] = [];
  let metaEntries = new Map<string, string>();
  for (const [name, entry] of root) {
    if (name === "__metadata__") {
      if (!isObject(entry)) fail(`"__metadata__" is ${describe(entry)}, not an object of strings`, base);
      for (const [k, v] of entry) {
        if (typeof v !== "string") {
          fail(`"__metadata__" value for ${JSON.stringify(k)} is ${describe(v)}, not a string`, base);
        }
        const bad = loneSurrogate(k, v);
        if (bad) fail(`"__metadata__" ${bad}`, base);
      }
      metaEntries = entry as Map<string, string>;
      continue;
    }
    const where = `tensor ${JSON.stringify(name)}`;
    const bad = checkTensorName(name);
    if (bad) fail(`invalid tensor name: ${bad}`, base);
    if (raw.length >= lim.maxTensors) {
      throw new RangeError(
        `Cannot decode safetensors: more than maxTensors ${lim.maxTensors} tensors at offset ${base}`,
      );
    }
    if (!isObject(entry)) fail(`${where} is ${describe(entry)}, not an object`, base);
    for (const k of entry.keys()) {
      if (k !== "dtype" && k !== "shape" && k !== "data_offsets") {
        fail(`${where} has unknown field ${JSON.stringify(k)}`, base);
      }
    }
    const st = entry.get("dtype");
    if (typeof st !== "string") fail(`${where} has dtype ${describe(st)}, not a string`, base);
    const dtype = FROM_SAFETENSORS.get(st);
    if (dtype === undefined) {
      if (UNSUPPORTED_SAFETENSORS_DTYPES.has(st)) {
        throw new RangeError(
          `Cannot decode safetensors: ${where} has dtype ${st}, which ckpt cannot hold (supported: ${
            [...FROM_SAFETENSORS.keys()].join(", ")
          }) at offset ${base}`,
        );
      }
      fail(`${where} has unknown dtype ${JSON.stringify(st)}`, base);
    }
    const shapeValue = entry.get("shape");
    if (!Array.isArray(shapeValue)) fail(`${where} has shape ${describe(shapeValue)}, not an array`, base);
    if (shapeValue.length > lim.maxRank) {
      throw new RangeError(
        `Cannot decode safetensors: ${where} has rank ${shapeValue.length}, over maxRank ${lim.maxRank} at offset ${base}`,
      );
    }
    const shape = shapeValue.map((d, i) => exactInteger(d, `${where} shape dimension ${i}`, base));
    const offsets = entry.get("data_offsets");
    if (!Array.isArray(offsets) || offsets.length !== 2) {
      fail(`${where} has data_offsets ${describe(offsets)}, not [begin, end]`, base);
    }
    const begin = exactInteger(offsets[0], `${where} data_offsets begin`, base);
    const end = exactInteger(offsets[1], `${where} data_offsets end`, base);
    raw.push({ name, dtype: dtype!, shape, begin, end, order: raw.length });
  }
  // The data must be tiled exactly: sorted by offsets, each tensor starts where the last ended.
  raw.sort((a, b) => a.begin - b.begin || a.end - b.end || a.order - b.order);
  let next = 0;
  const names = new Set(raw.map((r) => r.name));
  const { metadata, groups } = metadataFromSafetensors(metaEntries, names, `at offset ${base}`);
  const dataStart = base + bytes.byteLength;
  const tensors: SafetensorsEntry[] = raw.map((r) => {
    const where = `tensor ${JSON.stringify(r.name)}`;
    if (r.end < r.begin) fail(`${where} has data_offsets [${r.begin}, ${r.end}] that end before they begin`, base);
    if (r.begin > next) fail(`${where} starts at data offset ${r.begin}, leaving a gap after ${next}`, base);
    if (r.begin < next) fail(`${where} starts at data offset ${r.begin}, overlapping data that ends at ${next}`, base);
    let count = 0;
    try {
      count = elementCount(r.shape, where);
    } catch (e) {
      throw new RangeError(`Cannot decode safetensors: ${(e as Error).message} at offset ${base}`);
    }
    const needed = count * DTYPES[r.dtype].bytes;
    if (!Number.isSafeInteger(needed)) {
      throw new RangeError(`Cannot decode safetensors: ${where} needs more than 2^53 bytes at offset ${base}`);
    }
    if (needed !== r.end - r.begin) {
      fail(
        `${where} of dtype ${SAFETENSORS_DTYPES[r.dtype]} and shape [${
          r.shape.join(", ")
        }] needs ${needed} bytes, but its data_offsets [${r.begin}, ${r.end}] span ${r.end - r.begin}`,
        base,
      );
    }
    if (needed > lim.maxTensorBytes) {
      throw new RangeError(
        `Cannot decode safetensors: ${where} has ${needed} bytes, over maxTensorBytes ${lim.maxTensorBytes} at offset ${base}`,
      );
    }
    next = r.end;
    return {
      name: r.name,
      dtype: r.dtype,
      shape: r.shape,
      group: groups.get(r.name) ?? "params",
      offset: dataStart + r.begin,
      byteLength: needed,
    };
  });
  return {
    metadata,
    tensors,
    headerBytes: bytes.byteLength,
    dataBytes: next,
    fileBytes: dataStart + next,
  };
}

function* slices(t: TensorInput): Generator<Uint8Array> {
  const body = bytesOf(t.data);
  for (let i = 0; i < body.byteLength; i += BODY_SLICE) {
    yield body.subarray(i, Math.min(body.byteLength, i + BODY_SLICE));
  }
}

function sameDescriptor(t: TensorInput, d: SafetensorsTensorDescriptor): boolean {
  return t.name === d.name && t.dtype === d.dtype && (t.group ?? "params") === (d.group ?? "params") &&
    t.shape.length === d.shape.length && t.shape.every((n, i) => n === d.shape[i]);
}

function encoderBody(descriptors: readonly SafetensorsTensorDescriptor[] | undefined) {
  return async function* encode(
    records: AsyncIterable<CheckpointRecord>,
    settle: Settle<string>,
  ): AsyncGenerator<Uint8Array> {
    const hash = sha256();
    const emit = (b: Uint8Array): Uint8Array => {
      hash.update(b);
      return b;
    };
    let metadata: Metadata | undefined;
    const held: TensorInput[] = [];
    const guard = new EncodeGuard("safetensors");
    let count = 0;
    try {
      for await (const rec of records) {
        if (guard.check(rec) === "metadata") {
          metadata = (rec as Extract<CheckpointRecord, { type: "metadata" }>).metadata;
          // Fails early on bad metadata; with descriptors, this is also the header that goes out.
          const header = encodeSafetensorsHeader(metadata, descriptors ?? []);
          if (descriptors) yield emit(header);
          continue;
        }
        const t = (rec as Extract<CheckpointRecord, { type: "tensor" }>).tensor;
        if (!descriptors) {
          held.push(t);
          continue;
        }
        const d = descriptors[count];
        if (!d) {
          throw new TypeError(
            `Cannot encode safetensors: tensor ${
              JSON.stringify(t.name)
            } is one more than the ${descriptors.length} announced`,
          );
        }
        if (!sameDescriptor(t, d)) {
          throw new TypeError(
            `Cannot encode safetensors: tensor #${count} is ${JSON.stringify(t.name)} (${t.dtype} [${
              t.shape.join(", ")
            }], group ${t.group ?? "params"}) but the header announced ${JSON.stringify(d.name)} (${d.dtype} [${
              d.shape.join(", ")
            }], group ${d.group ?? "params"})`,
          );
        }
        count++;
        for (const s of slices(t)) yield emit(s);
      }
      guard.end();
      if (descriptors && count < descriptors.length) {
        throw new TypeError(
          `Cannot encode safetensors: the header announced ${descriptors.length} tensors but ${count} arrived (next expected ${
            JSON.stringify(descriptors[count]!.name)
          })`,
        );
      }
      if (!descriptors) {
        yield emit(encodeSafetensorsHeader(metadata!, held));
        while (held.length > 0) {
          for (const s of slices(held.shift()!)) yield emit(s);
        }
      }
      settle.resolve(hash.digest("hex"));
    } catch (e) {
      settle.reject(e);
      throw e;
    }
  };
}

async function* decodeRecords(
  input: AsyncIterable<Uint8Array>,
  limits?: DecodeLimits,
): AsyncGenerator<CheckpointRecord> {
  const lim = resolveLimits(limits);
  const r = new ChunkReader(input, "safetensors");
  const n = decodeSafetensorsLength(await r.readExact(SAFETENSORS_PREFIX_BYTES, "the header length"), lim);
  const header = decodeSafetensorsHeader(await r.readExact(n, "the JSON header"), lim);
  yield { type: "metadata", metadata: header.metadata };
  for (const e of header.tensors) {
    const body = await r.readExact(e.byteLength, `tensor ${JSON.stringify(e.name)}`);
    const data = typedArrayFrom(e.dtype, body);
    if (e.dtype === "bool") checkBools(data as Uint8Array, e.name, `at offset ${e.offset}`);
    yield { type: "tensor", tensor: { name: e.name, dtype: e.dtype, shape: e.shape, group: e.group, data } };
  }
  if (!(await r.atEnd())) {
    fail(
      `bytes after the last tensor's data (the header's offsets must cover the file exactly, ${header.fileBytes} bytes)`,
      r.position,
    );
  }
}

/** Options for {@linkcode createSafetensorsCodec}. */
export interface SafetensorsCodecOptions {
  /**
   * The tensors to be written, in order, announced before their data. With them the encoder
   * writes the header as soon as the metadata arrives and passes each tensor's bytes straight
   * on, holding nothing (memory: the tensor being written). Each arriving tensor must match its
   * descriptor (name, dtype, shape, group), and their number must match, or the stream errors.
   * Without them the encoder keeps a reference to every tensor until the last has arrived (the
   * header needs all shapes), then writes: no copy for an array the caller already holds, but a
   * lazy async iterable is then held whole.
   *
   * @default {undefined}
   */
  tensors?: readonly SafetensorsTensorDescriptor[];
}

/**
 * A safetensors codec. Pass descriptors to stream tensors from a lazy source in bounded memory;
 * {@linkcode readCheckpointIndex} of a binary checkpoint and {@linkcode readSafetensorsHeader}
 * give them without reading any tensor data.
 *
 * @example
 * ```ts
 * import { createSafetensorsCodec } from "./safetensors.ts";
 * import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile({ suffix: ".safetensors" });
 * async function* lazy() {
 *   for (let i = 0; i < 3; i++) yield { name: `w${i}`, dtype: "float32" as const, shape: [2], data: new Float32Array([i, i]) };
 * }
 * const codec = createSafetensorsCodec({
 *   tensors: [0, 1, 2].map((i) => ({ name: `w${i}`, dtype: "float32" as const, shape: [2] })),
 * });
 * await saveCheckpoint(path, { metadata: { step: 1 }, tensors: lazy() }, { codec });
 * const back = await loadCheckpoint(path, { codecs: [codec] });
 * assert.deepEqual(back.tensors.map((t) => t.name), ["w0", "w1", "w2"]);
 * await Deno.remove(path);
 * ```
 */
export function createSafetensorsCodec(options: SafetensorsCodecOptions = {}): Codec {
  let descriptors: SafetensorsTensorDescriptor[] | undefined;
  if (options.tensors !== undefined) {
    checkDescriptors(options.tensors);
    descriptors = options.tensors.map((t) => ({
      name: t.name,
      dtype: t.dtype,
      shape: [...t.shape],
      group: t.group ?? "params",
    }));
  }
  return Object.freeze({
    name: "safetensors",
    detect(head: Uint8Array): boolean {
      // The first 8 bytes are a little-endian length and the JSON header starts at byte 8 with
      // "{" or with JSON whitespace (writers may pad in front to align the data; the reference
      // reads such files); ckpt's binary and JSON formats and text have neither there. The length
      // is not judged here, so that an absurd one (2^62) gets the decoder's maxHeaderBytes message
      // rather than "unrecognised format"; fewer than 9 bytes are not recognised at all.
      return head.byteLength >= 9 && HEADER_FIRST_BYTES.has(head[8]!);
    },
    encoder(): CheckpointEncoder {
      // No digest of its own to store: the SHA-256 of the bytes is the only one (and free).
      const file = settled<string>();
      const body = encoderBody(descriptors);
      return {
        ...generatorPair((records: AsyncIterable<CheckpointRecord>) => body(records, file)),
        sha256: file.promise,
      };
    },
    decoder(limits?: DecodeLimits) {
      return generatorPair((chunks: AsyncIterable<Uint8Array>) => decodeRecords(chunks, limits));
    },
    readTensors(source: RandomAccessReader, names: readonly string[], limits?: DecodeLimits): Promise<Checkpoint> {
      return readSafetensorsTensorsFrom(source, names, limits);
    },
  });
}

/**
 * The safetensors codec, for `saveCheckpoint(path, ckpt, { codec: safetensorsCodec })` and
 * `loadCheckpoint(path)` (which recognises safetensors by default). It holds references to the tensors
 * until the last one arrives (see {@linkcode createSafetensorsCodec} to stream instead).
 *
 * @example
 * ```ts
 * import { safetensorsCodec } from "./safetensors.ts";
 * import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile({ suffix: ".safetensors" });
 * const { digest } = await saveCheckpoint(path, {
 *   metadata: { step: 7, metrics: { loss: 0.5 } },
 *   tensors: [{ name: "dense/kernel", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
 * }, { codec: safetensorsCodec });
 * const back = await loadCheckpoint(path, { sha256: digest });
 * assert.equal(back.metadata.step, 7);
 * assert.deepEqual(back.tensors[0]!.data, new Float32Array([1, 2]));
 * await Deno.remove(path);
 * ```
 */
export const safetensorsCodec: Codec = createSafetensorsCodec();

async function readAt(source: RandomAccessReader, offset: number, length: number, what: string): Promise<Uint8Array> {
  if (offset + length > source.size) fail(`file ends while reading ${what} (${length} bytes)`, source.size);
  const got = await source.read(offset, length);
  if (got.byteLength !== length) fail(`file ends while reading ${what} (${length} bytes)`, offset + got.byteLength);
  return got;
}

/** Leading bytes read at once: the length prefix and, usually, the whole JSON header. */
const HEAD_GUESS = 64 * 1024;

/**
 * Reads and validates the header of the safetensors object behind `source` (its leading bytes,
 * one read when the header is under 64 KiB) and checks the object's length against it.
 * `readSafetensorsHeader` opens an address and calls this.
 */
export async function readSafetensorsHeaderFrom(
  source: RandomAccessReader,
  limits?: DecodeLimits,
): Promise<SafetensorsHeader> {
  const size = source.size;
  if (size < SAFETENSORS_PREFIX_BYTES) fail(`file of ${size} bytes is shorter than the 8-byte header length`, 0);
  const start = await readAt(source, 0, Math.min(size, HEAD_GUESS), "the header length");
  const n = decodeSafetensorsLength(start.subarray(0, SAFETENSORS_PREFIX_BYTES), limits);
  if (SAFETENSORS_PREFIX_BYTES + n > size) fail(`header of ${n} bytes runs past the end of the ${size}-byte file`, 0);
  const json = SAFETENSORS_PREFIX_BYTES + n <= start.byteLength
    ? start.subarray(SAFETENSORS_PREFIX_BYTES, SAFETENSORS_PREFIX_BYTES + n)
    : await readAt(source, SAFETENSORS_PREFIX_BYTES, n, "the JSON header");
  const header = decodeSafetensorsHeader(json, limits);
  if (header.fileBytes !== size) {
    fail(
      `file is ${size} bytes but its header accounts for ${header.fileBytes} (8 + ${n} header + ${header.dataBytes} data)`,
      Math.min(size, header.fileBytes),
    );
  }
  return header;
}

/**
 * The named tensors of the safetensors object behind `source`: its header, then only their byte
 * ranges. `readSafetensorsTensors` opens an address and calls this.
 */
export async function readSafetensorsTensorsFrom(
  source: RandomAccessReader,
  names: readonly string[],
  limits?: DecodeLimits,
): Promise<Checkpoint> {
  if (!Array.isArray(names) || names.some((n) => typeof n !== "string")) {
    throw new TypeError("Cannot load safetensors: names must be an array of strings");
  }
  const header = await readSafetensorsHeaderFrom(source, limits);
  const wanted = new Set(names);
  const missing = [...wanted].filter((n) => !header.tensors.some((e) => e.name === n));
  if (missing.length > 0) {
    throw new RangeError(
      `Cannot load safetensors: no tensor named ${missing.map((n) => JSON.stringify(n)).join(", ")}`,
    );
  }
  const tensors: Tensor[] = [];
  for (const e of header.tensors) {
    if (!wanted.has(e.name)) continue;
    const bytes = await readAt(source, e.offset, e.byteLength, `tensor ${JSON.stringify(e.name)}`);
    const data = typedArrayFrom(e.dtype, bytes);
    if (e.dtype === "bool") checkBools(data as Uint8Array, e.name, `at offset ${e.offset}`);
    tensors.push({ name: e.name, dtype: e.dtype, shape: e.shape, group: e.group, data });
  }
  return { metadata: header.metadata, tensors };
}
