// The fuzz harness: seeds per decoder, mutations that understand each format plus blind byte
// mutations and random input, every reader (whole, chunked, from a path, random access), and
// an oracle. An input must decode to exactly its seed or be rejected with one of ckpt's errors
// (SyntaxError, RangeError, ChecksumMismatchError, with a "Cannot ..." message), within a time
// limit, and every reader must agree. Mutations that recompute the digests they broke are
// marked `fixed`: then a changed checkpoint may be accepted, but readers must still agree.
//
// Every input is a pure function of (run seed, target, iteration), so a failure reproduces with
// `deno task fuzz --seed S --target T --iteration I`.
import { gzipSync } from "node:zlib";
import { createHash } from "node:crypto";
import {
  ChecksumMismatchError,
  type DecodeLimits,
  encodeCheckpoint,
  loadCheckpoint,
  MemoryStore,
  readCheckpointIndex,
  readSafetensorsTensors,
  safetensorsCodec,
} from "../../mod.ts";
import type { Checkpoint, CheckpointInput, TensorInput } from "../../src/format/types.ts";
import { readTfjsArtifacts, writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { bytesOf, concatBytes } from "../../src/format/dtype.ts";
import { saveSharded } from "../../src/shard/write.ts";
import { ObjectNotFoundError } from "../../src/storage/types.ts";
import { edgeCheckpoint, prng, randomCheckpoint } from "../_util.ts";

/** The decoders fuzzed. */
export const TARGETS = [
  "binary",
  "binary+gzip",
  "bytegroup",
  "json",
  "json+gzip",
  "safetensors",
  "tfjs",
  "shard-manifest",
] as const;
/** One decoder. */
export type Target = typeof TARGETS[number];

/**
 * Caps for fuzzing, small enough that an allocation beyond them stands out: every seed fits many
 * times over (the largest decodes to 17 KiB), while a length field that escaped its check would
 * ask for far more than these. The run measures each batch's peak RSS against them (see
 * {@linkcode ALLOCATION_SLACK}).
 */
export const FUZZ_LIMITS: DecodeLimits = {
  maxTensorBytes: 2 ** 20,
  maxHeaderBytes: 256 * 2 ** 10,
  maxLineBytes: 256 * 2 ** 10,
  maxDecodedBytes: 4 * 2 ** 20,
  maxCompressionRatio: 2000,
};

/**
 * How far a process's peak RSS may rise above its resident size while decoding inputs under
 * {@linkcode FUZZ_LIMITS} (4 MiB decoded at most per input): more means something allocated beyond
 * the caps. Generous, since V8 grows its heap in steps of its own.
 */
export const ALLOCATION_SLACK = 96 * 2 ** 20;

/** Milliseconds a single read may take before it counts as a hang. */
export const HANG_MS = 20_000;

/** An input: one file's bytes, or a TF.js artifacts directory's files. */
export type Input = { bytes: Uint8Array } | { files: Record<string, Uint8Array> };

/** A mutated input and how it was made. */
export interface Case {
  target: Target;
  iteration: number;
  input: Input;
  /** The digests were recomputed after the mutation (an accepted input may differ from its seed). */
  fixed: boolean;
  /** The mutation, for the report. */
  how: string;
  seed: Checkpoint;
}

/** What went wrong with one input. */
export interface Failure {
  kind:
    | "non-domain error"
    | "hang"
    | "silent corruption"
    | "readers disagree"
    | "allocation beyond caps"
    | "file left open";
  reader: string;
  detail: string;
}

type Rand = () => number;
const int = (r: Rand, n: number) => Math.floor(r() * n);
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;
const utf8 = new TextEncoder();
const text = new TextDecoder();

// ---------------------------------------------------------------------------------------------
// Seeds

/**
 * A temporary directory for the files readers are given, on tmpfs (`/dev/shm`) where there is
 * one: the path readers and TF.js artifacts then cost no disk writes.
 */
export async function fuzzTempDir(prefix: string): Promise<string> {
  try {
    if ((await Deno.stat("/dev/shm")).isDirectory) return await Deno.makeTempDir({ dir: "/dev/shm", prefix });
  } catch { /* no tmpfs here, or not writable: the default temporary directory */ }
  return await Deno.makeTempDir({ prefix });
}

async function collect(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(s).arrayBuffer());
}

/** Small seed checkpoints: every dtype with edge values, and random ones. */
function seedCheckpoints(): CheckpointInput[] {
  const out: CheckpointInput[] = [edgeCheckpoint()];
  for (let s = 1; out.length < 8; s++) {
    const c = randomCheckpoint(s * 7919);
    if ((c.tensors as TensorInput[]).length > 0) out.push(c);
  }
  return out;
}

/** TF.js can hold these dtypes without narrowing. */
const TFJS_DTYPES = new Set(["float32", "int32", "bool", "float16", "bfloat16", "uint8", "uint16", "int8", "int16"]);

/** A seed in a target's encoding, and the checkpoint it decodes to. */
export interface Seed {
  input: Input;
  expected: Checkpoint;
  /** Inner (uncompressed) bytes for gzip targets, mutated before compressing. */
  inner?: Uint8Array;
}

