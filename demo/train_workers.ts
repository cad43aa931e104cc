/**
 * `deno task train --workers N`: the training demo, data-parallel over N worker processes, each
 * with a full replica of the MLP, checkpointing sharded (each worker writes its planned share of
 * every checkpoint; worker 0 commits the manifest and the index) to a directory or `s3://`.
 *
 * This process coordinates and trains nothing: every step, each batch is cut into 4 fixed
 * chunks, the workers compute the gradients of the chunks given to them (chunk c to worker
 * c mod N), this process adds them up in chunk order and sends the mean back, and every worker
 * applies it. The sum's order does not depend on N, so the run gives the same weights, bit for
 * bit, with 1, 2, 3 or 4 workers, and resumed after `kill -9` of any of them (or of this
 * process) with another N. The model has no batch normalisation (its statistics would need an
 * all-reduce of their own).
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs-core";
import * as tfl from "@tensorflow/tfjs-layers";
import "@tensorflow/tfjs-backend-cpu";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { saveCheckpoint } from "../mod.ts";
import { CheckpointManager, saveManagedShard } from "../src/manager/mod.ts";
import { restore, snapshot } from "../src/tfjs/mod.ts";
import { batchIndices, POINTS, spirals } from "./_data.ts";

/** Gradient chunks per batch: fixed, so the sum is the same whatever the number of workers. */
export const CHUNKS = 4;

export const WORKERS_USAGE = `Usage: deno task train --workers N [options]

Trains the MLP data-parallel on N worker processes (1 to ${CHUNKS}), checkpointing sharded:
each worker writes its share of every checkpoint, worker 0 commits it. Kill any worker (or
this process) with kill -9 and run the same command, with any --workers, to resume: the
result is the same, bit for bit, as a run never interrupted.

Options:
  --workers N        worker processes (1 to ${CHUNKS})
  --dir DIR          checkpoint directory or s3://bucket/prefix (default: runs/spirals-workers)
  --steps N          train up to step N (default: 600)
  --every N          checkpoint every N steps (default: 50)
  --keep N           checkpoints to keep (default: 3)
  --lr X             learning rate of SGD with momentum 0.9 (default: 0.05)
  --batch N          batch size, a multiple of ${CHUNKS} (default: 64)
  --hidden N         hidden units per layer (default: 32)
  --seed N           data and initializer seed (default: 7)
  --delay MS         sleep after each step (default: 0)
  --fresh            delete the directory's checkpoints and start from step 0
  --quiet            print only the final result
  -h, --help         show this help`;

interface Config {
  workers: number;
  dir: string;
  steps: number;
  every: number;
  keep: number;
  lr: number;
  batch: number;
  hidden: number;
  seed: number;
  delay: number;
  fresh: boolean;
  quiet: boolean;
}

class UsageError extends Error {}

/** The flags of `--workers` runs (and of each worker, which gets the same ones). */
function parseConfig(args: string[]): { config: Config; worker: number | undefined } | undefined {
  const { values } = parseArgs({
    args,
    strict: true,
    allowPositionals: false,
    options: {
      workers: { type: "string" },
      worker: { type: "string" },
      dir: { type: "string", default: "runs/spirals-workers" },
      steps: { type: "string", default: "600" },
      every: { type: "string", default: "50" },
      keep: { type: "string", default: "3" },
      lr: { type: "string", default: "0.05" },
      batch: { type: "string", default: "64" },
      hidden: { type: "string", default: "32" },
      seed: { type: "string", default: "7" },
      delay: { type: "string", default: "0" },
      fresh: { type: "boolean", default: false },
      quiet: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return undefined;
  const int = (name: keyof typeof values, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const text = values[name] as string;
    const n = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new UsageError(
        `--${name} must be an integer from ${min}${max < 1e15 ? ` to ${max}` : " up"}, got ${JSON.stringify(text)}`,
      );
    }
    return n;
  };
  const lr = Number(values.lr);
  if (!(lr > 0 && lr < 10)) throw new UsageError(`--lr must be a number between 0 and 10, got ${values.lr}`);
  const batch = int("batch", CHUNKS);
  if (batch % CHUNKS !== 0) throw new UsageError(`--batch must be a multiple of ${CHUNKS}, got ${batch}`);
  if (values.dir === "") throw new UsageError("--dir must not be empty");
  const config: Config = {
    workers: int("workers", 1, CHUNKS),
    dir: values.dir,
    steps: int("steps", 1),
    every: int("every", 1),
    keep: int("keep", 1),
    lr,
    batch,
    hidden: int("hidden", 1),
    seed: int("seed", 0),
    delay: int("delay", 0),
    fresh: values.fresh,
    quiet: values.quiet,
  };
  return { config, worker: values.worker === undefined ? undefined : int("worker", 0, config.workers - 1) };
}

/** What must match for a directory's checkpoints to continue this run exactly (not the worker count). */
function runIdentity(config: Config) {
  return { parallel: CHUNKS, lr: config.lr, batch: config.batch, hidden: config.hidden, seed: config.seed };
}

/** Messages between the coordinator and a worker: one JSON object per line. */
type Message = Record<string, unknown>;

/** The JSON lines of a byte stream. */
async function* messages(stream: ReadableStream<Uint8Array<ArrayBuffer>>): AsyncGenerator<Message> {
  let pending = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    pending += text;
    for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (line.startsWith("{")) yield JSON.parse(line) as Message;
      else if (line.trim() !== "") console.error(line); // not a message: shown, not parsed
    }
  }
}

