/**
 * The JSON codec: JSON Lines that `jq` reads line by line, with the same integrity guarantees as
 * the binary codec (a SHA-256 after every record, a whole-stream SHA-256 at the end). Layout and
 * value encoding are specified in `docs/FORMAT.md`.
 *
 * Values round-trip exactly: floats as JSON numbers in shortest round-trip form (float32 values
 * with the fewest digits that read back as the same float32), with `"-0"`,
 * `"NaN"`, `"Infinity"`, `"-Infinity"` as strings (and `"NaN:7fc00001"` for a NaN whose bits are
 * not the canonical ones); 64-bit integers as decimal strings; bools as `true`/`false`.
 *
 * @module
 */
import type { CheckpointDecoder, CheckpointEncoder, Codec } from "../codec.ts";
import { DTYPES } from "../dtype.ts";
import { ChecksumMismatchError } from "../errors.ts";
import { type DecodeLimits, resolveLimits } from "../limits.ts";
import { metadataFromJson, metadataToJson, specialNumber } from "../metadata.ts";
import type { CheckpointRecord, DType, Tensor, TensorData } from "../types.ts";
import { checkDescriptor } from "./binary.ts";
import { ChunkReader } from "../_chunk_reader.ts";
import { bf16ToNumber, f16ToNumber, numberToBf16, numberToF16 } from "../_float16.ts";
import { type Hash, peekDigest, sha256, toHex } from "../_hash.ts";
import { digestingDecoder, digestingEncoder, type EncoderDigests, type Settle } from "../_pair.ts";
import { EncodeGuard } from "../_encode_guard.ts";
import { MAX_FLOAT32_TEXT, writeFloat32 } from "../_float32_text.ts";
import { withArticle } from "../_article.ts";

/** The first line of every JSON checkpoint. */
export const JSON_HEADER_LINE = '{"ckpt":"jsonl","version":1}';
/** The format version this module writes and reads. */
export const JSON_VERSION = 1;
/** Elements per data line. */
export const JSON_VALUES_PER_LINE = 4096;

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const PREFIX = utf8.encode('{"ckpt":"jsonl"');
const F64_SCRATCH = new Float64Array(JSON_VALUES_PER_LINE);

type FloatKind = "float32" | "float64" | "float16" | "bfloat16";

const CANONICAL_NAN: Record<FloatKind, bigint> = {
  float32: 0x7fc00000n,
  float64: 0x7ff8000000000000n,
  float16: 0x7e00n,
  bfloat16: 0x7fc0n,
};

function bitsOf(dtype: FloatKind, data: TensorData, i: number): bigint {
  switch (dtype) {
    case "float16":
    case "bfloat16":
      return BigInt((data as Uint16Array)[i]!);
    case "float32":
      return BigInt(new Uint32Array(data.buffer, data.byteOffset + i * 4, 1)[0]!);
    case "float64":
      return new BigUint64Array(data.buffer.slice(data.byteOffset + i * 8, data.byteOffset + i * 8 + 8))[0]!;
  }
}

function floatToJson(v: number, dtype: FloatKind, data: TensorData, i: number): string {
  if (Number.isNaN(v)) {
    const bits = bitsOf(dtype, data, i);
    if (bits === CANONICAL_NAN[dtype]) return '"NaN"';
    return `"NaN:${bits.toString(16).padStart(DTYPES[dtype].bytes * 2, "0")}"`;
  }
  if (v === Infinity) return '"Infinity"';
  if (v === -Infinity) return '"-Infinity"';
  if (v === 0 && 1 / v < 0) return '"-0"';
  return String(v);
}

const DATA_OPEN = utf8.encode('{"data":[');
const DATA_CLOSE = utf8.encode("]}\n");
const F32_LINE = new Uint8Array(DATA_OPEN.byteLength + JSON_VALUES_PER_LINE * (MAX_FLOAT32_TEXT + 1) + 3);

/**
 * The data line of float32 elements `from..to`, newline included: each value in its shortest
 * float32 digits, written straight into bytes (no string per value).
 */
