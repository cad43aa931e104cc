/**
 * What a checkpoint costs a tfjs training loop through the adapter: a tfjs-layers MLP (cpu
 * backend, Adam, about 0.26 M parameters, 3 MiB of state with Adam's moments) trains and checkpoints every N steps,
 * four ways, interleaved over several rounds in one run:
 *
 * - `none`: no checkpoint (the reference loop);
 * - `copy`: `snapshot()` into a staging pool, then released: the bytes every checkpoint must
 *   copy out of tfjs (the peer the others are compared with);
 * - `inline`: `snapshot()`, then `await saveCheckpoint()` on the training thread;
 * - `writer`: `CheckpointWriter.save()`, not awaited: snapshot, then encoding, SHA-256 and the
 *   write in a Web Worker, staging buffers reused.
 *
 * For each it prints the median time the loop spent inside the checkpoint call and the median
 * extra wall time of the whole loop over `none`, per checkpoint (this also counts work that runs
 * later on the training thread, such as the snapshot's read-back, and CPU the worker takes from
 * training on a small machine), with ratios against `copy`.
 *
 * Run: `deno run --allow-read --allow-write --allow-env bench/tfjs_stall.ts [--rounds 5]
 * [--every 5] [--checkpoints 6] [--gzip]`
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs-core";
import * as tfl from "@tensorflow/tfjs-layers";
import "@tensorflow/tfjs-backend-cpu";
import { parseArgs } from "node:util";
import { saveCheckpoint } from "../mod.ts";
import { CheckpointWriter, snapshot, StagingPool } from "../src/tfjs/mod.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    rounds: { type: "string", default: "5" },
    every: { type: "string", default: "5" },
    checkpoints: { type: "string", default: "6" },
    gzip: { type: "boolean", default: false },
  },
});
const ROUNDS = Number(values.rounds);
const EVERY = Number(values.every);
const CHECKPOINTS = Number(values.checkpoints);
const COMPRESSION = values.gzip ? "gzip" as const : "none" as const;

tf.env().set("PROD", true);
await tf.setBackend("cpu");

const model = tfl.sequential({
  layers: [
    tfl.layers.dense({ name: "fc1", units: 512, inputShape: [256], activation: "relu" }),
    tfl.layers.dense({ name: "fc2", units: 256, activation: "relu" }),
    tfl.layers.dense({ name: "out", units: 10 }),
  ],
});
const optimizer = tf.train.adam(1e-3);
model.compile({ optimizer, loss: "meanSquaredError" });
const x = tf.randomNormal([4, 256], 0, 1, "float32", 1);
const y = tf.randomNormal([4, 10], 0, 1, "float32", 2);
await model.trainOnBatch(x, y);

type Mode = "none" | "copy" | "inline" | "writer";
const MODES: Mode[] = ["none", "copy", "inline", "writer"];
const dir = await Deno.makeTempDir({ prefix: "ckpt_tfjs_stall_" });
const pool = new StagingPool();
const writer = new CheckpointWriter({ saveOptions: { compression: COMPRESSION } });
let step = 0;

async function loop(mode: Mode): Promise<{ wall: number; inCall: number[] }> {
  const inCall: number[] = [];
  const start = performance.now();
  for (let k = 0; k < CHECKPOINTS * EVERY; k++) {
    step++;
    await model.trainOnBatch(x, y);
    await new Promise((r) => setTimeout(r, 0)); // a loop that lets the event loop run
    if ((k + 1) % EVERY !== 0 || mode === "none") continue;
    const t0 = performance.now();
    const path = `${dir}/step-${step}.ckpt`;
    if (mode === "copy") pool.release(await snapshot({ model, optimizer, step, staging: pool }));
    else if (mode === "inline") {
      await saveCheckpoint(path, await snapshot({ model, optimizer, step, staging: pool }), {
        compression: COMPRESSION,
      }).then(() => {});
    } else writer.save(path, { model, optimizer, step });
    inCall.push(performance.now() - t0);
  }
  const wall = performance.now() - start;
  await writer.flush(); // outside the timing: the last save finishes before the next loop starts
  return { wall, inCall };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const walls = new Map<Mode, number[]>(MODES.map((m) => [m, []]));
const calls = new Map<Mode, number[]>(MODES.map((m) => [m, []]));
await loop("writer"); // warm up: worker, code paths
for (let r = 0; r < ROUNDS; r++) {
  for (const mode of MODES) {
    const { wall, inCall } = await loop(mode);
    walls.get(mode)!.push(wall);
    calls.get(mode)!.push(...inCall);
  }
}
await writer.close();
await Deno.remove(dir, { recursive: true });

const bytes = (await snapshot({ model, optimizer, step })).tensors.reduce((n, t) => n + t.data.byteLength, 0);
console.log(
  `tfjs ${tf.version_core} cpu backend, MLP 256-512-256-10 with Adam (${(bytes / 2 ** 20).toFixed(1)} MiB of state), ` +
    `checkpoint every ${EVERY} steps, ${CHECKPOINTS} per loop, ${ROUNDS} rounds, compression ${COMPRESSION}`,
);
const noneWall = median(walls.get("none")!);
const perCheckpoint = (m: Mode) => (median(walls.get(m)!) - noneWall) / CHECKPOINTS;
const copyCall = median(calls.get("copy")!);
const copyLoop = perCheckpoint("copy");
console.log(`step time without checkpoints: ${(noneWall / (CHECKPOINTS * EVERY)).toFixed(2)} ms`);
console.log("mode     in-call median   vs copy   loop cost per checkpoint   vs copy");
for (const m of MODES.slice(1)) {
  const c = median(calls.get(m)!);
  const l = perCheckpoint(m);
  console.log(
    `${m.padEnd(8)} ${c.toFixed(2).padStart(10)} ms ${(c / copyCall).toFixed(2).padStart(8)}x ${
      l.toFixed(2).padStart(20)
    } ms ${(l / copyLoop).toFixed(2).padStart(8)}x`,
  );
}
const noneWalls = walls.get("none")!;
console.log(
  `loop-cost noise: the "none" rounds alone spread over ${
    ((Math.max(...noneWalls) - Math.min(...noneWalls)) / CHECKPOINTS).toFixed(2)
  } ms per checkpoint; loop costs below that are noise`,
);
console.log(`staging buffers allocated by the writer: ${writer.staging.allocations}`);
