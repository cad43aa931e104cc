/**
 * The native backend (`tensorflow`, tfjs-node) side by side, in one run, on the same model: a
 * tfjs-layers MLP of `--mib` MiB of float32 weights (`--layers` dense layers, 4 by default, as wide as
 * that needs, or `--width`) with Adam
 * (so its state is 3x that), trained on the native backend. Rows, with ratios:
 *
 * 1. Training-loop stall per checkpoint (extra wall time of `--steps` training steps that start
 *    with the checkpoint, over the same steps without one in the same round; interleaved rounds, medians):
 *    - `copy`: `dataSync()` of every weight and Adam slot (the bytes any checkpoint copies out);
 *    - `writer`: `CheckpointWriter.save()` not awaited (snapshot, then encode, SHA-256, fsync and
 *      commit in a worker): target ≤ 1.2x `copy`;
 *    - `tfjs-file`: `await model.save("file://…", { includeOptimizer: true })` (tfjs-node's file
 *      handler): target `writer` ≤ 0.2x this;
 *    - `writer-normal`: the same save from a writer with `priority: "normal"` (its worker at the
 *      loop's priority, as before the default became `"background"`), for comparison. Under the
 *      two writers, how long after `save()` their file was written (a lower priority trades the
 *      save's latency for the loop's time).
 * 2. Durable save, whole: `await writer.save()` against `model.save("file://…")` (which neither
 *    hashes nor fsyncs) and TensorFlow's `tf.train.Checkpoint.write` in Python from the same
 *    wheel on the same shapes: targets ckpt ≥ 1.0x both (a ratio is the peer's time over ckpt's).
 *    Under it, ckpt's save in its two parts, each timed alone: `snapshot` (the copy out of TF) and
 *    the write of that snapshot by a `BackgroundWriter`, which the whole save overlaps (each tensor
 *    goes to the worker as it is copied out, 16 MiB at a time), so the whole can come under their sum.
 * 3. Load: `loadCheckpoint` (SHA-256 verified) + `restore` into the model and Adam against
 *    `tfl.loadLayersModel("file://…/model.json")` and `tf.train.Checkpoint.read`: targets ≥ 1.0x.
 *
 * 4. Under each, the physical limit (bench/_bounds.ts): for the stall, the copy out of TF (row
 *    `copy`); for the durable save, the larger of that copy, the raw durable write of the same
 *    bytes (a new file, fdatasync, rename) and SHA-256 over them on the usable cores; for the load,
 *    the larger of the raw read into fresh memory and the hash.
 *
 * Python: `--python PATH`, or `CKPT_PEERS_PYTHON`, or the peers' environment that
 * `scripts/peers_venv.sh` builds from the local wheels (`bench/_peers_env.ts`); without one, or
 * with a python that cannot import tensorflow, the Python rows are left out and the reason
 * printed. Timings belong to a quiet machine; on a
 * loaded one run it only to check that it works (`--mib 2 --rounds 1`).
 *
 * Run (the lead's quiet run): `deno run -A --no-lock bench/native_compare.ts --mib 18` and
 * `--mib 256`. Needs `deno task setup:native` first.
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs-core";
import * as tfl from "@tensorflow/tfjs-layers";
import "@tensorflow/tfjs-backend-cpu";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { loadTfjsNode } from "../src/tfjs/_tfjs_node.ts";
import { CheckpointWriter, restore, snapshot, StagingPool } from "../src/tfjs/mod.ts";
import { BackgroundWriter, loadCheckpoint } from "../mod.ts";
import { peersPython } from "./_peers_env.ts";
import { bound, hashPart, limitLine, loadAverage } from "./_bounds.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mib: { type: "string", default: "18" },
    layers: { type: "string", default: "4" },
    width: { type: "string" },
    steps: { type: "string", default: "4" },
    rounds: { type: "string", default: "5" },
    python: { type: "string" },
  },
});
const MIB = Number(values.mib);
const LAYERS = Number(values.layers);
// --layers dense layers of WIDTH x WIDTH (+ bias), WIDTH chosen so the weights come to --mib.
const WIDTH = values.width === undefined ? Math.round(Math.sqrt((MIB * 2 ** 20) / 4 / LAYERS)) : Number(values.width);
const STEPS = Number(values.steps);
const ROUNDS = Number(values.rounds);
for (
  const [k, v] of [["mib", MIB], ["layers", LAYERS], ["width", WIDTH], ["steps", STEPS], ["rounds", ROUNDS]] as const
) {
  if (!(v > 0) || !Number.isFinite(v)) throw new RangeError(`--${k} must be a positive number`);
}

await loadTfjsNode();
tf.env().set("PROD", true);

const layers = LAYERS;
const model = tfl.sequential({
  layers: Array.from({ length: layers }, (_, i) =>
    tfl.layers.dense({
      name: `fc${i}`,
      units: WIDTH,
      activation: i < layers - 1 ? "relu" : "linear",
      kernelInitializer: tfl.initializers.glorotUniform({ seed: i }),
      ...(i === 0 ? { inputShape: [WIDTH] } : {}),
    })),
});
const optimizer = tf.train.adam(1e-4);
model.compile({ optimizer, loss: "meanSquaredError" });
const x = tf.randomNormal([8, WIDTH], 0, 1, "float32", 1);
const y = tf.randomNormal([8, WIDTH], 0, 1, "float32", 2);
await model.trainOnBatch(x, y);
const weightBytes = model.weights.reduce((n, w) => n + (w.shape as number[]).reduce((a, b) => a * b, 1) * 4, 0);
const stateBytes = weightBytes * 3;

const dir = await Deno.makeTempDir({ prefix: "ckpt_native_compare_" });
// Both writers keep their worker between rounds (`idleTimeout: Infinity`, as a loop that keeps
// its writer): a round with five modes takes over a second, longer than the default idle time, so
// each save would otherwise start a fresh worker whose start-up ran beside the next rounds' steps.
const writer = new CheckpointWriter({ idleTimeout: Infinity });
const normalWriter = new CheckpointWriter({ priority: "normal", idleTimeout: Infinity });
let step = 1;
let saves = 0;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const ms = (n: number) => `${n.toFixed(1)} ms`;

type StallMode = "none" | "copy" | "writer" | "tfjs-file" | "writer-normal";
const STALL_MODES: StallMode[] = ["none", "copy", "writer", "tfjs-file", "writer-normal"];
/** For the two writers: milliseconds from `save()` to its file written. */
const saveLatency = new Map<StallMode, number[]>([["writer", []], ["writer-normal", []]]);

