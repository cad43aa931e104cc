/**
 * Side-by-side: byte-grouped compression (`compression: "bytegroup"`) against gzip and no
 * compression, on real trained weights and Adam state (the train demo's newest checkpoint) and on
 * float32 / float16 / bfloat16 N(0, 0.02); then the JSON codec's float32 save against the float64
 * expansion it used to print. Each row is one method on one data set, trials interleaved in one
 * process, medians printed with ratios against the peers of the same run.
 *
 *   deno task train --hidden 1024 --optimizer adam --lr 0.005 --steps 200 --dir runs/adam1024   # the weights
 *   deno task bench:codec [--weights runs/adam1024] [--size 32] [--trials 5] [--json-size 16] [--json]
 *
 * Without `--weights`, a missing runs/adam1024 is trained first with the command above (a few
 * minutes, once). With `--json`, the progress goes to stderr and stdout gets one JSON document (`rows`,
 * `jsonLines`, `targets`), for a script that runs this one as a subprocess, such as bench:compare.
 *
 * The task grants FFI, as bench:compare's `-A` does: loads then hash on a native thread (libcrypto)
 * where the system has OpenSSL 3; the header line says which. Add `--deny-ffi` for one thread.
 *
 * Throughput is tensor bytes (uncompressed) per second, so rows compare directly; ratio is file
 * bytes over uncompressed file bytes. Saves go to a file (atomic, fsync), loads verify every digest.
 * A second table times `verifyCheckpoint` of the uncompressed and byte-grouped files, by default
 * and on one thread (`parallelHash: false`).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { createHash } from "node:crypto";
import {
  type CheckpointInput,
  CheckpointManager,
  type Compression,
  encodeCheckpoint,
  loadCheckpoint,
  saveCheckpoint,
  type TensorInput,
  verifyCheckpoint,
} from "../mod.ts";
import { hasNativeDigest } from "../src/format/_hash.ts";

const DEFAULT_WEIGHTS = "runs/adam1024";
const { values } = parseArgs({
  options: {
    weights: { type: "string", default: DEFAULT_WEIGHTS },
    size: { type: "string", default: "32" },
    trials: { type: "string", default: "5" },
    "json-size": { type: "string", default: "16" },
    dir: { type: "string" },
    json: { type: "boolean", default: false },
  },
});
// With --json, everything human-readable goes to stderr and stdout is left for the document.
const say = values.json ? console.error : console.log;
const MiB = 2 ** 20;
const size = Number(values.size) * MiB;
const trials = Number(values.trials);
const jsonSize = Number(values["json-size"]) * MiB;
const dir = values.dir ?? await Deno.makeTempDir({ prefix: "ckpt-codec-bench-" });
await Deno.mkdir(dir, { recursive: true });

/** The 1, 5 and 15 minute load averages, when the runtime may read them. */
function loadavg(): string {
  try {
    return Deno.loadavg().map((x) => x.toFixed(2)).join(" ");
  } catch {
    return "unknown";
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mbps = (bytes: number, s: number) => bytes / 1e6 / s;

/** A seeded N(0, sigma) float32 array. */
function gaussian(n: number, seed: number, sigma = 0.02): Float32Array {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(rand() || 1e-12)) * sigma;
    const t = 2 * Math.PI * rand();
    out[i] = r * Math.cos(t);
    if (i + 1 < n) out[i + 1] = r * Math.sin(t);
  }
  return out;
}

/** float32 to float16 bits, rounded to nearest even (normal range; tiny values flush to ±0). */
function toF16(x: Float32Array): Uint16Array {
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  // A loop, not Uint16Array.from(bits, fn), which builds a JS array as long as the input first.
  const out = new Uint16Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i]!;
    const sign = (b >>> 16) & 0x8000;
    const e = ((b >>> 23) & 0xff) - 127 + 15;
    if (e <= 0) out[i] = sign;
    else if (e >= 31) out[i] = sign | 0x7c00;
    else {
      const m = b & 0x7fffff;
      let h = (e << 10) | (m >>> 13);
      const rest = m & 0x1fff;
      if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++;
      out[i] = sign | h;
    }
  }
  return out;
}

