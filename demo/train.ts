/**
 * `deno task train`: trains a small TensorFlow.js MLP on two interleaved spirals generated here
 * from a seed, checkpoints every `--every` steps in the background into a crash-safe directory,
 * and, started again after Ctrl-C or `kill -9`, resumes from the newest checkpoint and finishes
 * with the same final loss and the same weights, bit for bit, as a run never interrupted.
 *
 *   deno task train                          # trains into ./runs/spirals, resuming if it can
 *   deno task train --delay 20               # slow enough to press Ctrl-C, then run it again
 *   deno task train --fresh --steps 1200     # start over
 *
 * Everything is deterministic: seeded data, seeded initializers, and a batch order that depends
 * only on the step, so the run after a restore sees exactly the batches it would have seen.
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs-core";
import * as tfl from "@tensorflow/tfjs-layers";
import "@tensorflow/tfjs-backend-cpu";
import { parseArgs } from "node:util";
import { saveCheckpoint } from "../mod.ts";
import { CheckpointManager } from "../src/manager/mod.ts";
import { Preemption } from "../src/manager/preemption.ts";
import { MirroredManager } from "../src/manager/mirror.ts";
import { CheckpointMismatchError, CheckpointWriter, restore, snapshot } from "../src/tfjs/mod.ts";
import { loadTfjsNode } from "../src/tfjs/_tfjs_node.ts";
import { isUnlocked, runUnlocked } from "./_unlocked.ts";
import { batchIndices, POINTS, spirals } from "./_data.ts";

/**
 * Backends the demo loads only when asked for (`--backend wasm|webgpu`), by full specifier and a
 * computed import, so that Deno does not prefetch them: a first `deno task train` on the CPU
 * downloads only what it runs. Asked for one of these or `tensorflow`, the demo trains in a run
 * of its own started with `--no-lock` (`./_unlocked.ts`), so that deno.lock does not record it.
 * Same versions as tools.imports.json (tests/dependencies_test.ts checks it).
 */
export const OPTIONAL_BACKENDS: Readonly<Record<string, string>> = {
  wasm: "npm:@tensorflow/tfjs-backend-wasm@4.22.0",
  webgpu: "npm:@tensorflow/tfjs-backend-webgpu@4.22.0",
};

const USAGE = `Usage: deno task train [options]

Trains a small MLP on generated data, checkpointing every N steps; run it again after
Ctrl-C or kill -9 and it resumes from the newest checkpoint with the same result. SIGTERM
and SIGINT (Ctrl-C) save the step it is at before it exits (143 / 130).

Options:
  --dir DIR          checkpoint directory (default: runs/spirals)
  --steps N          train up to step N (default: 600)
  --every N          checkpoint every N steps (default: 50)
  --keep N           checkpoints to keep (default: 3)
  --backend NAME     cpu, wasm, webgpu or tensorflow (default: cpu; tensorflow is
                     tfjs-node's native backend: build it first, deno task setup:native)
  --optimizer NAME   momentum, sgd, rmsprop, adagrad or adam (default: momentum)
  --lr X             learning rate (default: 0.05; 0.005 suits adam and rmsprop)
  --batch N          batch size (default: 64)
  --hidden N         hidden units per layer (default: 32)
  --seed N           data and initializer seed (default: 7)
  --delay MS         sleep after each step, to have time to press Ctrl-C (default: 0)
  --grace MS         after SIGTERM or SIGINT, exit within MS even if the save is not done
                     (default: 25000; the newest committed checkpoint stays intact)
  --mirror ADDR      also replicate each checkpoint in the background to ADDR
                     (s3://bucket/prefix with the AWS_* variables, or a directory),
                     keeping the last 3 there; resumes from it if newer or intact
  --fresh            delete the directory's checkpoints and start from step 0
  --workers N        train data-parallel on N worker processes, checkpointing sharded
                     (see deno task train --workers 1 --help)
  --quiet            print only the final result
  -h, --help         show this help

A resumed run ends with the same loss and weights, bit for bit, as one never interrupted
(except Adam on the webgpu backend, which resumes close to but not exactly on it:
see docs/tfjs.md).`;

