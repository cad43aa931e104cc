/**
 * The core demo: writes a sample checkpoint in every codec, verifies each file, then streams one
 * through a real Unix pipe (`writer | reader`, two processes) and checks it arrived intact.
 *
 *   deno task demo [--dir DIR]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { type CheckpointInput, loadCheckpoint, saveCheckpoint, sniffCheckpoint, type TensorInput } from "../mod.ts";

/** A small model's worth of tensors: weights, a batch-norm buffer, Adam state, an iteration count. */
function sample(): CheckpointInput {
  const rand = (n: number, seed: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 7919 + i) * 0.1);
  const tensors: TensorInput[] = [
    { name: "dense_1/kernel", dtype: "float32", shape: [64, 128], data: rand(64 * 128, 1) },
    { name: "dense_1/bias", dtype: "float32", shape: [128], data: rand(128, 2) },
    { name: "batch_norm/moving_mean", dtype: "float32", shape: [128], data: rand(128, 3), group: "buffers" },
    { name: "dense_2/kernel", dtype: "float32", shape: [128, 10], data: rand(1280, 4) },
    { name: "embedding/table_fp16", dtype: "float16", shape: [32, 16], data: new Uint16Array(512).fill(0x3c00) },
    { name: "dense_1/kernel/adam_m", dtype: "float32", shape: [64, 128], data: rand(64 * 128, 5), group: "optimizer" },
    { name: "iterations", dtype: "int64", shape: [], data: new BigInt64Array([1200n]), group: "optimizer" },
  ];
  return {
    metadata: { step: 1200, epoch: 4, metrics: { loss: 0.0731, accuracy: 0.981 }, custom: { model: "mlp", lr: 1e-3 } },
    tensors,
  };
}

const args = parseArgs({ options: { dir: { type: "string" }, role: { type: "string" } } });

if (args.values.role === "writer") {
  // One end of the pipe: stream the checkpoint to stdout.
  await saveCheckpoint(Deno.stdout.writable, sample(), { compression: "gzip" });
  Deno.exit(0);
}
if (args.values.role === "reader") {
  // The other end: read stdin, verify, report.
  const ckpt = await loadCheckpoint(Deno.stdin.readable);
  const elements = ckpt.tensors.reduce((n, t) => n + t.data.length, 0);
  console.log(
    `  reader got step ${ckpt.metadata.step}: ${ckpt.tensors.length} tensors, ${elements} elements, all digests verified`,
  );
  Deno.exit(0);
}

const dir = args.values.dir ?? await Deno.makeTempDir({ prefix: "ckpt-demo-" });
await Deno.mkdir(dir, { recursive: true });
console.log(`Writing a sample checkpoint in every codec to ${dir}\n`);
console.log("file                      codec   gzip  bytes    stream digest     verified");
for (const codec of ["binary", "json"] as const) {
  for (const compression of ["none", "gzip"] as const) {
    const file = `sample.${codec}${compression === "gzip" ? ".gz" : ""}.ckpt`;
    const path = join(dir, file);
    const saved = await saveCheckpoint(path, sample(), { codec, compression });
    const found = await sniffCheckpoint(path);
    await found.bytes.cancel();
    const back = await loadCheckpoint(path, { sha256: saved.digest });
    const ok = back.tensors.length === 7 && back.metadata.step === 1200;
    console.log(
      `${file.padEnd(26)}${found.codec.name.padEnd(8)}${(found.compression === "gzip" ? "yes" : "no").padEnd(6)}${
        String(saved.bytes).padEnd(9)
      }${saved.digest.slice(0, 16)}  ${ok ? "yes" : "NO"}`,
    );
    if (!ok) Deno.exit(1);
  }
}

console.log(
  "\nstream digest: the SHA-256 ckpt stores in the file over its records (what `ckpt inspect` prints);\n" +
    "`sha256sum FILE` hashes the file's bytes and prints another value (`ckpt verify --sha256` takes either)",
);

const only = await loadCheckpoint(join(dir, "sample.binary.ckpt"), { only: ["dense_2/kernel"] });
console.log(`\nRandom access: loaded only ${only.tensors.map((t) => t.name)} through the index`);

console.log("\nStreaming through a Unix pipe: writer | reader");
const self = new URL(import.meta.url).pathname;
const deno = Deno.execPath();
const pipe = new Deno.Command("sh", {
  args: ["-c", `"$0" run --quiet "$1" --role writer | "$0" run --quiet "$1" --role reader`, deno, self],
}).spawn();
const status = await pipe.status;
if (!status.success) {
  console.error("pipe demo failed");
  Deno.exit(1);
}
if (!args.values.dir) await Deno.remove(dir, { recursive: true });