/** float32 to bfloat16 bits, rounded to nearest even. */
function toBf16(x: Float32Array): Uint16Array {
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const out = new Uint16Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = (bits[i]! + 0x7fff + ((bits[i]! >>> 16) & 1)) >>> 16;
  return out;
}

/** Splits `data` into tensors of at most 4 MiB elements, as layers would be. */
function layers(prefix: string, dtype: TensorInput["dtype"], data: Float32Array | Uint16Array): TensorInput[] {
  const per = 1 << 20;
  const out: TensorInput[] = [];
  for (let i = 0; i < data.length; i += per) {
    const part = data.subarray(i, Math.min(data.length, i + per));
    out.push({ name: `${prefix}/${i / per}`, dtype, shape: [part.length], data: part });
  }
  return out;
}

interface DataSet {
  name: string;
  tensors: TensorInput[];
}

const TRAIN_FLAGS = ["--hidden", "1024", "--optimizer", "adam", "--lr", "0.005", "--steps", "200", "--quiet"];

/** Trains the default weights with the train demo when they are missing (the caller's own path is left alone). */
async function ensureTrained(path: string): Promise<void> {
  if (path !== DEFAULT_WEIGHTS) return;
  try {
    await Deno.stat(path);
    return;
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  say(
    `(no trained weights at ${path}: training them first, once: deno task train ${
      TRAIN_FLAGS.join(" ")
    } --dir ${path})`,
  );
  const train = new URL("../demo/train.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--allow-write", "--allow-env", train, ...TRAIN_FLAGS, "--dir", path],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) say(`(training failed: ${new TextDecoder().decode(out.stderr).trim().split("\n").at(-1)})`);
}

async function trainedSets(path: string): Promise<DataSet[]> {
  await ensureTrained(path);
  let ckpt;
  try {
    const info = await Deno.stat(path);
    if (info.isDirectory) {
      const manager = await CheckpointManager.open(path, { onWarning: () => {} });
      ckpt = await manager.latest();
      await manager.close();
    } else ckpt = await loadCheckpoint(path);
  } catch (e) {
    say(`(no trained weights at ${path}: ${(e as Error).message}; run the train demo first, see --help)`);
    return [];
  }
  if (!ckpt) return [];
  const float = (t: TensorInput) => t.dtype === "float32";
  const params = ckpt.tensors.filter((t) => t.group === "params" && float(t));
  const optimizer = ckpt.tensors.filter((t) => t.group === "optimizer" && float(t));
  const bytes = (ts: TensorInput[]) => (ts.reduce((n, t) => n + t.data.byteLength, 0) / MiB).toFixed(1);
  say(
    `trained weights: step ${ckpt.metadata.step} of ${path}: params ${bytes(params)} MiB, optimizer ${
      bytes(optimizer)
    } MiB (${optimizer.map((t) => t.name).slice(0, 4).join(", ")}…)`,
  );
  return [
    { name: "trained params (float32)", tensors: params },
    { name: "trained Adam state (float32)", tensors: optimizer },
  ];
}

const base = gaussian(size / 4, 1);
const sets: DataSet[] = [
  ...await trainedSets(values.weights),
  { name: "N(0,0.02) float32", tensors: layers("f32", "float32", base) },
  { name: "N(0,0.02) float16", tensors: layers("f16", "float16", toF16(gaussian(size / 2, 2))) },
  { name: "N(0,0.02) bfloat16", tensors: layers("bf16", "bfloat16", toBf16(gaussian(size / 2, 3))) },
];

const methods: Compression[] = ["none", "gzip", "bytegroup"];
/** Trials per data set run before the counted ones (see the loop). */
const WARMUP = 3;
say(
  `\n${trials} interleaved trials per row after ${WARMUP} not counted (the methods' order rotating from trial to trial), medians; ${
    (size / MiB).toFixed(0)
  } MiB per synthetic set; saves atomic with fsync, loads verify every digest${
    hasNativeDigest()
      ? ", loads hash on a native thread (FFI granted: libcrypto)"
      : ", loads hash on their own thread (no FFI granted, or no libcrypto)"
  }; ${Deno.build.os} ${Deno.build.arch}, ${navigator.hardwareConcurrency} cores, load average ${loadavg()}\n`,
);

