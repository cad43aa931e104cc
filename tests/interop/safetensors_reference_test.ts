// ckpt's safetensors codec against the reference implementation (the `safetensors` package of the
// peers' environment, scripts/peers_venv.sh), both directions, on the reference's own test cases
// and on a few thousand seeded, generated and mutated files, each batch in one Python process
// (tests/interop/python/st_reference.py):
// - every file both accept gives the same tensors (name, dtype, shape, bytes) and the same
//   `__metadata__`, and what ckpt writes back from it the reference reads the same again (a file
//   the reference wrote comes back byte for byte);
// - every file both refuse gets a SyntaxError or RangeError from ckpt saying where;
// - a file only ckpt refuses must fall under one of ckpt's documented stricter rules (named
//   below); a file only ckpt accepts is a failure. Disagreements are listed with their case.
// With any truthy CI a missing environment fails the test; elsewhere it skips, saying why.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { encodeCheckpoint } from "../../mod.ts";
import { peersPython } from "../../bench/_peers_env.ts";
import { bytesOf } from "../../src/format/dtype.ts";
import type { Checkpoint, Metadata } from "../../src/format/types.ts";
import { SAFETENSORS_DTYPES, safetensorsCodec } from "../../src/interop/safetensors.ts";
import { metadataFromSafetensors } from "../../src/interop/safetensors_metadata.ts";
import { collect, prng, randomCheckpoint } from "../_util.ts";
import { REFERENCE_WRITTEN, referenceSuite } from "./_safetensors_reference_cases.ts";

const ci = (Deno.env.get("CI") ?? "").trim().toLowerCase();
const inCI = !["", "0", "false", "no", "off"].includes(ci);
const env = await peersPython();
const missing = "error" in env ? env.error : undefined;
if (missing && !inCI) console.log(`skipping the safetensors reference test: ${missing}`);

const SCRIPT = new URL("./python/st_reference.py", import.meta.url).pathname;
const utf8 = new TextEncoder();
const dec = new TextDecoder();

/** Where ckpt is stricter than the reference on purpose (docs/interop.md, "Strict read"). */
const STRICTER: readonly (readonly [string, RegExp])[] = [
  ["duplicate key", /duplicate key/],
  ["unknown field in a tensor entry", /has unknown field/],
  ["dtype ckpt cannot hold", /which ckpt cannot hold/],
  ["reserved or empty tensor name", /invalid tensor name/],
  ["bool byte other than 0 or 1", /not 0 or 1/],
  ['"__metadata__" null', /"__metadata__" is null/],
  ["malformed ckpt. metadata entry", /invalid __metadata__|invalid metadata/],
  ["integer over 2^53 - 1 (a dimension beside a 0)", /over 2\^53 - 1/],
];

type RefTensor = { name: string; dtype: string; shape: number[]; sha256: string };
type RefRead = { ok: true; metadata: Record<string, string> | null; tensors: RefTensor[] } | {
  ok: false;
  error: string;
};
interface WriteJob {
  out: string;
  tensors: { name: string; dtype: string; shape: number[]; data: string }[];
  metadata: Record<string, string> | null;
}
interface Case {
  name: string;
  bytes: Uint8Array;
  /** Written by the reference and not mutated: ckpt must write it back byte for byte. */
  fromReference?: boolean;
}

async function reference(dir: string, batch: { write?: WriteJob[]; read?: string[] }) {
  const path = `${dir}/batch-${crypto.randomUUID()}.json`;
  await Deno.writeTextFile(path, JSON.stringify(batch));
  const python = "python" in env ? env.python : "python3";
  const o = await new Deno.Command(python, { args: [SCRIPT, path], stdout: "piped", stderr: "piped" }).output();
  assert.ok(o.success, `st_reference.py failed: ${dec.decode(o.stderr)}`);
  return JSON.parse(dec.decode(o.stdout)) as { version: string; written: (string | null)[]; read: RefRead[] };
}

function hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

const ALL_DTYPES = [
  ...Object.values(SAFETENSORS_DTYPES),
  "F8_E4M3",
  "F8_E5M2",
  "F8_E4M3FNUZ",
  "F8_E5M2FNUZ",
  "F8_E8M0",
  "C64",
];
const BYTES: Record<string, number> = { F64: 8, I64: 8, U64: 8, C64: 8, F32: 4, I32: 4, U32: 4, F16: 2, BF16: 2 };
BYTES.I16 = BYTES.U16 = 2;
const TEXT = ["pt", "", "é", "日本", "😀", 'q"uote', "back\\slash", "tab\tnl\n", "\u0001", "\u2028", "__proto__", "/"];

/** A random string of safe pieces (valid Unicode, escapes JSON must write). */
function text(rand: () => number): string {
  const n = Math.floor(rand() * 3);
  return Array.from({ length: n + 1 }, () => TEXT[Math.floor(rand() * TEXT.length)]!).join("");
}

function foreignMetadata(rand: () => number): Record<string, string> {
  const out: Record<string, string> = {};
  const n = Math.floor(rand() * 3);
  for (let i = 0; i < n; i++) {
    Object.defineProperty(out, `${text(rand)}${i}`, { value: text(rand), enumerable: true });
  }
  return out;
}

/** What the reference writes: random tensors of every dtype it knows, random foreign metadata. */
function referenceJob(rand: () => number, out: string): WriteJob {
  const tensors: WriteJob["tensors"] = [];
  const names = new Set<string>();
  for (let i = Math.floor(rand() * 5); i > 0; i--) {
    const dtype = ALL_DTYPES[Math.floor(rand() * ALL_DTYPES.length)]!;
    const shape = Array.from({ length: Math.floor(rand() * 3) }, () => Math.floor(rand() * 4));
    const bytes = new Uint8Array(shape.reduce((a, b) => a * b, 1) * (BYTES[dtype] ?? 1));
    for (let j = 0; j < bytes.length; j++) bytes[j] = dtype === "BOOL" ? (rand() < 0.5 ? 1 : 0) : rand() * 256;
    const name = rand() < 0.2 ? text(rand) || "x" : `t${i}.${dtype.toLowerCase()}`;
    if (names.has(name)) continue;
    names.add(name);
    tensors.push({ name, dtype, shape, data: btoa(String.fromCharCode(...bytes)) });
  }
  const metadata = rand() < 0.3 ? null : foreignMetadata(rand);
  return { out, tensors, metadata };
}

/** ckpt-written files: random checkpoints (groups, metrics) with foreign metadata beside. */
async function ckptFiles(count: number, seed: number): Promise<Case[]> {
  const out: Case[] = [];
  for (let i = 0; i < count; i++) {
    const rand = prng(seed + i);
    const ckpt = randomCheckpoint(seed + i);
    const foreign = foreignMetadata(rand);
    const metadata: Metadata = { ...ckpt.metadata, step: rand() < 0.3 ? 0 : ckpt.metadata.step };
    if (Object.keys(foreign).length > 0) metadata.custom = { "safetensors.__metadata__": foreign, n: i };
    const bytes = await collect(encodeCheckpoint({ metadata, tensors: ckpt.tensors }, { codec: safetensorsCodec }));
    out.push({ name: `ckpt-written #${i} (seed ${seed + i})`, bytes });
  }
  return out;
}

const NUMBERS = ["-0", "-1", "1.0", "1e0", "0", "18446744073709551616", "9007199254740993", "00", "2", "-0.0"];
const STRINGS = ["\\ud800", "\\udc00", "\\ud83d\\ude00", "\\u0000", "", "__proto__", "F8_E4M3FNUZ", "BOOL", "x"];
const SPACES = [" ", "\t", "\n", "\r", "\v", "\f", "\u00a0"];
const TOKENS = ["{", "}", "[", "]", ",", ":", '"', "-", "0", "null", '"__metadata__":null,', ',"z":1'];

