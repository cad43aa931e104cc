/**
 * How long a checkpoint stalls the training thread: a tfjs-layers MLP (cpu backend, Adam) trains
 * and checkpoints every N steps, four ways in one run:
 *
 * - `none`: no checkpoints (step time reference);
 * - `copy`: only copy the model and optimizer state out of tfjs into staging arrays — the
 *   bytes every checkpoint must take, and the floor for the stall (baseline);
 * - `inline`: the same copy, then `await saveCheckpoint(...)` on the training thread;
 * - `background`: the same copy, then `BackgroundWriter.save(...)` (not awaited); the staging
 *   arrays come back through `onReturn` and are reused.
 *
 * The stall is the wall time the training thread spends in the checkpoint code, from the first
 * byte copied until training may continue. Prints medians and ratios against `copy`, plus the
 * mean step time per run (the worker shares the CPUs with training, so steps may slow down).
 *
 * Run: `deno task bench:stall` (flags: `--input=512 --hidden=1024 --batch=4 --every=3
 * --checkpoints=6 --gzip --no-sync`).
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs-core";
import * as tfl from "@tensorflow/tfjs-layers";
import "@tensorflow/tfjs-backend-cpu";
import { parseArgs } from "node:util";
import { BackgroundWriter } from "../src/background/writer.ts";
import { saveCheckpoint, type SaveOptions } from "../src/io/save.ts";
import type { TensorInput } from "../src/format/types.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    input: { type: "string", default: "512" },
    hidden: { type: "string", default: "1024" },
    batch: { type: "string", default: "4" },
    every: { type: "string", default: "3" },
    checkpoints: { type: "string", default: "6" },
    gzip: { type: "boolean", default: false },
    "no-sync": { type: "boolean", default: false },
  },
});
const INPUT = Number(flags.input);
const HIDDEN = Number(flags.hidden);
const BATCH = Number(flags.batch);
const EVERY = Number(flags.every);
const CHECKPOINTS = Number(flags.checkpoints);
const SAVE_OPTIONS: SaveOptions = { compression: flags.gzip ? "gzip" : "none", sync: !flags["no-sync"] };

type Mode = "none" | "copy" | "inline" | "background";

/** Staging arrays by tensor name, reused while their length matches; `allocated` counts new ones. */
type Staging = Map<string, Float32Array | Int32Array> & { allocated?: number };

/**
 * Copies every weight and optimizer slot out of tfjs into staging arrays (on the cpu backend
 * `dataSync()` returns the backend's own array, so the copy is what isolates the checkpoint).
 */