async function readDir(dir: string): Promise<Record<string, Uint8Array>> {
  const files: Record<string, Uint8Array> = {};
  for await (const e of Deno.readDir(dir)) if (e.isFile) files[e.name] = await Deno.readFile(`${dir}/${e.name}`);
  return files;
}

/** The key of a sharded seed's manifest in its store. */
const SHARD_KEY = "m.ckpt";

/** A manifest's bytes with its trailer recomputed over what comes before it (a "fixed" mutation). */
function reframe(bytes: Uint8Array): Uint8Array {
  if (bytes.byteLength < 72) return bytes;
  const head = bytes.subarray(0, bytes.byteLength - 72);
  const trailer = new TextEncoder().encode(`sha256 ${createHash("sha256").update(head).digest("hex")}\n`);
  return concatBytes([head, trailer]);
}

/** Encodes the seeds for every target once. */
export async function makeSeeds(): Promise<Record<Target, Seed[]>> {
  const out = {} as Record<Target, Seed[]>;
  for (const t of TARGETS) out[t] = [];
  const tmp = await Deno.makeTempDir({ prefix: "ckpt-fuzz-seed-" });
  try {
    for (const [i, c] of seedCheckpoints().entries()) {
      const bin = await collect(encodeCheckpoint(c));
      const expected = await loadCheckpoint(bin);
      const json = await collect(encodeCheckpoint(c, { codec: "json" }));
      out.binary.push({ input: { bytes: bin }, expected });
      out["binary+gzip"].push({ input: { bytes: gzipSync(bin) }, expected, inner: bin });
      out.bytegroup.push({
        input: { bytes: await collect(encodeCheckpoint(c, { compression: "bytegroup" })) },
        expected,
      });
      out.json.push({ input: { bytes: json }, expected });
      out["json+gzip"].push({ input: { bytes: gzipSync(json) }, expected, inner: json });
      out.safetensors.push({
        input: { bytes: await collect(encodeCheckpoint(c, { codec: safetensorsCodec })) },
        expected,
      });
      const tensors = (c.tensors as TensorInput[]).filter((t) => TFJS_DTYPES.has(t.dtype));
      const tf = { metadata: c.metadata, tensors };
      const dir = `${tmp}/tfjs${i}`;
      await writeTfjsArtifacts(dir, tf, { shardBytes: 256, sync: false });
      out.tfjs.push({ input: { files: await readDir(dir) }, expected: await readTfjsArtifacts(`${dir}/model.json`) });
      // A sharded checkpoint in 3 parts (tensors split into row slices): the manifest is mutated,
      // the parts stay as written.
      const sharded = new MemoryStore();
      await saveSharded({ store: sharded, key: SHARD_KEY }, {
        metadata: c.metadata,
        tensors: c.tensors as TensorInput[],
      }, {
        writers: 3,
        splitBytes: 64,
        saveId: `seed${i}`,
        sync: false,
      });
      const objects: Record<string, Uint8Array> = {};
      for await (const o of sharded.list()) objects[o.key] = await collect((await sharded.get(o.key)).body);
      out["shard-manifest"].push({ input: { files: objects }, expected });
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Blind mutations

const INTERESTING_U64 = [
  0n,
  1n,
  15n,
  16n,
  47n,
  48n,
  63n,
  64n,
  127n,
  128n,
  255n,
  256n,
  0x7fffn,
  0xffffn,
  0x7fffffffn,
  0x80000000n,
  0xffffffffn,
  2n ** 32n,
  2n ** 53n - 1n,
  2n ** 53n,
  2n ** 63n,
  2n ** 64n - 1n,
];

/** One blind mutation of `b` (a new array). */
function blind(r: Rand, b: Uint8Array, other?: Uint8Array): [Uint8Array, string] {
  const n = b.byteLength;
  const at = n > 0 ? int(r, n) : 0;
  switch (int(r, 10)) {
    case 0: {
      const c = b.slice();
      if (n) c[at]! ^= 1 << int(r, 8);
      return [c, `flip bit at ${at}`];
    }
    case 1: {
      const c = b.slice();
      if (n) c[at] = pick(r, [0, 1, 0x7f, 0x80, 0xff, 0x0a, 0x22, 0x7b, 0x5d, int(r, 256)]);
      return [c, `set byte ${at}`];
    }
    case 2: {
      const len = int(r, 64) + 1;
      const ins = Uint8Array.from({ length: len }, () => int(r, 256));
      return [concatBytes([b.subarray(0, at), ins, b.subarray(at)]), `insert ${len} at ${at}`];
    }
    case 3: {
      const len = int(r, Math.min(n - at, 256) + 1);
      return [concatBytes([b.subarray(0, at), b.subarray(at + len)]), `delete ${len} at ${at}`];
    }
    case 4: {
      const len = int(r, Math.min(n - at, 256) + 1);
      const to = int(r, n + 1);
      return [
        concatBytes([b.subarray(0, to), b.subarray(at, at + len), b.subarray(to)]),
        `duplicate ${len} from ${at}`,
      ];
    }
    case 5:
      return [b.slice(0, at), `truncate at ${at}`];
    case 6: {
      const tail = Uint8Array.from({ length: int(r, 80) + 1 }, () => int(r, 256));
      return [concatBytes([b, tail]), `append ${tail.byteLength}`];
    }
    case 7: {
      const c = b.slice();
      const width = pick(r, [4, 8]);
      if (n >= width) {
        const o = int(r, n - width + 1);
        const v = pick(r, INTERESTING_U64) + BigInt(pick(r, [0, 0, -1, 1]));
        const dv = new DataView(c.buffer);
        if (width === 8) dv.setBigUint64(o, BigInt.asUintN(64, v), true);
        else dv.setUint32(o, Number(BigInt.asUintN(32, v)), true);
        return [c, `set u${width * 8} at ${o}`];
      }
      return [c, "no-op"];
    }
    case 8: {
      if (!other || other.byteLength === 0) return [b.slice(), "no-op"];
      const from = int(r, other.byteLength);
      const len = int(r, other.byteLength - from) + 1;
      return [concatBytes([b.subarray(0, at), other.subarray(from, from + len), b.subarray(at)]), `splice ${len}`];
    }
    default: {
      const c = b.slice();
      const k = int(r, 8) + 2;
      for (let i = 0; i < k && n; i++) c[int(r, n)] = int(r, 256);
      return [c, `scramble ${k} bytes`];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// JSON value mutations (for heads, lines, headers, model.json)

const RAW = "@@raw@@";
const RAW_LITERALS = [
  "-0",
  "-0.0",
  "1e400",
  "-1e400",
  "1" + "0".repeat(30),
  "9".repeat(400),
  "18446744073709551616",
  "9007199254740993",
  "0.5e-400",
  "[".repeat(200) + "]".repeat(200),
];

function hostileValue(r: Rand): unknown {
  return pick(r, [
    -1,
    0,
    1,
    1.5,
    2 ** 31,
    2 ** 32,
    2 ** 53,
    Number.MAX_SAFE_INTEGER,
    null,
    true,
    "",
    "x",
    "NaN",
    "-0",
    "Infinity",
    "__proto__",
    "constructor",
    "toString",
    "prototype",
    "\ud800",
    "a".repeat(int(r, 3) ? 10 : 100_000),
    {},
    [],
    [0],
    [-1],
    [2 ** 53],
    [1, 2, 3],
    { dtype: "uint8" },
    { a: 1 },
    "float32",
    "int64",
    "bool",
    "uint8",
    "float16",
    "F32",
    "BOOL",
    "weights.bin",
    "../x",
    RAW,
  ]);
}

/** Mutates one node of a parsed JSON value in place (or replaces the root); returns the new root. */
function mutateJson(r: Rand, root: unknown): unknown {
  const nodes: [Record<string, unknown> | unknown[] | null, string | number, unknown][] = [[null, "", root]];
  const walk = (v: unknown, depth: number) => {
    if (depth > 8 || typeof v !== "object" || v === null) return;
    for (const [k, x] of Object.entries(v)) {
      nodes.push([v as Record<string, unknown>, Array.isArray(v) ? Number(k) : k, x]);
      walk(x, depth + 1);
    }
  };
  walk(root, 0);
  const [parent, key, value] = pick(r, nodes);
  let next: unknown;
  switch (int(r, 6)) {
    case 0:
      if (parent !== null) {
        if (Array.isArray(parent)) parent.splice(key as number, 1);
        else delete (parent as Record<string, unknown>)[key as string];
        return root;
      }
      next = hostileValue(r);
      break;
    case 1:
      if (typeof value === "number") next = pick(r, [value + 1, value - 1, -value, value * 2, value + 0.5, 0]);
      else next = hostileValue(r);
      break;
    case 2:
      if (typeof value === "object" && value !== null && !Array.isArray(value)) {
        (value as Record<string, unknown>)[pick(r, ["x", "__proto__", "dtype", "group", "bytes", "name"])] =
          hostileValue(r);
        return root;
      }
      next = hostileValue(r);
      break;
    case 3:
      if (Array.isArray(value)) {
        value.push(value.length ? value[int(r, value.length)] : hostileValue(r));
        return root;
      }
      next = hostileValue(r);
      break;
    default:
      next = hostileValue(r);
  }
  if (parent === null) return next;
  (parent as Record<string, unknown>)[key as string] = next;
  return root;
}

/** JSON text of a mutated value, with a raw literal (such as `1e400` or `-0`) where RAW stands. */
function jsonText(r: Rand, v: unknown): string {
  return JSON.stringify(v).replaceAll(JSON.stringify(RAW), () => pick(r, RAW_LITERALS));
}

// ---------------------------------------------------------------------------------------------
// Binary: record layout, head edits, digest recomputation

interface Rec {
  at: number;
  kind: number;
  head: [number, number];
  body: [number, number];
  end: number; // after the digest
}

function binaryRecords(b: Uint8Array): { recs: Rec[]; footer: number } | undefined {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const recs: Rec[] = [];
  let at = 16;
  while (at + 16 <= b.byteLength) {
    const kind = b[at]!;
    const head = dv.getUint32(at + 4, true);
    const body = Number(dv.getBigUint64(at + 8, true));
    const headEnd = at + 16 + head;
    const pad = kind === 2 ? (64 - (headEnd % 64)) % 64 : 0;
    const bodyStart = headEnd + pad;
    const end = bodyStart + body + 32;
    if (end > b.byteLength || body > b.byteLength) return undefined;
    recs.push({ at, kind, head: [at + 16, headEnd], body: [bodyStart, bodyStart + body], end });
    at = end;
    if (kind === 3) return at + 48 === b.byteLength ? { recs, footer: at } : undefined;
  }
  return undefined;
}

/** Recomputes every record digest, the stream digest and the footer's index offset. */
function fixBinary(b: Uint8Array): boolean {
  const layout = binaryRecords(b);
  if (!layout) return false;
  const stream = createHash("sha256");
  stream.update(b.subarray(0, 16));
  let index = 0;
  for (const r of layout.recs) {
    const h = createHash("sha256").update(b.subarray(r.at, r.end - 32)).digest();
    b.set(h, r.end - 32);
    stream.update(b.subarray(r.at, r.body[0]));
    stream.update(b.subarray(r.body[1], r.end));
    if (r.kind === 3) index = r.at;
  }
  new DataView(b.buffer, b.byteOffset).setBigUint64(layout.footer, BigInt(index), true);
  b.set(stream.digest(), layout.footer + 8);
  return true;
}

function mutateBinary(r: Rand, src: Uint8Array): [Uint8Array, string, boolean] {
  const b = src.slice();
  const layout = binaryRecords(b);
  if (!layout) return [...blind(r, b), false];
  const rec = pick(r, layout.recs);
  const dv = new DataView(b.buffer);
  let how: string;
  switch (int(r, 4)) {
    case 0: {
      // Rewrite the head's JSON in place, padded with spaces (same length keeps the layout).
      const [s, e] = rec.head;
      let v: unknown;
      try {
        v = JSON.parse(text.decode(b.subarray(s, e)));
      } catch {
        return [...blind(r, b), false];
      }
      const t = utf8.encode(jsonText(r, mutateJson(r, v)));
      if (t.byteLength > e - s) return [...blind(r, b), false];
      b.fill(0x20, s, e);
      b.set(t, s);
      how = `head of record at ${rec.at}`;
      break;
    }
    case 1: {
      const field = pick(r, [0, 4, 8]);
      if (field === 0) b[rec.at] = int(r, 5);
      else if (field === 4) dv.setUint32(rec.at + 4, Number(BigInt.asUintN(32, pick(r, INTERESTING_U64))), true);
      else dv.setBigUint64(rec.at + 8, pick(r, INTERESTING_U64), true);
      how = `record header field ${field} at ${rec.at}`;
      break;
    }
    case 2: {
      const to = pick(r, [int(r, b.byteLength), layout.footer - int(r, 64), rec.at, int(r, 64)]);
      dv.setBigUint64(layout.footer, BigInt(Math.max(0, to)), true);
      how = `footer index offset ${to}`;
      if (r() < 0.7) return [b, how, false]; // the offset is what is being tested: keep it
      break;
    }
    default: {
      const [s, e] = rec.body;
      if (e > s) b[s + int(r, e - s)]! ^= 1 << int(r, 8);
      how = `body of record at ${rec.at}`;
    }
  }
  if (r() < 0.5 && fixBinary(b)) return [b, how + ", digests recomputed", true];
  return [b, how, false];
}

// ---------------------------------------------------------------------------------------------
// JSON Lines: line edits, digest recomputation

function fixJsonLines(lines: string[]): string[] {
  const stream = createHash("sha256");
  let rec: ReturnType<typeof createHash> | undefined;
  const out: string[] = [];
  for (const [i, line] of lines.entries()) {
    // The line's first key, without parsing its data (parsing every line cost more than decoding).
    const key = /^\{"(metadata|tensor|data|sha256|end)":/.exec(line)?.[1];
    let l = line;
    if (key === "metadata" || key === "tensor") rec = createHash("sha256").update(l + "\n");
    else if (key === "data") rec?.update(l + "\n");
    else if (key === "sha256" && rec) {
      l = `{"sha256":"${rec.digest("hex")}"}`;
      rec = undefined;
    } else if (key === "end" && i === lines.length - 1) {
      let e: Record<string, unknown> | undefined;
      try {
        e = JSON.parse(line).end;
      } catch { /* not JSON: the count is then 0 */ }
      l = `{"end":{"tensors":${JSON.stringify(e?.tensors ?? 0)},"sha256":"${stream.digest("hex")}"}}`;
      out.push(l);
      return out;
    }
    stream.update(l + "\n");
    out.push(l);
  }
  return out;
}

function mutateJsonLines(r: Rand, src: Uint8Array): [Uint8Array, string, boolean] {
  const t = text.decode(src);
  if (!t.endsWith("\n")) return [...blind(r, src), false];
  let lines = t.slice(0, -1).split("\n");
  const i = int(r, lines.length);
  let how: string;
  switch (int(r, 5)) {
    case 0:
      lines.splice(i, 1);
      how = `delete line ${i + 1}`;
      break;
    case 1:
      lines.splice(i, 0, lines[i]!);
      how = `duplicate line ${i + 1}`;
      break;
    case 2: {
      const j = int(r, lines.length);
      [lines[i], lines[j]] = [lines[j]!, lines[i]!];
      how = `swap lines ${i + 1} and ${j + 1}`;
      break;
    }
    case 3:
      lines[i] = pick(r, [
        "",
        "{}",
        "[]",
        "null",
        '{"data":[]}',
        '{"a":1,"b":2}',
        lines[i]! + " ",
        "\ufeff" + lines[i],
      ]);
      how = `replace line ${i + 1}`;
      break;
    default: {
      try {
        lines[i] = jsonText(r, mutateJson(r, JSON.parse(lines[i]!)));
      } catch {
        return [...blind(r, src), false];
      }
      how = `value in line ${i + 1}`;
    }
  }
  const fixed = r() < 0.5;
  if (fixed) lines = fixJsonLines(lines);
  return [utf8.encode(lines.join("\n") + "\n"), fixed ? how + ", digests recomputed" : how, fixed];
}

// ---------------------------------------------------------------------------------------------
// safetensors: header edits with a consistent length prefix

function mutateSafetensors(r: Rand, src: Uint8Array): [Uint8Array, string] {
  if (src.byteLength < 8) return blind(r, src);
  const n = Number(new DataView(src.buffer, src.byteOffset).getBigUint64(0, true));
  if (8 + n > src.byteLength) return blind(r, src);
  let header: unknown;
  try {
    header = JSON.parse(text.decode(src.subarray(8, 8 + n)));
  } catch {
    return blind(r, src);
  }
  let h: Uint8Array = utf8.encode(jsonText(r, mutateJson(r, header)));
  if (r() < 0.3) h = concatBytes([h, new Uint8Array(int(r, 9)).fill(0x20)]);
  const prefix = new Uint8Array(8);
  const length = r() < 0.9 ? BigInt(h.byteLength) : pick(r, INTERESTING_U64);
  new DataView(prefix.buffer).setBigUint64(0, length, true);
  return [concatBytes([prefix, h, src.subarray(8 + n)]), "header value"];
}

// ---------------------------------------------------------------------------------------------
// TF.js artifacts: model.json and shard edits

function mutateTfjs(r: Rand, files: Record<string, Uint8Array>): [Record<string, Uint8Array>, string, boolean] {
  const out = { ...files };
  const shards = Object.keys(files).filter((f) => f !== "model.json");
  let model: Record<string, unknown> | null;
  try {
    model = JSON.parse(text.decode(files["model.json"]));
  } catch {
    return [out, "no-op", false];
  }
  const choice = int(r, 4);
  if (choice === 0 && shards.length) {
    const s = pick(r, shards);
    const [b, how] = blind(r, files[s]!);
    out[s] = b;
    // Recompute the shard digests the "ckpt" record holds: then the manifest is what is tested.
    if (r() < 0.5) {
      // An earlier mutation of this case may have left model.json any JSON value (null, say).
      const ckpt = (model !== null && typeof model === "object" ? model.ckpt : undefined) as
        | { shards?: { path: string; bytes: number; sha256: string }[] }
        | undefined;
      for (const e of Array.isArray(ckpt?.shards) ? ckpt.shards : []) {
        const f = typeof e?.path === "string" && Object.hasOwn(out, e.path) ? out[e.path] : undefined;
        if (f) {
          e.bytes = f.byteLength;
          e.sha256 = createHash("sha256").update(f).digest("hex");
        }
      }
      out["model.json"] = utf8.encode(JSON.stringify(model));
      return [out, `shard ${s}: ${how}, digests recomputed`, true];
    }
    return [out, `shard ${s}: ${how}`, false];
  }
  if (choice === 1) {
    const [b, how] = blind(r, files["model.json"]!);
    out["model.json"] = b;
    return [out, `model.json: ${how}`, true];
  }
  if (choice === 2 && r() < 0.3) {
    out["model.json"] = utf8.encode(JSON.stringify({ ...model, ckpt: undefined }));
    return [out, "ckpt record dropped", true];
  }
  out["model.json"] = utf8.encode(jsonText(r, mutateJson(r, model)));
  return [out, "model.json value", true];
}

// ---------------------------------------------------------------------------------------------
// Case generation

/** The PRNG of one iteration: a pure function of the run seed, the target and the iteration. */
export function iterationRand(seed: number, target: Target, iteration: number): Rand {
  const h = createHash("sha256").update(`${seed}/${target}/${iteration}`).digest();
  return prng(h.readUInt32LE(0));
}

/** The input for (seed, target, iteration). */
export function makeCase(seeds: Record<Target, Seed[]>, target: Target, seed: number, iteration: number): Case {
  const r = iterationRand(seed, target, iteration);
  const pool = seeds[target];
  const s = pick(r, pool);
  const other = pick(r, pool);
  const otherBytes = "bytes" in other.input ? other.input.bytes : undefined;
  const base = { target, iteration, seed: s.expected };
  const roll = r();
  if (target === "shard-manifest") {
    const files = (s.input as { files: Record<string, Uint8Array> }).files;
    if (roll < 0.03) return { ...base, input: { files }, fixed: false, how: "seed unchanged" };
    let cur = files[SHARD_KEY]!;
    const hows: string[] = [];
    for (let k = 0, n = 1 + int(r, 3); k < n; k++) {
      let how: string;
      [cur, how] = blind(r, cur);
      hows.push(how);
    }
    const fixed = r() < 0.6;
    if (fixed) cur = reframe(cur);
    return {
      ...base,
      input: { files: { ...files, [SHARD_KEY]: cur } },
      fixed,
      how: hows.join("; ") + (fixed ? "; trailer recomputed" : ""),
    };
  }
  if (target === "tfjs") {
    const files = (s.input as { files: Record<string, Uint8Array> }).files;
    if (roll < 0.03) return { ...base, input: { files }, fixed: false, how: "seed unchanged" };
    let cur = files;
    let fixed = false;
    const hows: string[] = [];
    for (let k = 0, n = 1 + int(r, 3); k < n; k++) {
      const [f, how, fx] = mutateTfjs(r, cur);
      cur = f;
      fixed ||= fx;
      hows.push(how);
    }
    return { ...base, input: { files: cur }, fixed, how: hows.join("; ") };
  }
  const bytes = (s.input as { bytes: Uint8Array }).bytes;
  if (roll < 0.03) return { ...base, input: { bytes }, fixed: false, how: "seed unchanged" };
  if (roll < 0.08) {
    // Fully random bytes, sometimes behind a format's first bytes so that they reach its decoder.
    const rnd = Uint8Array.from({ length: int(r, 2048) }, () => int(r, 256));
    const keep = r() < 0.7 ? bytes.subarray(0, int(r, Math.min(64, bytes.byteLength) + 1)) : new Uint8Array(0);
    return { ...base, input: { bytes: concatBytes([keep, rnd]) }, fixed: true, how: `random after ${keep.byteLength}` };
  }
  let cur = bytes;
  let fixed = false;
  const hows: string[] = [];
  const aware = r() < 0.6;
  for (let k = 0, n = 1 + int(r, 3); k < n; k++) {
    let how: string;
    let fx = false;
    if (aware && s.inner && (target === "binary+gzip" || target === "json+gzip")) {
      // Mutate the content, then compress: the gzip layer is valid and the codec sees the damage.
      const inner = k === 0 ? s.inner : cur;
      const m = target === "binary+gzip" ? mutateBinary(r, inner) : mutateJsonLines(r, inner);
      cur = m[0];
      how = m[1];
      fx = m[2];
      if (k === n - 1) cur = gzipSync(cur);
    } else if (aware && target === "binary") [cur, how, fx] = mutateBinary(r, cur);
    else if (aware && target === "json") [cur, how, fx] = mutateJsonLines(r, cur);
    else if (aware && target === "safetensors") [cur, how] = mutateSafetensors(r, cur);
    else [cur, how] = blind(r, cur, otherBytes);
    fixed ||= fx;
    hows.push(how);
  }
  return { ...base, input: { bytes: cur }, fixed, how: hows.join("; ") };
}

// ---------------------------------------------------------------------------------------------
// Readers and the oracle

type Outcome = { ok: Checkpoint } | { error: unknown };

function withTimeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HangError(what)), HANG_MS);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

class HangError extends Error {}

async function outcome(f: () => Promise<Checkpoint>, what: string): Promise<Outcome> {
  try {
    return { ok: await withTimeout(f(), what) };
  } catch (error) {
    return { error };
  }
}

/**
 * How much of the reader set each input gets. `thorough`: every reader on every input, the whole
 * input in chunks of 1 byte, up to 16 bytes or up to 4 KiB equally often. `fast` (long runs): the
 * whole and chunked reads and random access through a {@linkcode MemoryStore} on every input; the
 * path readers on one input in 32; small chunks in a window: on one input in 16, 256 bytes from a
 * random offset arrive one byte per chunk, on one in 8 a random KiB arrives in chunks of up to 16
 * bytes, the rest of the input in chunks of up to 4 KiB (a chunk costs the streams about 10 µs
 * whatever its size, so 1-byte chunks through a whole input cost ten times every other reader
 * together; the window still puts every boundary of every structure under small chunks, across
 * inputs). Either way the choice is drawn from the iteration's own PRNG, so `--iteration I`
 * replays the same readers.
 */
export type Depth = "thorough" | "fast";

/** Chunk sizes for one input: `small` bytes at most per chunk within [from, to), 4 KiB elsewhere. */
interface Chunking {
  small: number;
  from: number;
  to: number;
}

function chunking(r: Rand, depth: Depth, n: number): Chunking {
  if (depth === "thorough") {
    const small = [1, 16, 4096][int(r, 3)]!;
    return { small, from: 0, to: n };
  }
  const x = r();
  const [small, width] = x < 1 / 16 ? [1, 256] : x < 1 / 16 + 1 / 8 ? [16, 1024] : [4096, 0];
  const from = int(r, Math.max(1, n - width + 1));
  return { small, from, to: from + width };
}

function chunkStream(r: Rand, b: Uint8Array, how: Chunking): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= b.byteLength) return c.close();
      const inWindow = at >= how.from && at < how.to;
      // Outside the window, stop at its start so that it begins on a chunk boundary.
      const most = inWindow ? how.small : at < how.from ? Math.min(4096, how.from - at) : 4096;
      const n = 1 + int(r, most);
      c.enqueue(b.slice(at, at + n));
      at += n;
    },
  });
}