/** One seeded mutation of a valid file: its header text, its length field, its data or a bit. */
function mutate(bytes: Uint8Array, rand: () => number): { bytes: Uint8Array; how: string } {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  let header = dec.decode(bytes.subarray(8, 8 + n));
  let data = bytes.subarray(8 + n);
  const kind = Math.floor(rand() * 10);
  let how = "";
  const replaceMatch = (re: RegExp, by: string) => {
    const all = [...header.matchAll(re)];
    if (all.length === 0) return;
    const m = pick(all);
    header = header.slice(0, m.index) + by + header.slice(m.index! + m[0].length);
    how = `${m[0]} -> ${by}`;
  };
  switch (kind) {
    case 0:
      replaceMatch(/-?\d+/g, pick(NUMBERS));
      break;
    case 1:
      replaceMatch(/"(?:[^"\\]|\\.)*"/g, `"${pick(STRINGS)}"`);
      break;
    case 2: {
      const at = rand() < 0.5 ? 0 : Math.floor(rand() * header.length);
      const s = pick(SPACES);
      header = header.slice(0, at) + s + header.slice(at);
      how = `${JSON.stringify(s)} at ${at}`;
      break;
    }
    case 3:
      replaceMatch(/"dtype":"[A-Z0-9_]+"/g, `"dtype":"${pick([...ALL_DTYPES, "F4", "F6_E2M3", "I4", "f32"])}"`);
      break;
    case 4: {
      const at = Math.floor(rand() * (header.length + 1));
      const t = pick(TOKENS);
      header = header.slice(0, at) + t + header.slice(at);
      how = `insert ${t} at ${at}`;
      break;
    }
    case 5: {
      const at = Math.floor(rand() * header.length);
      how = `delete ${JSON.stringify(header[at])} at ${at}`;
      header = header.slice(0, at) + header.slice(at + 1);
      break;
    }
    case 6: // a duplicated entry
      replaceMatch(/"[^"]*":\{"dtype"[^}]*\}/g, "DUP");
      if (how) {
        const entry = how.slice(0, how.lastIndexOf(" -> "));
        header = header.replace("DUP", `${entry},${entry}`);
        how = `duplicated ${entry}`;
      }
      break;
    case 7: {
      const extra = Math.floor(rand() * 3) - 1;
      data = extra < 0
        ? data.subarray(0, Math.max(0, data.length - 1))
        : new Uint8Array([...data, ...Array(extra).fill(0)]);
      how = `data ${extra < 0 ? "one byte short" : `${extra} bytes longer`}`;
      break;
    }
    case 8: {
      const at = Math.floor(rand() * bytes.length);
      const copy = bytes.slice();
      copy[at]! ^= 1 << Math.floor(rand() * 8);
      return { bytes: copy, how: `bit flipped at byte ${at}` };
    }
    default:
      if (data.length > 0) {
        data = data.slice();
        data[Math.floor(rand() * data.length)] = pick([2, 255, 0, 1]);
        how = "a data byte set";
      }
  }
  const h = utf8.encode(header);
  const wrongN = rand() < 0.05 ? Math.floor(rand() * 5) - 2 : 0;
  if (wrongN !== 0) how += `, length field ${wrongN > 0 ? "+" : ""}${wrongN}`;
  const out = new Uint8Array(8 + h.byteLength + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(Math.max(0, h.byteLength + wrongN)), true);
  out.set(h, 8);
  out.set(data, 8 + h.byteLength);
  return { bytes: out, how: how || "unchanged" };
}

