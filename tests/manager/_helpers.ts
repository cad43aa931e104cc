// Shared helpers for the manager tests: small deterministic checkpoints and temp directories.

import type { CheckpointInput, Tensor, TensorInput } from "../../mod.ts";

/** A checkpoint whose tensors are derived from `step`: a frozen part that never changes and a trained part. */
export function makeCheckpoint(
  step: number,
  options: { frozen?: number; trained?: number; loss?: number } = {},
): CheckpointInput {
  const frozen = new Float32Array(options.frozen ?? 64).map((_, i) => Math.sin(i));
  const trained = new Float32Array(options.trained ?? 64).map((_, i) => step * 1000 + i);
  const tensors: TensorInput[] = [
    { name: "embedding/frozen", dtype: "float32", shape: [frozen.length], data: frozen },
    { name: "dense/kernel", dtype: "float32", shape: [trained.length], data: trained },
    { name: "bn/moving_mean", dtype: "float64", shape: [2], data: new Float64Array([NaN, -0]), group: "buffers" },
    { name: "optimizer/iter", dtype: "int64", shape: [], data: new BigInt64Array([BigInt(step)]), group: "optimizer" },
  ];
  return { metadata: { step, metrics: { loss: options.loss ?? 1 / (step + 1) } }, tensors };
}

/** Bytes of a tensor, for bit-for-bit comparison (NaN payloads and -0 included). */
export function bits(t: { data: ArrayBufferView }): Uint8Array {
  return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength).slice();
}

/** A comparable form of tensors: name, dtype, shape, group and the exact bytes. */
export function exact(tensors: readonly (Tensor | TensorInput)[]): unknown[] {
  return tensors.map((t) => ({
    name: t.name,
    dtype: t.dtype,
    shape: [...t.shape],
    group: t.group ?? "params",
    bits: bits(t),
  }));
}

/** Runs `fn` with a fresh temporary directory that is removed afterwards. */
export async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-manager-test-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** File names in a directory, sorted. */
export async function names(dir: string): Promise<string[]> {
  return (await Array.fromAsync(Deno.readDir(dir), (e) => e.name)).sort();
}

/** A warnings collector to pass as `onWarning`. */
export function warnings(): { list: string[]; onWarning: (m: string) => void } {
  const list: string[] = [];
  return { list, onWarning: (m) => list.push(m) };
}