/** Whether an error is one of ckpt's own, as a caller expects from bad bytes. */
export function isDomainError(e: unknown, files = false): boolean {
  if (files && e instanceof Deno.errors.NotFound) return true; // a manifest naming a missing shard
  if (files && e instanceof Deno.errors.IsADirectory) return true;
  if (files && e instanceof ObjectNotFoundError) return true; // a shard manifest naming a part not there
  if (e instanceof ChecksumMismatchError) return true;
  if (!(e instanceof SyntaxError || e instanceof RangeError)) return false;
  return /^Cannot /.test(e.message);
}

function sameTensorData(a: Checkpoint["tensors"][number], b: Checkpoint["tensors"][number]): boolean {
  if (a.name !== b.name || a.dtype !== b.dtype || a.group !== b.group) return false;
  if (a.shape.length !== b.shape.length || a.shape.some((d, i) => d !== b.shape[i])) return false;
  const x = bytesOf(a.data), y = bytesOf(b.data);
  if (x.byteLength !== y.byteLength) return false;
  for (let i = 0; i < x.byteLength; i++) if (x[i] !== y[i]) return false;
  return true;
}

function sameValue(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return false;
  return ka.every((k) => sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** Whether two checkpoints are equal: metadata exactly (key order included) and tensors bit for bit. */
export function sameCheckpoint(a: Checkpoint, b: Checkpoint): boolean {
  return sameValue(a.metadata, b.metadata) && a.tensors.length === b.tensors.length &&
    a.tensors.every((t, i) => sameTensorData(t, b.tensors[i]!));
}

function describe(e: unknown): string {
  return e instanceof Error ? `${e.constructor.name}: ${e.message.slice(0, 300)}` : String(e);
}

/** Runs every reader on a case and returns what went wrong (nothing, for a correct decoder). */
export async function check(
  c: Case,
  tmp: string,
  depth: Depth = "thorough",
): Promise<{ failures: Failure[]; accepted: boolean }> {
  const r = iterationRand(c.iteration, c.target, -1);
  const failures: Failure[] = [];
  const results: [string, Outcome][] = [];
  if (c.target === "shard-manifest" && "files" in c.input) {
    // The manifest and its parts in a store; loadCheckpoint reads the manifest, then the slices.
    const store = new MemoryStore();
    for (const [key, bytes] of Object.entries(c.input.files)) await store.put(key, bytes);
    results.push(["whole", await outcome(() => loadCheckpoint({ store, key: SHARD_KEY }, FUZZ_LIMITS), "whole")]);
  } else if ("files" in c.input) {
    // One directory for every input (on tmpfs where there is one, see fuzzTempDir): the files
    // are written, read and removed; a fresh directory per input cost more than the read.
    const dir = `${tmp}/tfjs`;
    await Deno.mkdir(dir, { recursive: true });
    const names = Object.keys(c.input.files);
    try {
      for (const name of names) await Deno.writeFile(`${dir}/${name}`, c.input.files[name]!);
      results.push(["tfjs", await outcome(() => readTfjsArtifacts(`${dir}/model.json`, FUZZ_LIMITS), "tfjs")]);
    } finally {
      for (const name of names) await Deno.remove(`${dir}/${name}`);
    }
  } else {
    const b = c.input.bytes;
    const style = chunking(r, depth, b.byteLength);
    const viaPath = depth === "thorough" || r() < 1 / 32;
    const name = c.seed.tensors.length ? pick(r, c.seed.tensors).name : "w";
    const byName = c.target === "binary" || c.target === "bytegroup" || c.target === "safetensors";
    results.push(["whole", await outcome(() => loadCheckpoint(b, FUZZ_LIMITS), "whole")]);
    results.push(["chunked", await outcome(() => loadCheckpoint(chunkStream(r, b, style), FUZZ_LIMITS), "chunked")]);
    if (byName) {
      // Random access through the storage layer: ranged reads of an object, as from S3 or HTTP.
      const at = { store: new MemoryStore(), key: "in" };
      await at.store.put(at.key, b);
      results.push([
        "by name (store)",
        await outcome(() => loadCheckpoint(at, { ...FUZZ_LIMITS, only: [name] }), "by name (store)"),
      ]);
      if (c.target !== "safetensors") {
        results.push([
          "index (store)",
          await outcome(async () => {
            const ix = await readCheckpointIndex(at, FUZZ_LIMITS);
            return { metadata: ix.metadata, tensors: [] };
          }, "index (store)"),
        ]);
      }
    }
    if (viaPath) {
      const path = `${tmp}/in${c.iteration}`;
      await Deno.writeFile(path, b);
      try {
        results.push(["path", await outcome(() => loadCheckpoint(path, FUZZ_LIMITS), "path")]);
        if (c.target === "binary" || c.target === "bytegroup") {
          results.push([
            "by name",
            await outcome(() => loadCheckpoint(path, { ...FUZZ_LIMITS, only: [name] }), "by name"),
          ]);
          results.push([
            "index",
            await outcome(async () => {
              const ix = await readCheckpointIndex(path, FUZZ_LIMITS);
              return { metadata: ix.metadata, tensors: [] };
            }, "index"),
          ]);
        } else if (c.target === "safetensors") {
          results.push([
            "by name",
            await outcome(() => readSafetensorsTensors(path, [name], FUZZ_LIMITS), "by name"),
          ]);
        }
      } finally {
        await Deno.remove(path);
      }
    }
  }
  const files = "files" in c.input;
  // Digest-protected content: binary and JSON (compressed or not); TF.js shards under a ckpt record.
  const protectedContent = !c.fixed && c.target !== "safetensors";
  for (const [reader, o] of results) {
    if ("error" in o) {
      if (o.error instanceof HangError) failures.push({ kind: "hang", reader, detail: `no answer in ${HANG_MS} ms` });
      else if (!isDomainError(o.error, files)) {
        failures.push({ kind: "non-domain error", reader, detail: describe(o.error) });
      }
      continue;
    }
    const partial = reader.startsWith("by name") || reader.startsWith("index");
    if (!protectedContent) continue;
    if (reader.startsWith("index")) {
      if (!sameValue(o.ok.metadata, c.seed.metadata)) {
        failures.push({ kind: "silent corruption", reader, detail: "index metadata differs from the seed" });
      }
      continue;
    }
    const expected = partial
      ? {
        metadata: c.seed.metadata,
        tensors: c.seed.tensors.filter((t) => o.ok.tensors.some((x) => x.name === t.name)),
      }
      : c.seed;
    if (partial && o.ok.tensors.length !== 1) {
      failures.push({ kind: "silent corruption", reader, detail: `${o.ok.tensors.length} tensors for one name` });
    } else if (!sameCheckpoint(o.ok, expected)) {
      failures.push({ kind: "silent corruption", reader, detail: "accepted input decodes to something else" });
    }
  }
  // The full readers must agree with each other: all accept the same checkpoint, or all reject.
  const full = results.filter(([n]) => n === "whole" || n === "chunked" || n === "path");
  const accepted = full.filter(([, o]) => "ok" in o);
  if (accepted.length > 0 && accepted.length < full.length) {
    failures.push({
      kind: "readers disagree",
      reader: full.map(([n, o]) => `${n} ${"ok" in o ? "accepts" : "rejects"}`).join(", "),
      detail: full.map(([n, o]) => ("error" in o ? `${n}: ${describe(o.error)}` : "")).filter(Boolean).join("; "),
    });
  } else if (accepted.length > 1) {
    const first = (accepted[0]![1] as { ok: Checkpoint }).ok;
    for (const [n, o] of accepted.slice(1)) {
      if (!sameCheckpoint(first, (o as { ok: Checkpoint }).ok)) {
        failures.push({ kind: "readers disagree", reader: n, detail: `${n} decodes differently from whole` });
      }
    }
  }
  // Random access may check less than a full read (it skips what it does not read), but what it
  // returns must be what a full read returns.
  const whole = results.find(([n]) => n === "whole")?.[1];
  for (const [n, o] of results) {
    if (!n.startsWith("by name") || !("ok" in o) || !whole || !("ok" in whole)) continue;
    const t = o.ok.tensors[0];
    const w = t && whole.ok.tensors.find((x) => x.name === t.name);
    if (!t || !w || !sameTensorData(t, w) || !sameValue(o.ok.metadata, whole.ok.metadata)) {
      failures.push({ kind: "readers disagree", reader: n, detail: "by-name read differs from the full read" });
    }
  }
  return { failures, accepted: results.some(([, o]) => "ok" in o) };
}

/** Where a failing input is saved: a name that says how to regenerate it. */
export function failureName(c: Case, seed: number): string {
  return `${c.target.replace("+", "-")}-seed${seed}-i${c.iteration}`;
}

/** Saves a failing input (one file, or a directory of TF.js files) under `dir`; returns its path. */
export async function saveFailure(dir: string, c: Case, seed: number, failures: Failure[]): Promise<string> {
  const base = `${dir}/${failureName(c, seed)}`;
  await Deno.mkdir(dir, { recursive: true });
  if ("files" in c.input) {
    await Deno.mkdir(base, { recursive: true });
    for (const [n, b] of Object.entries(c.input.files)) {
      await Deno.mkdir(`${base}/${n}`.replace(/\/[^/]*$/, ""), { recursive: true });
      await Deno.writeFile(`${base}/${n}`, b);
    }
  } else {
    await Deno.writeFile(`${base}.bin`, c.input.bytes);
  }
  await Deno.writeTextFile(
    `${base}.txt`,
    `target ${c.target}, run seed ${seed}, iteration ${c.iteration}\nmutation: ${c.how}\n` +
      `reproduce: deno task fuzz --seed ${seed} --target ${c.target} --iteration ${c.iteration}\n` +
      failures.map((f) => `${f.kind} (${f.reader}): ${f.detail}`).join("\n") + "\n",
  );
  return base;
}

/** Counts for one target. */
export interface Stats {
  inputs: number;
  accepted: number;
  "non-domain error": number;
  hang: number;
  "silent corruption": number;
  "readers disagree": number;
  "allocation beyond caps": number;
  "file left open": number;
}

/** Fresh counters. */
export function newStats(): Stats {
  return {
    inputs: 0,
    accepted: 0,
    "non-domain error": 0,
    hang: 0,
    "silent corruption": 0,
    "readers disagree": 0,
    "allocation beyond caps": 0,
    "file left open": 0,
  };
}