const encoder = new TextEncoder();

// ---------------------------------------------------------------------------------------------
// The worker: a full replica, its chunks' gradients, its share of every checkpoint.

function buildModel(config: Config): tfl.LayersModel {
  const init = (n: number) => tfl.initializers.glorotUniform({ seed: config.seed * 10 + n });
  return tfl.sequential({
    layers: [
      tfl.layers.dense({
        name: "hidden1",
        units: config.hidden,
        activation: "relu",
        inputShape: [2],
        kernelInitializer: init(1),
      }),
      tfl.layers.dense({ name: "hidden2", units: config.hidden, activation: "relu", kernelInitializer: init(2) }),
      tfl.layers.dense({ name: "output", units: 1, activation: "sigmoid", kernelInitializer: init(3) }),
    ],
  });
}

async function worker(config: Config, index: number): Promise<number> {
  tf.env().set("PROD", true);
  await tf.setBackend("cpu");
  const out = Deno.stdout.writable.getWriter();
  const send = (m: Message) => out.write(encoder.encode(JSON.stringify(m) + "\n"));
  const model = buildModel(config);
  const optimizer = tf.train.momentum(config.lr, 0.9);
  const variables = model.trainableWeights.map((w) => w.read() as tf.Variable);
  const data = spirals(config.seed);
  const xs = tf.tensor2d(data.x, [POINTS, 2]);
  const ys = tf.tensor2d(data.y, [POINTS, 1]);
  const identity = runIdentity(config);
  // Worker 0 commits: it holds the manager (and its lock); the others write parts beside it.
  const manager = index === 0 ? await CheckpointManager.open(config.dir, { maxToKeep: config.keep }) : undefined;
  const saving: Promise<unknown>[] = [];
  const save = async (step: number, saveId: string, loss: number) => {
    const checkpoint = await snapshot({ model, optimizer, step, metrics: { loss }, custom: { run: identity } });
    const shards = { writers: config.workers, saveId, external: true, deadline: 60_000 };
    if (manager) {
      const entry = await manager.save(checkpoint, { shards });
      await send({ committed: step, bytes: entry.bytes });
    } else {
      await saveManagedShard(config.dir, checkpoint, { writer: index, writers: config.workers, saveId });
    }
  };
  for await (const m of messages(Deno.stdin.readable)) {
    if (m.resume !== undefined) {
      // Worker 0 says where the run is; every other worker then loads that step, whole.
      let step = 0;
      if (manager) {
        if (m.fresh) { for (const e of (await manager.list()).reverse()) await manager.delete(e.step); }
        const latest = await manager.latest();
        if (latest) {
          const saved = JSON.stringify(latest.metadata.custom?.run ?? null);
          if (saved !== JSON.stringify(identity)) {
            await send({
              error:
                `${manager.dir} holds a run with different settings (${saved}); use the same flags, another --dir, or --fresh`,
            });
            return 1;
          }
          await restore(latest, { model, optimizer });
          step = latest.metadata.step;
        }
      } else if ((m.resume as number) > 0) {
        const view = await CheckpointManager.open(config.dir, { readOnly: true });
        await restore(await view.load(m.resume as number), { model, optimizer });
        await view.close();
        step = m.resume as number;
      }
      await send({ ready: step });
    } else if (m.grads !== undefined) {
      const step = m.grads as number;
      const indices = batchIndices(step, config.batch, config.seed);
      const size = config.batch / CHUNKS;
      const chunks = [];
      for (let c = index; c < CHUNKS; c += config.workers) {
        const { value, grads } = tf.tidy(() => {
          const i = tf.tensor1d(indices.subarray(c * size, (c + 1) * size), "int32");
          const x = tf.gather(xs, i);
          const y = tf.gather(ys, i);
          return tf.variableGrads(
            () => tf.mean(tfl.metrics.binaryCrossentropy(y, model.apply(x) as tf.Tensor)) as tf.Scalar,
            variables,
          );
        });
        const values = variables.map((v) => Array.from(grads[v.name]!.dataSync()));
        chunks.push({ chunk: c, loss: value.dataSync()[0]!, values });
        tf.dispose([value, ...Object.values(grads)]);
      }
      await send({ grads: step, chunks });
    } else if (m.apply !== undefined) {
      const step = m.apply as number;
      const mean = m.values as number[][];
      const named = variables.map((v, i) => ({ name: v.name, tensor: tf.tensor(mean[i]!, v.shape, "float32") }));
      optimizer.applyGradients(named);
      tf.dispose(named.map((n) => n.tensor));
      if (typeof m.save === "string") {
        // In the background: the snapshot is taken now, the next step does not wait for the disk.
        const loss = m.loss as number;
        const saveId = m.save;
        const p = snapshotBarrier.then(() => save(step, saveId, loss));
        snapshotBarrier = p.catch(() => {});
        saving.push(p.then(() => send({ saved: step })));
      }
      await send({ applied: step });
    } else if (m.finish !== undefined) {
      await Promise.all(saving);
      await manager?.close();
      const p = model.predict(xs) as tf.Tensor;
      const loss = (await tf.mean(tfl.metrics.binaryCrossentropy(ys, p)).data())[0]!;
      const accuracy = (await tf.mean(tfl.metrics.binaryAccuracy(ys, p)).data())[0]!;
      const weights = await snapshot({ model, step: m.finish as number });
      const { sha256 } = await saveCheckpoint(new WritableStream(), {
        ...weights,
        metadata: { step: m.finish as number },
      }, { sha256sum: true });
      await send({ final: true, loss, accuracy, sha256 });
      return 0;
    }
  }
  return 1; // the coordinator went away
}

