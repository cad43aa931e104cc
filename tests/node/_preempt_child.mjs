// The Node preemption child: a loop that saves every 1000 steps and, on SIGTERM or SIGINT, saves
// the step it is at through the package's Preemption, drains and exits (143 / 130). Prints
// "ready N" (resumed from N) once listening.
import process from "node:process";
import { writeSync } from "node:fs";
import { CheckpointManager, Preemption } from "@ckpt/ckpt";

const [dir] = process.argv.slice(2);
const preemption = Preemption.listen();
const manager = await CheckpointManager.open(dir, { maxToKeep: 2 });
const start = ((await manager.latest())?.metadata.step ?? 0) + 1;
writeSync(1, `ready ${start - 1}\n`);
for (let step = start;; step++) {
  const tensors = [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([step]) }];
  if (step % 1000 === 0 || preemption.reached(step)) manager.save({ metadata: { step }, tensors });
  if (preemption.reached(step)) {
    await preemption.stop([manager], { onDrained: (status) => writeSync(1, `drained ${step} ${status}\n`) });
  }
  await new Promise((r) => setTimeout(r, 1));
}
