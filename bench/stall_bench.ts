/**
 * The calling thread's cost of one 16 MiB checkpoint, three ways, in one `Deno.bench` group:
 * copying the bytes into staging arrays (baseline: what any isolated snapshot costs), that copy
 * plus an inline `await saveCheckpoint(...)`, and that copy plus `BackgroundWriter.save()`
 * (timed until it returns; the save is awaited outside the timed part, so the next iteration
 * does not queue behind it). Files are written without fsync to keep the run short.
 *
 * Run: `deno bench -A bench/stall_bench.ts`. For a real training loop see `bench/stall.ts`.
 *
 * @module
 */
import { BackgroundWriter } from "../src/background/writer.ts";
import { saveCheckpoint } from "../src/io/save.ts";
import type { TensorInput } from "../src/format/types.ts";

const SIZES = [4 * 2 ** 20, 2 ** 20, 4096, 4096, 10]; // float32 elements: ~20 MiB in all
const SOURCE = SIZES.map((n) => new Float32Array(n).map((_, i) => i * 0.5));
const dir = Deno.makeTempDirSync({ prefix: "ckpt-stall-bench-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));

/** Copies the "model" into staging arrays taken from `pool` when there, else new ones. */
function snapshot(pool: Float32Array[][]): TensorInput[] {
  const staging = pool.pop() ?? SIZES.map((n) => new Float32Array(n));
  return SOURCE.map((src, i) => {
    staging[i]!.set(src);
    return { name: `layer${i}`, dtype: "float32", shape: [src.length], data: staging[i]! };
  });
}

const inlinePool: Float32Array[][] = [];
const backgroundPool: Float32Array[][] = [];
const writer = new BackgroundWriter({
  idleTimeout: 2000,
  onReturn: (tensors) => backgroundPool.push(tensors.map((t) => t.data as Float32Array)),
});
let n = 0;

Deno.bench({ name: "copy into staging", group: "stall", baseline: true, n: 20, warmup: 2 }, (b) => {
  b.start();
  const tensors = snapshot(inlinePool);
  b.end();
  inlinePool.push(tensors.map((t) => t.data as Float32Array));
});

Deno.bench({ name: "copy + inline saveCheckpoint", group: "stall", n: 20, warmup: 2 }, async (b) => {
  b.start();
  const tensors = snapshot(inlinePool);
  await saveCheckpoint(`${dir}/inline.ckpt`, { metadata: { step: n++ }, tensors }, { sync: false });
  b.end();
  inlinePool.push(tensors.map((t) => t.data as Float32Array));
});

Deno.bench({ name: "copy + BackgroundWriter.save", group: "stall", n: 20, warmup: 2 }, async (b) => {
  b.start();
  const tensors = snapshot(backgroundPool);
  const saving = writer.save(`${dir}/background.ckpt`, { metadata: { step: n++ }, tensors }, { sync: false });
  b.end();
  await saving;
});
