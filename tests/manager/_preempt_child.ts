// A child for preemption_test.ts: a training loop that saves every 10 steps through a manager
// and, told to stop, saves the step it is at and drains. Modes:
// - `loop DIR`: prints "step N" each step (5 ms apart) and "saving N" at the preemption.
// - `stuck`: on a notice, drains a saver that never finishes (the grace period must end it).
// - `failing`: on a notice, drains a saver whose close fails.
import { CheckpointManager } from "../../src/manager/mod.ts";
import { Preemption } from "../../src/manager/preemption.ts";
import { makeCheckpoint } from "./_helpers.ts";

const [mode, dir] = Deno.args;
const out = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(line + "\n"));
const preemption = Preemption.listen({
  gracePeriod: Number(Deno.env.get("GRACE") ?? 25_000),
  secondSignal: (Deno.env.get("SECOND") ?? "exit") as "exit",
  log: (m) => out(`log ${m}`),
});
if (mode === "loop") {
  const manager = await CheckpointManager.open(dir!, { maxToKeep: 2 });
  const start = (await manager.list()).at(-1)?.step ?? 0;
  out(`resumed ${start}`);
  for (let step = start + 1;; step++) {
    await new Promise((r) => setTimeout(r, 5)); // a training step
    out(`step ${step}`);
    if (step % 10 === 0 || preemption.reached(step)) {
      if (preemption.reached(step)) out(`saving ${step}`);
      manager.save(makeCheckpoint(step, { trained: 4096 })); // not awaited: stop() drains it
    }
    if (preemption.reached(step)) await preemption.stop([manager], { onDrained: (s) => out(`drained ${s}`) });
  }
} else {
  out("ready");
  while (!preemption.reached()) await new Promise((r) => setTimeout(r, 5));
  const saver = mode === "stuck"
    ? { flush: () => new Promise<void>(() => {}), close: () => new Promise<void>(() => {}) }
    : { flush: () => Promise.resolve(), close: () => Promise.reject(new Error("disk full")) };
  out("stopping");
  setInterval(() => {}, 1000); // the pending close alone would not keep the process alive
  await preemption.stop([saver]);
}
