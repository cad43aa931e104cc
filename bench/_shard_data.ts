// The tensors of bench/shard_compare.ts: 32 float32 tensors filling `mib` MiB with deterministic,
// incompressible-looking values; every writer holds the same replica (data-parallel).
import type { TensorInput } from "../mod.ts";

/** The replica every writer holds. */
export function replicaOf(mib: number): TensorInput[] {
  const per = Math.max(1, Math.floor((mib * 2 ** 20) / 32 / 4));
  return Array.from({ length: 32 }, (_, i) => {
    const data = new Float32Array(per);
    let x = i + 1;
    for (let k = 0; k < per; k++) {
      x = (x * 1103515245 + 12345) >>> 0;
      data[k] = x / 2 ** 32 - 0.5;
    }
    return { name: `layer${String(i).padStart(2, "0")}/kernel`, dtype: "float32" as const, shape: [per], data };
  });
}
