// The Node crash child: opens the directory and saves checkpoints in a loop until it is killed,
// printing each step once its save has committed (the Node twin of tests/manager/_crash_child.ts).
import process from "node:process";
import { writeSync } from "node:fs";
import { CheckpointManager } from "@ckpt/ckpt";

const [dir, mode] = process.argv.slice(2);
const POLICY = { maxToKeep: 3, keepEvery: 10, best: { metric: "loss", mode: "min", keep: 2 } };

/** The checkpoint of a step: a frozen tensor, and a trained one whose size and values depend on the step. */
export function crashCheckpoint(step) {
  const frozen = new Float32Array(1 << 16).map((_, i) => i % 251);
  const trained = new Float32Array(1 + ((step * 7919) % (1 << 17))).fill(step);
  return {
    metadata: { step, metrics: { loss: ((step * 37) % 101) / 100 } },
    tensors: [
      { name: "frozen", dtype: "float32", shape: [frozen.length], data: frozen },
      { name: "trained", dtype: "float32", shape: [trained.length], data: trained },
      { name: "step", dtype: "int64", shape: [], data: new BigInt64Array([BigInt(step)]), group: "optimizer" },
    ],
  };
}

if (dir) {
  const manager = await CheckpointManager.open(dir, { ...POLICY, incremental: mode === "incremental" });
  const last = (await manager.list()).at(-1)?.step ?? 0;
  writeSync(1, `ready ${last}\n`);
  for (let step = last + 1;; step++) {
    await manager.save(crashCheckpoint(step));
    writeSync(1, `committed ${step}\n`);
  }
}