async function ckptRead(bytes: Uint8Array): Promise<{ ok: true; ckpt: Checkpoint } | { ok: false; error: Error }> {
  const ckpt: Checkpoint = { metadata: { step: 0 }, tensors: [] };
  try {
    for await (const r of ReadableStream.from([bytes]).pipeThrough(safetensorsCodec.decoder())) {
      if (r.type === "metadata") ckpt.metadata = r.metadata;
      else ckpt.tensors.push(r.tensor);
    }
    return { ok: true, ckpt };
  } catch (error) {
    return { ok: false, error: error as Error };
  }
}

function sameAsReference(ckpt: Checkpoint, ref: Extract<RefRead, { ok: true }>): string | undefined {
  const ours = ckpt.tensors.map((t) => ({
    name: t.name,
    dtype: SAFETENSORS_DTYPES[t.dtype],
    shape: [...t.shape],
    sha256: hex(bytesOf(t.data)),
  })).sort((a, b) => a.name < b.name ? -1 : 1);
  const theirs = [...ref.tensors].sort((a, b) => a.name < b.name ? -1 : 1);
  try {
    assert.deepEqual(ours, theirs);
  } catch {
    return `tensors differ: ckpt ${JSON.stringify(ours)}, reference ${JSON.stringify(theirs)}`;
  }
  // The reference's `__metadata__` strings, read as ckpt reads them, must be ckpt's metadata.
  const entries = new Map(Object.entries(ref.metadata ?? {}));
  const names = new Set(ckpt.tensors.map((t) => t.name));
  const { metadata, groups } = metadataFromSafetensors(entries, names, "from the reference");
  try {
    assert.deepEqual(ckpt.metadata, metadata);
    for (const t of ckpt.tensors) assert.equal(t.group, groups.get(t.name) ?? "params");
  } catch {
    return `metadata differs: ckpt ${JSON.stringify(ckpt.metadata)}, reference ${JSON.stringify(ref.metadata)}`;
  }
  return undefined;
}

/**
 * Whether ckpt writes a file it read back byte for byte: not when its `"__metadata__"` is empty
 * (which ckpt's metadata cannot tell from none), nor when a key is an array index such as "1"
 * (a JavaScript object lists those first, so the keys come back in another order).
 */
function keepsBytes(ref: Extract<RefRead, { ok: true }>): boolean {
  if (ref.metadata === null) return true;
  const keys = Object.keys(ref.metadata);
  return keys.length > 0 && !keys.some((k) => /^(0|[1-9]\d{0,9})$/.test(k));
}

function domainError(e: Error): string | undefined {
  if (!(e instanceof SyntaxError || e instanceof RangeError)) return `${e.constructor.name}: ${e.message}`;
  if (!/^Cannot decode (safetensors|checkpoint): .* at offset \d+/s.test(e.message) || e.message.endsWith(".")) {
    return `unclear message: ${e.message}`;
  }
  return undefined;
}