/**
 * CPU time so far, in ms, of this process's threads (Linux, from /proc/self/task/<tid>/schedstat):
 * the main thread, the others at normal priority (TensorFlow's, a `"normal"` writer's), and those
 * lowered (a `"background"` writer's worker and its pool); undefined where /proc cannot be read.
 */
function threadCpu(): [main: number, normal: number, lowered: number] | undefined {
  try {
    const cpu: [number, number, number] = [0, 0, 0];
    for (const { name: tid } of Deno.readDirSync("/proc/self/task")) {
      try {
        const stat = Deno.readTextFileSync(`/proc/self/task/${tid}/stat`);
        const nice = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
        const ns = Number(Deno.readTextFileSync(`/proc/self/task/${tid}/schedstat`).split(" ")[0]);
        cpu[Number(tid) === Deno.pid ? 0 : nice > 0 ? 2 : 1] += ns / 1e6;
      } catch {
        // the thread ended meanwhile
      }
    }
    return cpu;
  } catch {
    return undefined;
  }
}
/** Per stall mode and round: the CPU of {@linkcode threadCpu} spent during the timed steps. */
const stallCpu = new Map<StallMode, [number, number, number][]>(STALL_MODES.map((m) => [m, []]));

async function stallLoop(mode: StallMode): Promise<number> {
  const cpu0 = threadCpu();
  const t0 = performance.now();
  let saving: Promise<unknown> | undefined;
  if (mode === "copy") {
    for (const w of model.weights) w.read().dataSync();
    for (const w of await optimizer.getWeights()) w.tensor.dataSync();
  } else if (mode === "writer" || mode === "writer-normal") {
    const by = mode === "writer" ? writer : normalWriter;
    saving = by.save(`${dir}/stall-${saves++}.ckpt`, { model, optimizer, step })
      .then(() => saveLatency.get(mode)!.push(performance.now() - t0));
  } else if (mode === "tfjs-file") await model.save(`file://${dir}/stall-tfjs`, { includeOptimizer: true });
  for (let k = 0; k < STEPS; k++) {
    step++;
    await model.trainOnBatch(x, y);
    await new Promise((r) => setTimeout(r, 0));
  }
  const wall = performance.now() - t0;
  const cpu1 = threadCpu();
  if (cpu0 && cpu1) stallCpu.get(mode)!.push([0, 1, 2].map((i) => cpu1[i]! - cpu0[i]!) as [number, number, number]);
  await saving; // outside the timing: the next loop starts with the worker idle
  return wall;
}

const stall = new Map<StallMode, number[]>(STALL_MODES.map((m) => [m, []]));
await stallLoop("writer");
await stallLoop("writer-normal");
for (const times of [...saveLatency.values(), ...stallCpu.values()]) times.length = 0; // the warm-up saves
for (let r = 0; r < ROUNDS; r++) for (const m of STALL_MODES) stall.get(m)!.push(await stallLoop(m));

