/**
 * Time from SIGTERM to the exit of a process whose newest checkpoint is durable, against a plain
 * save of the same state plus one training step, measured in the same child process (the
 * issue's target: at most 1.2x). Each child builds a state of the given size, times a plain
 * `CheckpointManager.save` of it and a "training step" (a pass over every tensor), then trains
 * until the parent sends SIGTERM; `Preemption` saves the step it is at (off the every-N
 * interval), drains and exits 143. Medians of `--runs` children per size.
 *
 *   deno run -A bench/preempt_compare.ts                     # 18 and 256 MiB, 5 runs each
 *   deno run -A bench/preempt_compare.ts --sizes 1 --runs 1  # exercise it quickly
 *
 * @module
 */
import { parseArgs } from "node:util";
import { CheckpointManager } from "../src/manager/mod.ts";
import { Preemption } from "../src/manager/preemption.ts";
import type { TensorInput } from "../src/format/types.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    sizes: { type: "string", default: "18,256" },
    runs: { type: "string", default: "5" },
    child: { type: "string" },
    dir: { type: "string" },
  },
});

const MiB = 2 ** 20;
const out = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(line + "\n"));

/** A state of `mib` MiB in 16 float32 tensors. */
function state(mib: number): TensorInput[] {
  const per = Math.max(1, Math.floor((mib * MiB) / 16 / 4));
  return Array.from({ length: 16 }, (_, i) => ({
    name: `layer${i}/kernel`,
    dtype: "float32" as const,
    shape: [per],
    data: new Float32Array(per).map((_, j) => Math.sin(i + j)),
  }));
}

/** One "training step": a pass over every tensor. */
function step(tensors: TensorInput[]): void {
  for (const t of tensors) {
    const d = t.data as Float32Array;
    for (let i = 0; i < d.length; i += 1) d[i] = d[i]! * 0.999 + 0.001;
  }
}

async function child(mib: number, dir: string): Promise<void> {
  const tensors = state(mib);
  const manager = await CheckpointManager.open(dir, { maxToKeep: 2 });
  let t = performance.now();
  await manager.save({ metadata: { step: 0 }, tensors });
  const plain = performance.now() - t;
  t = performance.now();
  step(tensors);
  const stepMs = performance.now() - t;
  using preemption = Preemption.listen({ watchParent: false, log: () => {} });
  out(`ready ${plain.toFixed(1)} ${stepMs.toFixed(1)}`);
  for (let n = 1;; n++) {
    step(tensors);
    if (n % 1000 === 0 || preemption.reached(n)) await manager.save({ metadata: { step: n }, tensors });
    if (preemption.reached(n)) await preemption.stop([manager]);
    await new Promise((r) => setTimeout(r, 0));
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function parent(): Promise<void> {
  const sizes = values.sizes.split(",").map(Number);
  const runs = Number(values.runs);
  out(
    `preemption: SIGTERM to durable exit vs plain save + one step (${Deno.build.os}, ${navigator.hardwareConcurrency} cores)`,
  );
  for (const mib of sizes) {
    const exits: number[] = [];
    const bases: number[] = [];
    for (let r = 0; r < runs; r++) {
      const dir = await Deno.makeTempDir({ prefix: "ckpt_bench_preempt_" });
      try {
        const proc = new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", import.meta.filename!, "--child", String(mib), "--dir", dir],
          stdout: "piped",
        }).spawn();
        const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
        let text = "";
        while (!text.includes("\n")) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`the child for ${mib} MiB ended early: ${text}`);
          text += value;
        }
        const [, plain, stepMs] = text.split("\n")[0]!.split(" ").map(Number) as [number, number, number];
        await new Promise((r) => setTimeout(r, 200)); // training
        const sent = performance.now();
        proc.kill("SIGTERM");
        const { code } = await proc.status;
        const exit = performance.now() - sent;
        if (code !== 143) throw new Error(`the child for ${mib} MiB exited ${code}, not 143`);
        await reader.cancel().catch(() => {});
        exits.push(exit);
        bases.push(plain + stepMs);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }
    const e = median(exits);
    const b = median(bases);
    out(
      `${String(mib).padStart(4)} MiB  SIGTERM→exit ${e.toFixed(0)} ms  plain save + step ${b.toFixed(0)} ms  ratio ${
        (e / b).toFixed(2)
      } (target <= 1.2)`,
    );
  }
}

if (values.child !== undefined) await child(Number(values.child), values.dir!);
else await parent();