const header = ["data set", "method", "ratio", "save MB/s", "load MB/s", "save / gzip", "load / none"];
const rows: string[][] = [];
const records: Record<string, unknown>[] = [];
// verifyCheckpoint, uncompressed and byte-grouped: by default (a second thread for a file of
// 64 MiB or more, decoding byte-grouped tensors there too) and with `parallelHash: false`.
const verifyHeader = ["data set", "method", "verify MB/s", "one thread MB/s", "default / one thread"];
const verifyRows: string[][] = [];
const targets: string[] = [];
for (const set of sets) {
  const raw = set.tensors.reduce((n, t) => n + t.data.byteLength, 0);
  const ckpt: CheckpointInput = { metadata: { step: 1 }, tensors: set.tensors };
  const save: Record<string, number[]> = {};
  const load: Record<string, number[]> = {};
  const rate = (m: string, of: Record<string, number[]>) => mbps(raw, median(of[m]!));
  const bytes: Record<string, number> = {};
  const verify: Record<string, number[]> = {};
  // The first WARMUP trials are not counted: a set's first three byte-grouped saves ran 15.1-29.6
  // ms against 11.2-11.6 once V8 had compiled the encoder fully (the trained parameters), which
  // 9 trials do not outvote; a training loop saving every N steps runs compiled code.
  for (let trial = -WARMUP; trial < trials; trial++) {
    const record = (of: Record<string, number[]>, key: string, t: number) => {
      if (trial >= 0) (of[key] ??= []).push((performance.now() - t) / 1000);
    };
    // Each method goes first, second and third equally often: in a fixed order a byte-grouped save
    // always followed gzip's save and load, and ran 6% slower for it (11.7 against 11.0 ms).
    for (const m of methods.map((_, i) => methods[(i + trial + WARMUP) % methods.length]!)) {
      const path = join(dir, `${m}.ckpt`);
      let t = performance.now();
      const r = await saveCheckpoint(path, ckpt, { compression: m });
      record(save, m, t);
      bytes[m] = r.bytes;
      t = performance.now();
      await loadCheckpoint(path, { sha256: r.digest });
      record(load, m, t);
      if (m === "gzip") continue;
      for (const parallelHash of [undefined, false]) {
        t = performance.now();
        await verifyCheckpoint(path, { parallelHash });
        record(verify, `${m} ${parallelHash ?? "default"}`, t);
      }
    }
  }
  for (const m of ["none", "bytegroup"]) {
    const [two, one] = [rate(`${m} default`, verify), rate(`${m} false`, verify)];
    verifyRows.push([set.name, m, two.toFixed(0), one.toFixed(0), (two / one).toFixed(2) + "×"]);
  }
  for (const m of methods) {
    records.push({
      set: set.name,
      method: m,
      ratio: bytes[m]! / bytes.none!,
      saveMBps: rate(m, save),
      loadMBps: rate(m, load),
      saveVsGzip: rate(m, save) / rate("gzip", save),
      loadVsNone: rate(m, load) / rate("none", load),
    });
    rows.push([
      set.name,
      m,
      (bytes[m]! / bytes.none!).toFixed(3),
      rate(m, save).toFixed(0),
      rate(m, load).toFixed(0),
      (rate(m, save) / rate("gzip", save)).toFixed(1) + "×",
      (rate(m, load) / rate("none", load)).toFixed(2) + "×",
    ]);
  }
  const ratio = bytes.bytegroup! / bytes.none!;
  const saveX = rate("bytegroup", save) / rate("gzip", save);
  const loadX = rate("bytegroup", load) / rate("none", load);
  const ratioTarget = /float32/.test(set.name) && !/Adam/.test(set.name)
    ? 0.86
    : /bfloat16/.test(set.name)
    ? 0.70
    : undefined;
  targets.push(
    `${set.name}: ratio ${ratio.toFixed(3)}${
      ratioTarget ? ` (target ≤ ${ratioTarget}: ${ratio <= ratioTarget ? "met" : "NOT met"})` : ""
    }; save ${saveX.toFixed(1)}× gzip (target ≥ 10×: ${saveX >= 10 ? "met" : "NOT met"}); load ${
      loadX.toFixed(2)
    }× none (target ≥ 0.8×: ${loadX >= 0.8 ? "met" : "NOT met"})`,
  );
}