// Durable saves and loads, alternating, each to a fresh name.
const ckptSave: number[] = [];
const tfjsSave: number[] = [];
const ckptLoad: number[] = [];
const tfjsLoad: number[] = [];
const rawWrite: number[] = [];
const rawRead: number[] = [];
// ckpt's durable save in its two parts, each timed alone: the snapshot (the copy out of TF) and
// the write of that snapshot by a background worker (encode, SHA-256, write, fdatasync, rename,
// the directory's fsync), which the whole save overlaps: the worker writes the first tensors while
// the later ones are still being copied out of TF.
const snapPart: number[] = [];
const writePart: number[] = [];
const partsWriter = new BackgroundWriter({ idleTimeout: Infinity });
const partsStaging = new StagingPool();
const rawBytes = new Uint8Array(stateBytes).map((_, i) => i);
for (let r = 0; r < ROUNDS; r++) {
  // The raw durable write and read of as many bytes: the limit rows.
  const raw = `${dir}/raw-${r}.bin`;
  let t1 = performance.now();
  const f = await Deno.open(`${raw}.tmp`, { write: true, createNew: true });
  for (let at = 0; at < rawBytes.length;) at += await f.write(rawBytes.subarray(at));
  await f.syncData();
  f.close();
  await Deno.rename(`${raw}.tmp`, raw);
  rawWrite.push(performance.now() - t1);
  t1 = performance.now();
  await Deno.readFile(raw);
  rawRead.push(performance.now() - t1);
  await Deno.remove(raw);

  let t0 = performance.now();
  const path = `${dir}/save-${r}.ckpt`;
  await writer.save(path, { model, optimizer, step });
  ckptSave.push(performance.now() - t0);
  t0 = performance.now();
  await model.save(`file://${dir}/tfjs-${r}`, { includeOptimizer: true });
  tfjsSave.push(performance.now() - t0);
  t0 = performance.now();
  await restore(await loadCheckpoint(path), { model, optimizer });
  ckptLoad.push(performance.now() - t0);
  t0 = performance.now();
  const loaded = await tfl.loadLayersModel(`file://${dir}/tfjs-${r}/model.json`);
  tfjsLoad.push(performance.now() - t0);
  loaded.dispose();
  await Deno.remove(`${dir}/tfjs-${r}`, { recursive: true });
  await Deno.remove(path);
}
await writer.close();
await normalWriter.close();
// The parts after the rounds, not among them: a round then takes as long as before, and the
// writer's worker (kept 1 s once idle) is not restarted between its saves by the extra time.
for (let r = 0; r < ROUNDS; r++) {
  let t0 = performance.now();
  const snap = await snapshot({ model, optimizer, step, staging: partsStaging });
  snapPart.push(performance.now() - t0);
  t0 = performance.now();
  await partsWriter.save(`${dir}/parts-${r}.ckpt`, snap);
  writePart.push(performance.now() - t0);
  await Deno.remove(`${dir}/parts-${r}.ckpt`);
}
await partsWriter.close();

// Python: tf.train.Checkpoint on the same shapes.
async function findPython(): Promise<{ python?: string; why?: string }> {
  const given = values.python ?? Deno.env.get("CKPT_PEERS_PYTHON");
  if (given) return { python: given };
  const env = await peersPython();
  return "python" in env ? { python: env.python } : { why: env.error };
}
let py: { tensorflow: string; write: number[]; read: number[] } | undefined;
const { python, why } = await findPython();
let pyWhy = why;
if (python) {
  const shapes = model.weights.map((w) => w.shape);
  const o = await new Deno.Command(python, {
    args: [fileURLToPath(new URL("./_tf_checkpoint.py", import.meta.url)), dir, String(ROUNDS), JSON.stringify(shapes)],
    stdout: "piped",
    stderr: "piped",
  }).output().catch((e) => ({ success: false, stdout: new Uint8Array(), stderr: new TextEncoder().encode(String(e)) }));
  const out = new TextDecoder().decode(o.stdout).trim();
  if (o.success) py = JSON.parse(out.split("\n").at(-1)!);
  else pyWhy = `${python} failed: ${new TextDecoder().decode(o.stderr).trim().split("\n").slice(-3).join(" ")}`;
}
await Deno.remove(dir, { recursive: true });

