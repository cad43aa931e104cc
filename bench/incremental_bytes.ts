// Bytes written per checkpoint, full against incremental, for a model whose first half is frozen
// (embeddings, a pretrained encoder) and whose second half trains. Also the wall time per save.
//
//   deno run -A bench/incremental_bytes.ts [--mib 64] [--saves 6]
//
// Each save is durable (fsync of files and directories) in both modes.
import { parseArgs } from "node:util";
import type { CheckpointInput, TensorInput } from "../mod.ts";
import { CheckpointManager } from "../src/manager/mod.ts";

const { values } = parseArgs({
  options: { mib: { type: "string", default: "64" }, saves: { type: "string", default: "6" } },
});
const mib = Number(values.mib);
const saves = Number(values.saves);
const LAYERS = 8;
const floatsPerLayer = Math.floor((mib * 2 ** 20) / 4 / LAYERS);

function model(step: number): CheckpointInput {
  const tensors: TensorInput[] = [];
  for (let i = 0; i < LAYERS; i++) {
    const frozen = i < LAYERS / 2;
    const data = new Float32Array(floatsPerLayer);
    // Frozen layers never change; trained layers change at every step.
    for (let j = 0; j < data.length; j++) data[j] = frozen ? Math.sin(i * 7 + j) : Math.sin(step * 13 + i * 7 + j);
    tensors.push({ name: `layer${i}/kernel`, dtype: "float32", shape: [floatsPerLayer], data });
  }
  tensors.push({
    name: "optimizer/iter",
    dtype: "int64",
    shape: [],
    data: new BigInt64Array([BigInt(step)]),
    group: "optimizer",
  });
  return { metadata: { step, metrics: { loss: 1 / step } }, tensors };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const fmt = (n: number) => `${(n / 2 ** 20).toFixed(2)} MiB`;
const root = await Deno.makeTempDir({ prefix: "ckpt-bench-incremental-" });
const modes = [
  { name: "full", options: {} },
  { name: "incremental", options: { incremental: true } },
] as const;
const results: Record<string, { written: number[]; ms: number[] }> = {};
try {
  const inputs = Array.from({ length: saves }, (_, i) => model(i + 1));
  for (const mode of modes) {
    const manager = await CheckpointManager.open(`${root}/${mode.name}`, { ...mode.options, maxToKeep: 3 });
    const r: { written: number[]; ms: number[] } = (results[mode.name] = { written: [], ms: [] });
    for (const input of inputs) {
      const t0 = performance.now();
      const entry = await manager.save(input);
      r.ms.push(performance.now() - t0);
      r.written.push(entry.bytesWritten);
    }
    await manager.close();
  }
  console.log(
    `model: ${LAYERS} float32 layers of ${fmt(floatsPerLayer * 4)}, the first ${LAYERS / 2} frozen (${
      fmt(mib * 2 ** 20)
    } in all); ${saves} saves`,
  );
  console.log("save | full: written | incremental: written | ratio");
  for (let i = 0; i < saves; i++) {
    const f = results.full!.written[i]!, inc = results.incremental!.written[i]!;
    console.log(`${i + 1} | ${fmt(f)} | ${fmt(inc)} | ${(inc / f).toFixed(3)}`);
  }
  const later = (xs: number[]) => median(xs.slice(1));
  console.log(
    `median bytes per save after the first: full ${fmt(later(results.full!.written))}, incremental ${
      fmt(later(results.incremental!.written))
    } (${(later(results.incremental!.written) / later(results.full!.written)).toFixed(3)}x)`,
  );
  console.log(
    `median ms per save after the first: full ${later(results.full!.ms).toFixed(1)}, incremental ${
      later(results.incremental!.ms).toFixed(1)
    } (${(later(results.incremental!.ms) / later(results.full!.ms)).toFixed(2)}x)`,
  );
} finally {
  await Deno.remove(root, { recursive: true });
}