function float32Line(data: Float32Array, from: number, to: number): Uint8Array {
  const out = F32_LINE;
  out.set(DATA_OPEN);
  let at = DATA_OPEN.byteLength;
  for (let i = from; i < to; i++) {
    if (i > from) out[at++] = 44; // ","
    const v = data[i]!;
    if (v - v === 0 && (v !== 0 || 1 / v > 0)) at = writeFloat32(out, at, v);
    else {
      const text = floatToJson(v, "float32", data, i);
      for (let k = 0; k < text.length; k++) out[at++] = text.charCodeAt(k);
    }
  }
  out.set(DATA_CLOSE, at);
  return out.slice(0, at + DATA_CLOSE.byteLength);
}

/** The JSON array text of elements `from..to` of a tensor's data. */
function valuesToJson(dtype: DType, data: TensorData, from: number, to: number): string {
  switch (dtype) {
    case "float32":
    case "float64": {
      const part = (data as Float32Array | Float64Array).subarray(from, to);
      let plain = true;
      for (let i = 0; i < part.length; i++) {
        const v = part[i]!;
        if (v - v !== 0 || (v === 0 && 1 / v < 0)) {
          plain = false;
          break;
        }
      }
      if (plain) {
        // Float64Array.join is faster than Float32Array.join (no per-element widening call).
        if (dtype === "float64") return "[" + part.join(",") + "]";
        const wide = F64_SCRATCH.subarray(0, part.length);
        wide.set(part);
        return "[" + wide.join(",") + "]";
      }
      const out: string[] = new Array(part.length);
      for (let i = 0; i < part.length; i++) out[i] = floatToJson(part[i]!, dtype, data, from + i);
      return "[" + out.join(",") + "]";
    }
    case "float16":
    case "bfloat16": {
      const toNum = dtype === "float16" ? f16ToNumber : bf16ToNumber;
      const out: string[] = new Array(to - from);
      for (let i = from; i < to; i++) out[i - from] = floatToJson(toNum((data as Uint16Array)[i]!), dtype, data, i);
      return "[" + out.join(",") + "]";
    }
    case "int64":
    case "uint64": {
      const part = (data as BigInt64Array).subarray(from, to);
      return part.length === 0 ? "[]" : '["' + part.join('","') + '"]';
    }
    case "bool": {
      const out: string[] = new Array(to - from);
      for (let i = from; i < to; i++) out[i - from] = data[i] ? "true" : "false";
      return "[" + out.join(",") + "]";
    }
    default:
      return "[" + (data as Int32Array).subarray(from, to).join(",") + "]";
  }
}

async function* encodeLines(
  records: AsyncIterable<CheckpointRecord>,
  settle: EncoderDigests,
): AsyncGenerator<Uint8Array> {
  const stream = sha256();
  const emitBytes = (bytes: Uint8Array, record?: Hash): Uint8Array => {
    stream.update(bytes);
    record?.update(bytes);
    return bytes;
  };
  const emit = (line: string, record?: Hash): Uint8Array => emitBytes(utf8.encode(line + "\n"), record);
  const guard = new EncodeGuard();
  try {
    for await (const rec of records) {
      const h = sha256();
      if (guard.check(rec) === "metadata") {
        yield emit(JSON_HEADER_LINE);
        yield emit(
          `{"metadata":${metadataToJson((rec as Extract<CheckpointRecord, { type: "metadata" }>).metadata)}}`,
          h,
        );
      } else {
        const t = (rec as Extract<CheckpointRecord, { type: "tensor" }>).tensor;
        const descriptor = JSON.stringify({
          name: t.name,
          dtype: t.dtype,
          shape: [...t.shape],
          group: t.group ?? "params",
        });
        yield emit(`{"tensor":${descriptor}}`, h);
        for (let i = 0; i < t.data.length; i += JSON_VALUES_PER_LINE) {
          const end = Math.min(t.data.length, i + JSON_VALUES_PER_LINE);
          yield t.dtype === "float32"
            ? emitBytes(float32Line(t.data as Float32Array, i, end), h)
            : emit(`{"data":${valuesToJson(t.dtype, t.data, i, end)}}`, h);
        }
      }
      yield emit(`{"sha256":"${h.digest("hex")}"}`);
    }
    const count = guard.end();
    const streamDigest = toHex(peekDigest(stream));
    const end = utf8.encode(`{"end":{"tensors":${count},"sha256":"${streamDigest}"}}\n`);
    stream.update(end);
    settle.digest.resolve(streamDigest);
    settle.sha256?.resolve(stream.digest("hex"));
    yield end;
  } catch (e) {
    settle.sha256?.reject(e);
    settle.digest.reject(e);
    throw e;
  }
}