/** Snapshots are taken in order, one after the other (each reads the replica as it is then). */
let snapshotBarrier: Promise<unknown> = Promise.resolve();

// ---------------------------------------------------------------------------------------------
// The coordinator: spawns the workers, sums their gradients in chunk order, orders the saves.

const SELF = fileURLToPath(import.meta.url);
const PERMISSIONS = ["--allow-read", "--allow-write", "--allow-env", "--allow-net=127.0.0.1"];

interface Worker {
  index: number;
  child: Deno.ChildProcess;
  inbox: AsyncGenerator<Message>;
  stdin: WritableStreamDefaultWriter<Uint8Array>;
}

class WorkerLost extends Error {}

export async function coordinate(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseConfig(args);
  } catch (e) {
    console.error(`train: ${(e as Error).message}\n\n${WORKERS_USAGE}`);
    return 2;
  }
  if (!parsed) {
    console.log(WORKERS_USAGE);
    return 0;
  }
  const { config, worker: index } = parsed;
  if (index !== undefined) return await worker(config, index);
  const say = config.quiet ? () => {} : (line: string) => console.log(line);
  const passthrough = args.filter((a) => a !== "--fresh");
  const workers: Worker[] = [];
  const spawn = (i: number): Worker => {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", ...PERMISSIONS, SELF, ...passthrough, "--worker", String(i)],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const w = { index: i, child, inbox: messages(child.stdout), stdin: child.stdin.getWriter() };
    workers.push(w);
    say(`worker ${i} pid ${child.pid}`);
    return w;
  };
  /** Why `w` is gone, once its process has ended: the signal that killed it or its exit code. */
  const lost = async (w: Worker): Promise<WorkerLost> => {
    const status = await w.child.status;
    const how = status.signal ? `killed by ${status.signal}` : `exited with code ${status.code}`;
    return new WorkerLost(`worker ${w.index} (pid ${w.child.pid}) ${how}`);
  };
  // A write to a dead worker fails as its pipe closes: the same message as a read would give.
  const send = (w: Worker, m: Message) =>
    w.stdin.write(encoder.encode(JSON.stringify(m) + "\n")).catch(async () => {
      throw await lost(w);
    });
  /** The next message of `w` that is not a save notice (those are counted as they pass). */
  const pendingSaves = new Map<number, number>(); // step -> workers still writing it
  const next = async (w: Worker): Promise<Message> => {
    for (;;) {
      const r = await w.inbox.next();
      if (r.done) throw await lost(w);
      const m = r.value;
      if (m.error !== undefined) throw new WorkerLost(`worker ${w.index}: ${m.error}`);
      if (m.committed !== undefined) {
        say(
          `  checkpoint step ${m.committed} committed (sharded, ${config.workers} parts, ${
            ((m.bytes as number) / 1024).toFixed(1)
          } KiB)`,
        );
      } else if (m.saved !== undefined) {
        const left = pendingSaves.get(m.saved as number)! - 1;
        if (left === 0) pendingSaves.delete(m.saved as number);
        else pendingSaves.set(m.saved as number, left);
      } else return m;
    }
  };
  try {
    // Worker 0 first: it opens the directory (cleaning what a killed save left) and finds the step.
    const first = spawn(0);
    await send(first, { resume: -1, fresh: config.fresh });
    let step = (await next(first)).ready as number;
    for (let i = 1; i < config.workers; i++) await send(spawn(i), { resume: step });
    for (const w of workers.slice(1)) await next(w);
    say(
      step > 0
        ? `resumed from step ${step} (${config.dir}, ${config.workers} workers)`
        : `training from step 0 into ${config.dir} (${config.workers} workers, data-parallel)`,
    );
    const token = crypto.randomUUID().slice(0, 8); // this run's saves: a retried step gets another id
    let loss = NaN;
    while (step < config.steps) {
      step++;
      for (const w of workers) await send(w, { grads: step });
      const chunks: { chunk: number; loss: number; values: number[][] }[] = [];
      for (const w of workers) chunks.push(...((await next(w)).chunks as typeof chunks));
      chunks.sort((a, b) => a.chunk - b.chunk);
      // The mean over chunks, summed in chunk order: the same numbers whatever the worker count.
      const mean = chunks[0]!.values.map((v, i) => {
        const sum = new Float32Array(v.length);
        for (const c of chunks) c.values[i]!.forEach((x, k) => sum[k] = Math.fround(sum[k]! + x));
        return Array.from(sum, (x) => Math.fround(x / CHUNKS));
      });
      loss = chunks.reduce((a, c) => a + c.loss, 0) / CHUNKS;
      const save = step % config.every === 0 || step === config.steps ? `step-${step}-${token}` : undefined;
      if (save) {
        say(`step ${String(step).padStart(5)}/${config.steps}  loss ${loss.toFixed(6)}`);
        pendingSaves.set(step, config.workers);
      }
      for (const w of workers) await send(w, { apply: step, values: mean, loss, ...(save ? { save } : {}) });
      for (const w of workers) await next(w);
      await new Promise((r) => setTimeout(r, config.delay));
    }
    for (const w of workers) await send(w, { finish: step });
    const finals = [];
    for (const w of workers) finals.push(await next(w));
    for (const w of workers) await w.child.status;
    const [result] = finals;
    if (finals.some((f) => f.sha256 !== result!.sha256)) {
      console.error(`train: the replicas differ: ${finals.map((f) => f.sha256).join(", ")}`);
      return 1;
    }
    say(`done at step ${step}`);
    console.log(
      `final loss ${(result!.loss as number).toFixed(6)}  accuracy ${
        (result!.accuracy as number).toFixed(4)
      }  weights sha256 ${result!.sha256}`,
    );
    return 0;
  } catch (e) {
    if (!(e instanceof WorkerLost)) throw e;
    console.error(
      `train: ${e.message}; stopping the other workers. Run the same command (any --workers) to resume from the newest committed checkpoint`,
    );
    for (const w of workers) {
      try {
        w.child.kill("SIGKILL");
      } catch { /* already gone */ }
      await w.child.status;
    }
    return 1;
  }
}

if (import.meta.main) {
  try {
    Deno.exit(await coordinate(Deno.args));
  } catch (e) {
    console.error(`train: ${(e as Error)?.message ?? e}`);
    Deno.exit(1);
  }
}