let jsonLines: Record<string, number> = {};
// JSON Lines, float32: today's shortest float32 digits against the float64 expansion of each
// widened float32 (what the encoder printed before), both with the same per-line hashing.
{
  const data = base.subarray(0, jsonSize / 4);
  const tensors = layers("w", "float32", data);
  const utf8 = new TextEncoder();
  const wide = new Float64Array(4096);
  const expansion = () => {
    const stream = createHash("sha256");
    let n = 0;
    for (const t of tensors) {
      const record = createHash("sha256");
      for (let i = 0; i < t.data.length; i += 4096) {
        const part = (t.data as Float32Array).subarray(i, i + 4096);
        const w = wide.subarray(0, part.length);
        w.set(part);
        const bytes = utf8.encode(`{"data":[${w.join(",")}]}\n`);
        stream.update(bytes);
        record.update(bytes);
        n += bytes.byteLength;
      }
    }
    return n;
  };
  const encode = async () => {
    let n = 0;
    for await (const c of encodeCheckpoint({ metadata: { step: 1 }, tensors }, { codec: "json" })) n += c.byteLength;
    return n;
  };
  const times: Record<string, number[]> = { expansion: [], shortest: [], load: [] };
  const out: Record<string, number> = {};
  const path = join(dir, "w.jsonl");
  for (let trial = 0; trial < trials; trial++) {
    let t = performance.now();
    out.expansion = expansion();
    times.expansion!.push((performance.now() - t) / 1000);
    t = performance.now();
    out.shortest = await encode();
    times.shortest!.push((performance.now() - t) / 1000);
    await saveCheckpoint(path, { metadata: { step: 1 }, tensors }, { codec: "json", sync: false });
    t = performance.now();
    await loadCheckpoint(path);
    times.load!.push((performance.now() - t) / 1000);
  }
  const r = (k: string) => mbps(data.byteLength, median(times[k]!));
  jsonLines = {
    expansionMBps: r("expansion"),
    shortestMBps: r("shortest"),
    loadMBps: r("load"),
    bytesPerValue: out.shortest! / data.length,
  };
  say(`JSON Lines, ${(data.byteLength / MiB).toFixed(0)} MiB of N(0,0.02) float32 (MB/s of tensor bytes):`);
  say(
    `  float64 expansion (the previous encoder's numbers), encode + hash: ${r("expansion").toFixed(1)} MB/s, ${
      (out.expansion! / data.length).toFixed(1)
    } bytes per value`,
  );
  say(
    `  ckpt JSON encode (shortest float32 digits):                       ${r("shortest").toFixed(1)} MB/s, ${
      (out.shortest! / data.length).toFixed(1)
    } bytes per value, ${(r("shortest") / r("expansion")).toFixed(2)}× the expansion`,
  );
  say(`  ckpt JSON load + verify:                                          ${r("load").toFixed(1)} MB/s`);
  targets.push(
    `JSON float32 encode ${r("shortest").toFixed(1)} MB/s (target ≥ 40: ${r("shortest") >= 40 ? "met" : "NOT met"})`,
  );
}

/** A Markdown table. */
function table(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => "| " + cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ") + " |";
  say("\n" + line(header));
  say("| " + widths.map((w) => "-".repeat(w)).join(" | ") + " |");
  for (const r of rows) say(line(r));
}
table(header, rows);
say(
  "\nverifyCheckpoint (every digest checked, no tensor kept), same trials; under 64 MiB a second thread only hashes " +
    "byte-grouped tensors, and only where FFI is granted (a part at a time on the native thread as they decode), so " +
    "for raw files the ratio is the noise of the run:",
);
table(verifyHeader, verifyRows);
say("\nTargets:\n  " + targets.join("\n  "));
if (values.json) console.log(JSON.stringify({ rows: records, jsonLines, targets }));
if (!values.dir) await Deno.remove(dir, { recursive: true });