Deno.test({
  name:
    "safetensors files: ckpt and the reference implementation agree, both directions, on its tests and on mutations",
  ignore: missing !== undefined && !inCI,
  async fn() {
    assert.equal(missing, undefined, missing);
    const dir = await Deno.makeTempDir({ prefix: "ckpt-st-ref-" });
    try {
      // The reference writes: random files of every dtype it knows.
      const rand = prng(45);
      const jobs = Array.from({ length: 120 }, (_, i) => referenceJob(rand, `${dir}/ref-${i}.safetensors`));
      const written = await reference(dir, { write: jobs });
      assert.deepEqual(written.written.filter((w) => w !== null), []);
      const fromReference: Case[] = await Promise.all(jobs.map(async (j, i) => ({
        name: `reference-written #${i}`,
        bytes: await Deno.readFile(j.out),
        fromReference: true,
      })));
      const literal = REFERENCE_WRITTEN.map(([name, bytes]) => ({
        name: `reference ${name}`,
        bytes,
        fromReference: true,
      }));
      const valid = [...literal, ...fromReference, ...await ckptFiles(120, 4500)];
      const mutations: Case[] = [];
      for (let i = 0; i < 3000; i++) {
        const base = valid[Math.floor(rand() * valid.length)]!;
        const { bytes, how } = mutate(base.bytes, rand);
        mutations.push({ name: `${base.name}, mutation ${i}: ${how}`, bytes });
      }
      const cases: Case[] = [...referenceSuite(), ...valid, ...mutations];
      const paths = await Promise.all(cases.map(async (c, i) => {
        const path = `${dir}/case-${i}.safetensors`;
        await Deno.writeFile(path, c.bytes);
        return path;
      }));
      const read = await reference(dir, { read: paths });

      const failures: string[] = [];
      const stricter = new Map<string, number>();
      const tally = { bothAccept: 0, bothRefuse: 0 };
      const writtenBack: { case: Case; ckpt: Checkpoint; path: string }[] = [];
      for (const [i, c] of cases.entries()) {
        const ref = read.read[i]!;
        const ours = await ckptRead(c.bytes);
        if (ref.ok && ours.ok) {
          tally.bothAccept++;
          const diff = sameAsReference(ours.ckpt, ref);
          if (diff) failures.push(`${c.name}: ${diff}`);
          if (!safetensorsCodec.detect(c.bytes)) {
            failures.push(`${c.name}: both read it, but detect() does not claim it`);
          }
          const again = await collect(encodeCheckpoint(ours.ckpt, { codec: safetensorsCodec }));
          if (c.fromReference && keepsBytes(ref) && hex(again) !== hex(c.bytes)) {
            failures.push(`${c.name}: written back differently:\n  ${dec.decode(c.bytes)}\n  ${dec.decode(again)}`);
          }
          const path = `${dir}/back-${i}.safetensors`;
          await Deno.writeFile(path, again);
          writtenBack.push({ case: c, ckpt: ours.ckpt, path });
        } else if (!ref.ok && !ours.ok) {
          tally.bothRefuse++;
          const bad = domainError(ours.error);
          if (bad) failures.push(`${c.name}: both refuse, but ckpt's error is ${bad} (reference: ${ref.error})`);
        } else if (ref.ok && !ours.ok) {
          const rule = STRICTER.find(([, re]) => re.test(ours.error.message));
          if (rule) stricter.set(rule[0], (stricter.get(rule[0]) ?? 0) + 1);
          else failures.push(`${c.name}: the reference reads it, ckpt refuses: ${ours.error.message}`);
        } else {
          failures.push(`${c.name}: ckpt reads it, the reference refuses: ${!ref.ok && ref.error}`);
        }
      }
      // What ckpt wrote back from every file both read, the reference reads as the same again.
      const back = await reference(dir, { read: writtenBack.map((w) => w.path) });
      for (const [i, w] of writtenBack.entries()) {
        const ref = back.read[i]!;
        if (!ref.ok) failures.push(`${w.case.name}: ckpt's write-back is refused by the reference: ${ref.error}`);
        else {
          // custom is JSON, written with JSON.stringify: a -0 in it (a mutation made one) comes back as 0.
          const custom = w.ckpt.metadata.custom;
          const metadata = custom === undefined
            ? w.ckpt.metadata
            : { ...w.ckpt.metadata, custom: JSON.parse(JSON.stringify(custom)) };
          const diff = sameAsReference({ ...w.ckpt, metadata }, ref);
          if (diff) failures.push(`${w.case.name}: ckpt's write-back reads differently: ${diff}`);
        }
      }
      console.log(
        `safetensors ${read.version}: ${cases.length} files, ${tally.bothAccept} read by both, ${tally.bothRefuse} refused by both, ` +
          `refused by ckpt alone under its stricter rules: ${JSON.stringify(Object.fromEntries(stricter))}`,
      );
      assert.deepEqual(failures.slice(0, 20), [], `${failures.length} disagreements`);
      // The generator reaches both outcomes in earnest, and the reference's own cases are all here.
      assert.ok(tally.bothAccept > 500 && tally.bothRefuse > 1000, JSON.stringify(tally));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