const binding = (tf.backend() as unknown as { binding: { TF_Version: string } }).binding.TF_Version;
console.log(
  `native backend (tfjs-node 4.22.0 on TensorFlow ${binding}), ${layers} dense layers of ${WIDTH}: ` +
    `${(weightBytes / 2 ** 20).toFixed(1)} MiB of weights, ${(stateBytes / 2 ** 20).toFixed(1)} MiB with Adam; ` +
    `${ROUNDS} rounds, medians`,
);
const none = median(stall.get("none")!);
// Each mode against the no-checkpoint loop of the same round (paired), then the median: a drift
// in the machine's speed between rounds then cancels instead of landing in one mode's median.
const extra = (m: StallMode) => median(stall.get(m)!.map((t, r) => t - stall.get("none")![r]!));
console.log(`training-loop stall per checkpoint (${STEPS} steps of ${ms(none / STEPS)} each after it):`);
for (const m of ["copy", "writer", "tfjs-file"] as const) console.log(`  ${m.padEnd(10)} ${ms(extra(m))}`);
console.log(`  writer / copy      ${(extra("writer") / extra("copy")).toFixed(2)}x (target <= 1.2)`);
console.log(`  writer / tfjs-file ${(extra("writer") / extra("tfjs-file")).toFixed(2)}x (target <= 0.2)`);
console.log(
  `  for comparison, priority "normal": ${ms(extra("writer-normal"))}, ` +
    `${(extra("writer-normal") / extra("copy")).toFixed(2)}x the copy; file written after ` +
    `${ms(median(saveLatency.get("writer")!))} (background) and ${
      ms(median(saveLatency.get("writer-normal")!))
    } (normal)`,
);
if (stallCpu.get("none")!.length > 0) {
  // CPU time is less disturbed by other processes than wall time: it shows what the main thread
  // itself pays for a checkpoint (the copy, batching, postMessage) and how much of the save ran
  // beside the steps, at which priority.
  const cpuOf = (m: StallMode, i: number) => median(stallCpu.get(m)!.map((c) => c[i]!));
  const above = (m: StallMode) => [0, 1, 2].map((i) => ms(cpuOf(m, i) - cpuOf("none", i))).join(" / ");
  console.log("  CPU during those steps above none (main thread / other threads at normal priority / lowered):");
  for (const m of ["copy", "writer", "writer-normal"] as const) console.log(`    ${m.padEnd(13)} ${above(m)}`);
}
const row = (name: string, ours: number[], peer: number[] | undefined, peerName: string) =>
  console.log(
    `  ${name.padEnd(34)} ckpt ${ms(median(ours))}  ${peerName} ${peer ? ms(median(peer)) : "-"}  ` +
      (peer ? `${(median(peer) / median(ours)).toFixed(2)}x (target >= 1.0)` : ""),
  );
console.log("durable save, whole (peer time / ckpt time):");
row("vs model.save(file://)", ckptSave, tfjsSave, "tfjs-node");
row("vs tf.train.Checkpoint.write", ckptSave, py?.write.map((s) => s * 1000), "python");
console.log(
  `  ckpt's save in parts, each alone: snapshot (copy out of TF) ${ms(median(snapPart))}, then its write in a ` +
    `worker (encode, SHA-256, direct write, fdatasync, rename, directory fsync) ${ms(median(writePart))}; ` +
    `sum ${ms(median(snapPart) + median(writePart))} against the whole ${ms(median(ckptSave))}, which overlaps them` +
    (median(ckptSave) > 1.5 * (median(snapPart) + median(writePart))
      ? " (the whole far above the sum: rounds over 1 s apart, so the writer's worker, kept 1 s once idle by " +
        "default, started afresh for each save; a writer with `idleTimeout: Infinity` keeps it)"
      : ""),
);
console.log("load + verify + restore (peer time / ckpt time):");
row("vs tfl.loadLayersModel(file://)", ckptLoad, tfjsLoad, "tfjs-node");
row("vs tf.train.Checkpoint.read", ckptLoad, py?.read.map((s) => s * 1000), "python");
const hash = hashPart(stateBytes);
const copySeconds = extra("copy") / 1000;
console.log(`physical limits (load average ${loadAverage()}):`);
console.log(
  limitLine(
    "the stall",
    bound([{ name: "copy out of TF", seconds: copySeconds }]),
    extra("writer") / 1000,
    "≤ 1.2× the copy",
  ),
);
console.log(limitLine(
  "the durable save",
  bound([
    { name: "copy out of TF", seconds: copySeconds },
    { name: "raw write + fdatasync + rename", seconds: median(rawWrite) / 1000 },
    hash,
  ]),
  median(ckptSave) / 1000,
  "≥ 1.0× model.save(file://)",
));
console.log(limitLine(
  "load + verify (+ restore)",
  bound([{ name: "raw read into fresh memory", seconds: median(rawRead) / 1000 }, hash]),
  median(ckptLoad) / 1000,
  "≥ 1.0× tf.loadLayersModel",
));
if (py) console.log(`python: TensorFlow ${py.tensorflow} (tf.train.Checkpoint, the same shapes with m and v)`);
else console.log(`python rows left out: ${pyWhy}`);
