/**
 * Sharded save and load throughput with 1, 2 and 4 writers (and readers), each a separate
 * process, data-parallel (every writer holds the whole replica; the planner gives each a share),
 * to a directory or to `s3://` (the AWS_* variables name the endpoint). Each process builds its
 * data before the clock starts; a save is timed from the start signal until the committer
 * returns (parts durable, manifest committed), a load from the start signal until the last reader
 * has its share, verified. Medians over the trials, with the MiB/s and the speed-up over one
 * writer; the CPU time is summed over the processes.
 *
 *   deno run -A bench/shard_compare.ts [--mib 512] [--writers 1,2,4] [--trials 3] [--target DIR|s3://bucket/prefix]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { deleteShardedCheckpoint } from "../src/shard/mod.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mib: { type: "string", default: "512" },
    writers: { type: "string", default: "1,2,4" },
    trials: { type: "string", default: "3" },
    target: { type: "string" },
  },
});
const mib = Number(values.mib);
const counts = values.writers!.split(",").map(Number);
const trials = Number(values.trials);
const target = values.target ?? await Deno.makeTempDir({ prefix: "ckpt-shard-bench-" });
const ONE = new URL("./_shard_one.ts", import.meta.url).pathname;

interface Run {
  ms: number;
  cpuMs: number;
}

/** Starts `count` processes for `op`, waits until each is ready, signals them at once, collects their reports. */
async function run(op: "save" | "load", address: string, count: number, saveId: string): Promise<Run> {
  const children = Array.from({ length: count }, (_, index) =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", ONE, JSON.stringify({ op, address, index, count, saveId, mib })],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn());
  const lines = children.map((c) => c.stdout.pipeThrough(new TextDecoderStream()).getReader());
  const next = async (r: ReadableStreamDefaultReader<string>) => {
    let buf = "";
    for (;;) {
      const { value, done } = await r.read();
      if (done) throw new Error(`a ${op} process ended early`);
      buf += value;
      if (buf.includes("\n")) return buf.trim();
    }
  };
  for (const r of lines) if ((await next(r)) !== "ready") throw new Error("no ready line");
  const t0 = performance.now();
  const writers = children.map((c) => c.stdin.getWriter());
  await Promise.all(writers.map((w) => w.write(new TextEncoder().encode("go\n"))));
  const reports = await Promise.all(lines.map((r) => next(r).then((l) => JSON.parse(l) as Run)));
  const ms = performance.now() - t0;
  await Promise.all(children.map((c) => c.status));
  return { ms, cpuMs: reports.reduce((n, r) => n + r.cpuMs, 0) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows: string[] = [];
const results = new Map<number, { save: Run; load: Run }[]>(counts.map((n) => [n, []]));
for (let t = 0; t < trials; t++) {
  for (const n of counts) {
    // Trials interleaved: each count in turn, so a change in the machine's load touches all alike.
    const address = `${target}/bench-${n}-${t}.ckpt`;
    const save = await run("save", address, n, `b${n}t${t}`);
    const load = await run("load", address, n, `b${n}t${t}`);
    results.get(n)!.push({ save, load });
    await deleteShardedCheckpoint(address);
  }
}
let first: { save: number; load: number } | undefined;
for (const n of counts) {
  const runs = results.get(n)!;
  const save = median(runs.map((r) => r.save.ms)), load = median(runs.map((r) => r.load.ms));
  first ??= { save, load };
  const cell = (ms: number, one: number, cpu: number) =>
    `${(mib / (ms / 1000)).toFixed(0)} MiB/s (${(one / ms).toFixed(2)}×, CPU ${cpu.toFixed(0)} ms)`;
  rows.push(
    `| ${n} | ${cell(save, first.save, median(runs.map((r) => r.save.cpuMs)))} | ${
      cell(load, first.load, median(runs.map((r) => r.load.cpuMs)))
    } |`,
  );
}
console.log(`${mib} MiB of float32 to ${target}, medians of ${trials} trials, processes`);
console.log("| writers = readers | save | load + verify |\n| --: | --: | --: |\n" + rows.join("\n"));
if (!values.target) await Deno.remove(target, { recursive: true });