/** Parses one line as a JSON object with exactly one key; returns [key, value]. */
function parseLine(bytes: Uint8Array, line: number, offset: number): [string, unknown] {
  const bad = (why: string): never => {
    throw new SyntaxError(`Cannot decode checkpoint: line ${line} at offset ${offset}: ${why}`);
  };
  let value: unknown;
  try {
    value = JSON.parse(utf8Strict.decode(bytes));
  } catch (e) {
    bad(e instanceof TypeError ? "not valid UTF-8" : `not valid JSON (${(e as Error).message})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) bad("not a JSON object");
  const keys = Object.keys(value as object);
  if (keys.length !== 1) bad(`expected an object with one key, got ${keys.length}`);
  return [keys[0]!, (value as Record<string, unknown>)[keys[0]!]];
}

/** A float written as a string: the specials metadata also uses, or `NaN:<hex bits>` (as a bigint). */
function specialFloat(v: string): number | bigint | undefined {
  const n = specialNumber(v);
  if (n !== undefined) return n;
  const m = /^NaN:([0-9a-f]{1,16})$/.exec(v);
  return m ? BigInt("0x" + m[1]) : undefined;
}

/** Writes parsed values into `out` from element `at`; throws a message naming the element. */
function fillValues(dtype: DType, values: unknown[], out: TensorData, at: number): void {
  const bad = (i: number, why: string): never => {
    throw new Error(`element ${at + i} ${why}`);
  };
  const isFloat = dtype === "float32" || dtype === "float64" || dtype === "float16" || dtype === "bfloat16";
  for (let i = 0; i < values.length; i++) {
    let v = values[i];
    if (isFloat) {
      let nanBits: bigint | undefined;
      if (typeof v === "string") {
        const s = specialFloat(v);
        if (s === undefined) bad(i, `is ${JSON.stringify(v)}, not a number`);
        if (typeof s === "bigint") nanBits = s;
        else v = s;
      } else if (typeof v !== "number") bad(i, `is ${JSON.stringify(v)}, not a number`);
      const k = dtype as FloatKind;
      if (nanBits !== undefined) {
        const width = DTYPES[k].bytes * 8;
        const exp = k === "float64"
          ? 0x7ff0000000000000n
          : k === "float32"
          ? 0x7f800000n
          : k === "float16"
          ? 0x7c00n
          : 0x7f80n;
        const mantMask = exp === 0x7ff0000000000000n
          ? 0xfffffffffffffn
          : k === "float32"
          ? 0x7fffffn
          : k === "float16"
          ? 0x3ffn
          : 0x7fn;
        if (nanBits >> BigInt(width) !== 0n || (nanBits & exp) !== exp || (nanBits & mantMask) === 0n) {
          bad(i, `has NaN bits ${nanBits.toString(16)} that are not a ${k} NaN`);
        }
        const view = new DataView(out.buffer, out.byteOffset + (at + i) * DTYPES[k].bytes);
        if (k === "float64") view.setBigUint64(0, nanBits, true);
        else if (k === "float32") view.setUint32(0, Number(nanBits), true);
        else view.setUint16(0, Number(nanBits), true);
        continue;
      }
      const n = v as number;
      if (k === "float64") (out as Float64Array)[at + i] = n;
      else if (k === "float32") {
        // The float32 nearest the number: writers print the shortest digits that read back exactly.
        const f = Math.fround(n);
        if (f - f !== 0 && n - n === 0) bad(i, `${n} is out of range for float32`);
        if (f === 0 && n !== 0) bad(i, `${n} is too small for float32 (it would read as 0)`);
        (out as Float32Array)[at + i] = f;
      } else {
        const bits = Number.isNaN(n) ? CANONICAL_NAN[k] : (k === "float16" ? numberToF16(n) : numberToBf16(n));
        if (bits === undefined) bad(i, `${n} is not exactly a ${k}`);
        (out as Uint16Array)[at + i] = Number(bits);
      }
    } else if (dtype === "int64" || dtype === "uint64") {
      let b: bigint;
      if (typeof v === "string" && /^-?[0-9]{1,20}$/.test(v)) b = BigInt(v);
      else if (typeof v === "number" && Number.isSafeInteger(v)) b = BigInt(v);
      else bad(i, `is ${JSON.stringify(v)}, not ${withArticle(dtype)} (a decimal string)`);
      const ok = dtype === "int64" ? BigInt.asIntN(64, b!) === b! : BigInt.asUintN(64, b!) === b!;
      if (!ok) bad(i, `${b!} is out of range for ${dtype}`);
      (out as BigInt64Array)[at + i] = b!;
    } else if (dtype === "bool") {
      if (typeof v !== "boolean") bad(i, `is ${JSON.stringify(v)}, not true or false`);
      out[at + i] = v ? 1 : 0;
    } else {
      if (typeof v !== "number" || !Number.isInteger(v)) bad(i, `is ${JSON.stringify(v)}, not an integer`);
      out[at + i] = v as number;
      if (out[at + i] !== v) bad(i, `${v} is out of range for ${dtype}`);
    }
  }
}

async function* decodeLines(
  input: AsyncIterable<Uint8Array>,
  limits?: DecodeLimits,
  digest?: Settle<string>,
): AsyncGenerator<CheckpointRecord> {
  const lim = resolveLimits(limits);
  const r = new ChunkReader(input);
  const stream = sha256();
  let lineNo = 0;
  let at = 0;
  const next = async (what: string): Promise<[string, unknown, Uint8Array]> => {
    at = r.position;
    lineNo++;
    const bytes = await r.readLine(lim.maxLineBytes, lineNo);
    if (bytes === null) {
      throw new SyntaxError(
        `Cannot decode checkpoint: truncated, stream ends at offset ${at} (line ${lineNo}) where ${what} was expected`,
      );
    }
    const [k, v] = parseLine(bytes, lineNo, at);
    return [k, v, bytes];
  };
  const fail = (why: string): never => {
    throw new SyntaxError(`Cannot decode checkpoint: line ${lineNo} at offset ${at}: ${why}`);
  };
  const checkDigest = async (h: Hash, subject: string): Promise<void> => {
    const [k, v, bytes] = await next(`the digest of ${subject}`);
    if (k !== "sha256" || typeof v !== "string" || !/^[0-9a-f]{64}$/.test(v)) {
      fail(`expected {"sha256": "<64 hex digits>"} after ${subject}`);
    }
    stream.update(bytes);
    const actual = h.digest("hex");
    if (actual !== v) throw new ChecksumMismatchError(subject, v as string, actual, `at line ${lineNo}`);
  };

  lineNo = 1;
  const hb = await r.readLine(lim.maxLineBytes, 1);
  if (hb === null) fail("the stream is empty");
  let header: { ckpt?: unknown; version?: unknown } | undefined;
  try {
    header = JSON.parse(utf8Strict.decode(hb!));
  } catch {
    // reported below
  }
  if (header?.ckpt !== "jsonl") fail(`not a ckpt JSON stream (expected ${JSON_HEADER_LINE})`);
  if (header!.version !== JSON_VERSION) {
    fail(`unsupported format version ${JSON.stringify(header!.version)} (this reader knows ${JSON_VERSION})`);
  }
  if (utf8Strict.decode(hb!) !== JSON_HEADER_LINE + "\n") fail(`header must be exactly ${JSON_HEADER_LINE}`);
  stream.update(hb!);

  const names = new Set<string>();
  let sawMetadata = false;
  for (;;) {
    const [key, value, bytes] = await next("a record");
    const h = sha256();
    h.update(bytes);
    if (key === "end") {
      if (!sawMetadata) fail("end before the metadata");
      const e = value as Record<string, unknown>;
      if (typeof e !== "object" || e === null || typeof e.sha256 !== "string" || e.tensors !== names.size) {
        fail(`end line must be {"end":{"tensors":${names.size},"sha256":"..."}}`);
      }
      const actual = stream.digest("hex");
      if (actual !== e.sha256) {
        throw new ChecksumMismatchError("stream", e.sha256 as string, actual, `at line ${lineNo}`);
      }
      if (!(await r.atEnd())) fail("trailing bytes after the end line");
      digest?.resolve(actual);
      return;
    }
    stream.update(bytes);
    if (key === "metadata") {
      if (sawMetadata) fail("second metadata line");
      const metadata = metadataFromJson(value, `at line ${lineNo}`);
      await checkDigest(h, "metadata");
      sawMetadata = true;
      yield { type: "metadata", metadata };
      continue;
    }
    if (key !== "tensor") fail(`unexpected ${JSON.stringify(key)} line`);
    if (!sawMetadata) fail("tensor before the metadata");
    if (names.size >= lim.maxTensors) {
      throw new RangeError(
        `Cannot decode checkpoint: more than maxTensors ${lim.maxTensors} tensors at line ${lineNo}`,
      );
    }
    const d = checkDescriptor(value, `at line ${lineNo}`, lim);
    if (names.has(d.name)) fail(`duplicate tensor name ${JSON.stringify(d.name)}`);
    names.add(d.name);
    const count = d.byteLength / DTYPES[d.dtype].bytes;
    // One array for the tensor, grown (at most doubling, never past the shape's count) as lines
    // arrive: memory follows the data received, and a line of one element costs one element, not
    // a typed array of its own.
    let data: TensorData = new DTYPES[d.dtype].array(0);
    let filled = 0;
    while (filled < count) {
      const [k, v, b] = await next(`data of tensor ${JSON.stringify(d.name)}`);
      if (k !== "data" || !Array.isArray(v)) {
        fail(`expected a data line for tensor ${JSON.stringify(d.name)}, ${filled} of ${count} elements read`);
      }
      const values = v as unknown[];
      if (values.length === 0 || values.length > count - filled) {
        fail(
          `data line holds ${values.length} elements, tensor ${JSON.stringify(d.name)} needs ${count - filled} more`,
        );
      }
      stream.update(b);
      h.update(b);
      if (filled + values.length > data.length) {
        const grown = new DTYPES[d.dtype].array(Math.min(count, Math.max(filled + values.length, data.length * 2)));
        (grown as Uint8Array).set(data as Uint8Array);
        data = grown;
      }
      try {
        fillValues(d.dtype, values, data, filled);
      } catch (e) {
        fail(`tensor ${JSON.stringify(d.name)} ${(e as Error).message}`);
      }
      filled += values.length;
    }
    await checkDigest(h, `tensor ${JSON.stringify(d.name)}`);
    const tensor: Tensor = { name: d.name, dtype: d.dtype, shape: d.shape, group: d.group, data };
    yield { type: "tensor", tensor };
  }
}

/**
 * ckpt's JSON Lines codec. Detects its bytes by the header line `{"ckpt":"jsonl",...}`.
 *
 * @example
 * ```ts
 * import { encodeCheckpoint } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 * const text = await new Response(encodeCheckpoint({
 *   metadata: { step: 2 },
 *   tensors: [{ name: "x", dtype: "float64", shape: [3], data: new Float64Array([-0, NaN, 0.1]) }],
 * }, { codec: "json" })).text();
 * const lines = text.trimEnd().split("\n").map((l) => JSON.parse(l));
 * assert.deepEqual(lines[4], { data: ["-0", "NaN", 0.1] });
 * ```
 */
export const jsonCodec: Codec = Object.freeze({
  name: "json",
  detect(head: Uint8Array): boolean {
    return head.byteLength >= PREFIX.byteLength && PREFIX.every((b, i) => head[i] === b);
  },
  encoder(): CheckpointEncoder {
    // The end line's digest covers every byte before it: the whole file's SHA-256 costs nothing more.
    return digestingEncoder(encodeLines);
  },
  decoder(limits?: DecodeLimits): CheckpointDecoder {
    return digestingDecoder((chunks, digest) => decodeLines(chunks, limits, digest));
  },
});
