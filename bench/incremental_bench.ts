// Saving a checkpoint whose first half is frozen: a full file (baseline) against an incremental
// save that writes only the changed tensors. `deno bench -A bench/incremental_bench.ts`
import type { CheckpointInput, TensorInput } from "../mod.ts";
import { CheckpointManager } from "../src/manager/mod.ts";

const LAYERS = 8;
const FLOATS = (16 * 2 ** 20) / 4 / LAYERS; // 16 MiB in all

function model(step: number): CheckpointInput {
  const tensors: TensorInput[] = [];
  for (let i = 0; i < LAYERS; i++) {
    const data = new Float32Array(FLOATS).fill(i < LAYERS / 2 ? i : step + i);
    tensors.push({ name: `layer${i}/kernel`, dtype: "float32", shape: [FLOATS], data });
  }
  return { metadata: { step }, tensors };
}

const root = await Deno.makeTempDir({ prefix: "ckpt-bench-" });
const full = await CheckpointManager.open(`${root}/full`, { maxToKeep: 2 });
const incremental = await CheckpointManager.open(`${root}/incremental`, { maxToKeep: 2, incremental: true });
const steps = { full: 0, incremental: 0 };
// The trained half changes every save; a few distinct states are reused so building them is not timed.
const states = Array.from({ length: 4 }, (_, i) => model(i + 1));
const next = (which: keyof typeof steps): CheckpointInput => {
  const step = ++steps[which];
  const s = states[step % states.length]!;
  return { metadata: { step }, tensors: s.tensors };
};

Deno.bench("full checkpoint, 16 MiB, half frozen", { group: "save", baseline: true }, async () => {
  await full.save(next("full"));
});
Deno.bench("incremental checkpoint, 16 MiB, half frozen", { group: "save" }, async () => {
  await incremental.save(next("incremental"));
});

globalThis.addEventListener("unload", () => {
  full.close().catch(() => {});
  incremental.close().catch(() => {});
  Deno.removeSync(root, { recursive: true });
});