/** The flags, checked. */
interface Config {
  dir: string;
  steps: number;
  every: number;
  keep: number;
  backend: string;
  optimizer: string;
  lr: number;
  batch: number;
  hidden: number;
  seed: number;
  delay: number;
  grace: number;
  mirror: string | undefined;
  fresh: boolean;
  quiet: boolean;
}

const OPTIMIZERS: Record<string, (lr: number) => tf.Optimizer> = {
  momentum: (lr) => tf.train.momentum(lr, 0.9),
  sgd: (lr) => tf.train.sgd(lr),
  rmsprop: (lr) => tf.train.rmsprop(lr, 0.9),
  adagrad: (lr) => tf.train.adagrad(lr),
  adam: (lr) => tf.train.adam(lr),
};

class UsageError extends Error {}

function parseConfig(args: string[]): Config | undefined {
  const { values } = parseArgs({
    args,
    strict: true,
    allowPositionals: false,
    options: {
      dir: { type: "string", default: "runs/spirals" },
      steps: { type: "string", default: "600" },
      every: { type: "string", default: "50" },
      keep: { type: "string", default: "3" },
      backend: { type: "string", default: "cpu" },
      optimizer: { type: "string", default: "momentum" },
      lr: { type: "string", default: "0.05" },
      batch: { type: "string", default: "64" },
      hidden: { type: "string", default: "32" },
      seed: { type: "string", default: "7" },
      delay: { type: "string", default: "0" },
      grace: { type: "string", default: "25000" },
      mirror: { type: "string" },
      fresh: { type: "boolean", default: false },
      quiet: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return undefined;
  const int = (name: keyof typeof values, min: number): number => {
    const text = values[name] as string;
    const n = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min) {
      throw new UsageError(`--${name} must be an integer of at least ${min}, got ${JSON.stringify(text)}`);
    }
    return n;
  };
  const lr = Number(values.lr);
  if (!(lr > 0 && lr < 10)) throw new UsageError(`--lr must be a number between 0 and 10, got ${values.lr}`);
  if (!["cpu", "wasm", "webgpu", "tensorflow"].includes(values.backend)) {
    throw new UsageError(`--backend must be cpu, wasm, webgpu or tensorflow, got ${JSON.stringify(values.backend)}`);
  }
  if (!Object.hasOwn(OPTIMIZERS, values.optimizer)) {
    throw new UsageError(
      `--optimizer must be one of ${Object.keys(OPTIMIZERS).join(", ")}, got ${JSON.stringify(values.optimizer)}`,
    );
  }
  if (values.dir === "") throw new UsageError("--dir must not be empty");
  if (values.mirror === "") throw new UsageError("--mirror must not be empty");
  if (values.mirror !== undefined && values.fresh) {
    throw new UsageError("--fresh deletes local checkpoints only: with --mirror, use a new --dir and mirror prefix");
  }
  return {
    dir: values.dir,
    steps: int("steps", 1),
    every: int("every", 1),
    keep: int("keep", 1),
    backend: values.backend,
    optimizer: values.optimizer,
    lr,
    batch: int("batch", 1),
    hidden: int("hidden", 1),
    seed: int("seed", 0),
    delay: int("delay", 0),
    grace: int("grace", 0),
    mirror: values.mirror,
    fresh: values.fresh,
    quiet: values.quiet,
  };
}

function buildModel(config: Config): { model: tfl.LayersModel; optimizer: tf.Optimizer } {
  const init = (n: number) => tfl.initializers.glorotUniform({ seed: config.seed * 10 + n });
  const model = tfl.sequential({
    layers: [
      tfl.layers.dense({ name: "hidden1", units: config.hidden, inputShape: [2], kernelInitializer: init(1) }),
      tfl.layers.batchNormalization({ name: "norm1" }),
      tfl.layers.activation({ name: "relu1", activation: "relu" }),
      tfl.layers.dense({ name: "hidden2", units: config.hidden, activation: "relu", kernelInitializer: init(2) }),
      tfl.layers.dense({ name: "output", units: 1, activation: "sigmoid", kernelInitializer: init(3) }),
    ],
  });
  const optimizer = OPTIMIZERS[config.optimizer]!(config.lr);
  model.compile({ optimizer, loss: "binaryCrossentropy", metrics: ["accuracy"] });
  return { model, optimizer };
}

/** What must match for a directory's checkpoints to continue this run exactly. */
function runIdentity(config: Config) {
  return {
    optimizer: config.optimizer,
    lr: config.lr,
    batch: config.batch,
    hidden: config.hidden,
    seed: config.seed,
  };
}

const fmt = (n: number) => n.toFixed(6);

async function main(args: string[]): Promise<number> {
  // --workers N: data-parallel worker processes, sharded checkpoints (demo/train_workers.ts).
  if (args.some((a) => a === "--workers" || a.startsWith("--workers="))) {
    return await (await import("./train_workers.ts")).coordinate(args);
  }
  let config: Config | undefined;
  try {
    config = parseConfig(args);
  } catch (e) {
    console.error(`train: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (!config) {
    console.log(USAGE);
    return 0;
  }
  const say = config.quiet ? () => {} : (line: string) => console.log(line);
  const optional = config.backend === "tensorflow" || config.backend in OPTIONAL_BACKENDS;
  if (optional && !isUnlocked()) return await runUnlocked(new URL(import.meta.url).pathname, args);

  if (config.backend === "tensorflow") await loadTfjsNode(); // registers it; throws how to set it up if it cannot
  tf.env().set("PROD", true); // no "install tfjs-node" banner
  if (config.backend in OPTIONAL_BACKENDS) await import(OPTIONAL_BACKENDS[config.backend]!);
  if (!(await tf.setBackend(config.backend).catch(() => false))) {
    console.error(
      `train: cannot start the ${config.backend} backend${config.backend === "webgpu" ? " (no WebGPU adapter?)" : ""}`,
    );
    return 1;
  }
  await tf.ready();

  const writer = new CheckpointWriter();
  const local = { maxToKeep: config.keep, writer: writer.fileWriter };
  const onWarning = (m: string) => console.error(`train: warning: ${m}`);
  // With --mirror: committed locally first, replicated in the background (docs/manager.md).
  const manager = config.mirror === undefined
    ? await CheckpointManager.open(config.dir, { ...local, onWarning })
    : await MirroredManager.open(config.dir, config.mirror, { local, mirror: { maxToKeep: 3 }, onWarning });
  if (config.fresh) {
    // Only the manager's checkpoints go, never other files in --dir.
    const checkpoints = manager as CheckpointManager; // --fresh is refused with --mirror
    for (const entry of (await checkpoints.list()).reverse()) await checkpoints.delete(entry.step);
  }
  const { model, optimizer } = buildModel(config);
  const data = spirals(config.seed);
  const xs = tf.tensor2d(data.x, [POINTS, 2]);
  const ys = tf.tensor2d(data.y, [POINTS, 1]);
  const identity = runIdentity(config);

  let step = 0;
  const latest = await manager.latest();
  if (latest) {
    const saved = JSON.stringify(latest.metadata.custom?.run ?? null);
    if (saved !== JSON.stringify(identity)) {
      console.error(
        `train: ${manager.dir} holds a run with different settings (${saved}); use the same flags, another --dir, or --fresh`,
      );
      await manager.close();
      await writer.close();
      return 1;
    }
    try {
      // "replay" redoes Adam's running beta powers, so an Adam run resumes bit for bit too
      // (on cpu and wasm; other optimizers are exact anyway).
      await restore(latest, { model, optimizer, adamPowers: "replay" });
    } catch (e) {
      if (!(e instanceof CheckpointMismatchError)) throw e;
      console.error(`train: the checkpoint does not fit this model: ${e.message}`);
      await manager.close();
      await writer.close();
      return 1;
    }
    step = latest.metadata.step;
    say(`resumed from step ${step} (${manager.dir})`);
    if (step > config.steps) say(`the directory is already past --steps ${config.steps}: nothing to train`);
  } else {
    say(`training from step 0 into ${manager.dir} (${config.backend}, ${config.optimizer})`);
  }

  // SIGTERM (kill, Kubernetes, Slurm) and SIGINT (Ctrl-C), or npx/deno task above us gone: save
  // the step we are at and exit. A second signal exits at once; the last commit is intact.
  using preemption = Preemption.listen({
    gracePeriod: config.grace,
    log: (m) => console.error(`train: ${m}`),
  });

  const checkpoint = (loss: number) => {
    const at = step;
    writer.save(manager, {
      model,
      optimizer,
      step: at,
      epoch: Math.floor((at * config.batch) / POINTS),
      metrics: { loss },
      custom: { run: identity },
    }).then((entry) => say(`  checkpoint step ${at} committed (${(entry.bytes / 1024).toFixed(1)} KiB)`));
    // No rejection handler on purpose: a failed save is then the writer's to report, and the
    // next save() or close() throws it, which ends this run with the error.
  };

  const started = performance.now();
  let loss = NaN;
  let accuracy = NaN;
  while (step < config.steps && !preemption.reached(step)) {
    step++;
    const indices = tf.tensor1d(batchIndices(step, config.batch, config.seed), "int32");
    const x = tf.gather(xs, indices);
    const y = tf.gather(ys, indices);
    [loss, accuracy] = await model.trainOnBatch(x, y) as number[] as [number, number];
    tf.dispose([indices, x, y]);
    if (step % config.every === 0 || step === config.steps) {
      say(`step ${String(step).padStart(5)}/${config.steps}  loss ${fmt(loss)}  accuracy ${accuracy.toFixed(3)}`);
      checkpoint(loss);
    }
    // Let the event loop run (worker replies, index commits, Ctrl-C): on the cpu backend a
    // step resolves without ever leaving the microtask queue.
    await new Promise((r) => setTimeout(r, config.delay));
  }
  const notice = preemption.notice;
  if (notice) {
    if (step % config.every !== 0 && step !== config.steps) {
      say(`${notice.reason} at step ${step}: saving it before exiting`);
      checkpoint(loss);
    }
    // Waits for every checkpoint (the writer's, then the manager's commits), releases the lock
    // and exits 143 or 130; a failed save exits 1 with the error.
    await preemption.stop([writer, manager], {
      // --fresh would delete what this run saved: resuming means the same flags without it.
      onDrained: (status) =>
        status !== 1 &&
        say(`stopped at step ${step}; run the same command${config.fresh ? " without --fresh" : ""} again to resume`),
    });
    return notice.status;
  }
  preemption.dispose();
  await writer.close(); // waits for every checkpoint; throws if one failed
  await manager.close();

  // The result, on the whole data set in inference mode: the same for every run of these flags.
  const [evalLoss, evalAccuracy] = model.evaluate(xs, ys) as tf.Scalar[];
  const finalLoss = (await evalLoss!.data())[0]!;
  const finalAccuracy = (await evalAccuracy!.data())[0]!;
  const weights = await snapshot({ model, step });
  const { sha256 } = await saveCheckpoint(new WritableStream(), { ...weights, metadata: { step } }, {
    sha256sum: true,
  });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  say(`done at step ${step} (${seconds} s this run)`);
  console.log(`final loss ${fmt(finalLoss)}  accuracy ${finalAccuracy.toFixed(4)}  weights sha256 ${sha256}`);
  tf.dispose([xs, ys, evalLoss!, evalAccuracy!]);
  model.dispose();
  return 0;
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (e) {
    console.error(`train: ${(e as Error)?.message ?? e}`);
    Deno.exit(1);
  }
}