async function snapshot(model: tfl.LayersModel, optimizer: tf.Optimizer, staging: Staging): Promise<TensorInput[]> {
  const named = [
    ...model.weights.map((w) => ({ name: w.name, tensor: w.read() as tf.Tensor, own: false })),
    ...(await optimizer.getWeights()).map((w) => ({
      name: `optimizer/${w.name}`,
      tensor: w.tensor,
      own: !(w.tensor instanceof tf.Variable),
    })),
  ];
  const out: TensorInput[] = [];
  for (const { name, tensor, own } of named) {
    const src = tensor.dataSync() as Float32Array | Int32Array;
    let dst = staging.get(name);
    if (!dst || dst.length !== src.length || dst.constructor !== src.constructor || dst.length === 0) {
      dst = src instanceof Int32Array ? new Int32Array(src.length) : new Float32Array(src.length);
      staging.allocated = (staging.allocated ?? 0) + dst.byteLength;
    }
    dst.set(src);
    staging.delete(name);
    out.push({
      name,
      dtype: src instanceof Int32Array ? "int32" : "float32",
      shape: tensor.shape,
      data: dst,
      group: name.startsWith("optimizer/") ? "optimizer" : "params",
    });
    if (own) tensor.dispose();
  }
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

interface RunResult {
  stalls: number[];
  /** The part of each stall spent copying out of tfjs. */
  copies: number[];
  stepMs: number;
  bytes: number;
  /** Staging bytes allocated over the run (the first checkpoint allocates once; reuse keeps it there). */
  allocated: number;
}

async function run(mode: Mode, dir: string): Promise<RunResult> {
  const model = tfl.sequential({
    layers: [
      tfl.layers.dense({ inputShape: [INPUT], units: HIDDEN, activation: "relu" }),
      tfl.layers.dense({ units: HIDDEN, activation: "relu" }),
      tfl.layers.dense({ units: 10 }),
    ],
  });
  const optimizer = tf.train.adam(1e-3);
  model.compile({ optimizer, loss: "meanSquaredError" });
  const x = tf.randomNormal([BATCH, INPUT]);
  const y = tf.randomNormal([BATCH, 10]);
  await model.trainOnBatch(x, y); // creates the optimizer slots; not timed

  const staging: Staging = new Map();
  const writer = mode === "background"
    ? new BackgroundWriter({
      idleTimeout: Infinity,
      onReturn: (tensors) => {
        for (const t of tensors) staging.set(t.name, t.data as Float32Array | Int32Array);
      },
    })
    : undefined;
  const stalls: number[] = [];
  const copies: number[] = [];
  let stepTime = 0;
  let bytes = 0;
  for (let c = 0; c < CHECKPOINTS; c++) {
    for (let s = 0; s < EVERY; s++) {
      const t0 = performance.now();
      await model.trainOnBatch(x, y);
      // Let the event loop run once per step, as tfjs's own fit() does: trainOnBatch on the cpu
      // backend never yields, and returned staging buffers arrive as messages.
      await new Promise((r) => setTimeout(r, 0));
      stepTime += performance.now() - t0;
    }
    if (mode === "none") continue;
    const path = `${dir}/${mode}-${c}.ckpt`;
    const t0 = performance.now();
    const tensors = await snapshot(model, optimizer, staging);
    copies.push(performance.now() - t0);
    const checkpoint = { metadata: { step: (c + 1) * EVERY }, tensors };
    if (mode === "inline") await saveCheckpoint(path, checkpoint, SAVE_OPTIONS);
    else if (mode === "background") writer!.save(path, checkpoint, SAVE_OPTIONS);
    stalls.push(performance.now() - t0);
    if (mode !== "background") { for (const t of tensors) staging.set(t.name, t.data as Float32Array | Int32Array); }
    bytes = tensors.reduce((n, t) => n + t.data.byteLength, 0);
  }
  await writer?.close(); // the last save finishes here, after the loop
  tf.dispose([x, y]);
  model.dispose();
  optimizer.dispose();
  return { stalls, copies, stepMs: stepTime / (CHECKPOINTS * EVERY), bytes, allocated: staging.allocated ?? 0 };
}

await tf.setBackend("cpu");
const dir = await Deno.makeTempDir({ prefix: "ckpt-stall-" });
try {
  const results = new Map<Mode, RunResult>();
  for (const mode of ["none", "copy", "inline", "background"] as const) results.set(mode, await run(mode, dir));
  const state = results.get("copy")!.bytes;
  console.log(
    `tfjs ${tf.version_core} (${tf.getBackend()} backend), MLP ${INPUT}-${HIDDEN}-${HIDDEN}-10 with Adam, batch ${BATCH}: ` +
      `${(state / 2 ** 20).toFixed(1)} MiB of state per checkpoint (weights + optimizer slots), ` +
      `a checkpoint every ${EVERY} steps, ${CHECKPOINTS} checkpoints per run, ` +
      `compression ${SAVE_OPTIONS.compression}, sync ${SAVE_OPTIONS.sync}`,
  );
  const copy = median(results.get("copy")!.stalls);
  console.log("mode        median stall   vs copy   max stall   of which copying   mean step   staging allocated");
  for (const [mode, r] of results) {
    const m = r.stalls.length ? median(r.stalls) : NaN;
    console.log(
      `${mode.padEnd(10)} ${(r.stalls.length ? `${m.toFixed(1)} ms` : "-").padStart(13)} ${
        (r.stalls.length ? `${(m / copy).toFixed(2)}x` : "-").padStart(9)
      } ${(r.stalls.length ? `${Math.max(...r.stalls).toFixed(1)} ms` : "-").padStart(11)} ${
        (r.copies.length ? `${median(r.copies).toFixed(1)} ms` : "-").padStart(18)
      } ${`${r.stepMs.toFixed(0)} ms`.padStart(11)} ${`${(r.allocated / 2 ** 20).toFixed(1)} MiB`.padStart(19)}`,
    );
  }
  const inline = median(results.get("inline")!.stalls);
  const background = median(results.get("background")!.stalls);
  console.log(`inline / background median stall: ${(inline / background).toFixed(1)}x`);
} finally {
  await Deno.remove(dir, { recursive: true });
}
