/**
 * Sharded save and load throughput with 1, 2 and 4 writers (and readers), each a separate
 * process, data-parallel (every writer holds the whole replica; the planner gives each a share),
 * to a directory or to `s3://` (the AWS_* variables name the endpoint). Each process builds its
 * data before the clock starts; a save is timed from the start signal until the committer
 * returns (parts durable, manifest committed), a load from the start signal until the last reader
 * has its share, verified. Medians over the trials, with the MiB/s and the speed-up over one
 * writer; the CPU time is summed over the processes; and each writer's memory: how much its
 * peak resident memory rose during its operation (the peak is reset at the start signal) against
 * its share of the bytes, the worst process of each trial. Where one writer is CPU-bound (with
 * `--no-ffi`, which runs every process with `--deny-ffi` so that hashing and I/O take
 * JavaScript's and Deno's own paths, or to `s3://`, where one writer's HTTP stream is the bound)
 * the target is 2 writers ≥ 1.5× one. Sharded parts take no gzip or bytegroup (docs/sharding.md:
 * they are uncompressed binary files, for their random access), so those modes have no row.
 *
 *   deno task bench:shard [--mib 512] [--writers 1,2,4] [--trials 3] [--target DIR|s3://bucket/prefix] [--no-ffi]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { deleteShardedCheckpoint } from "../src/shard/mod.ts";
import { median, medianWorst, type Run, runProcesses } from "./_shard_procs.ts";
import { fileBounds, limitLine, loadAverage } from "./_bounds.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mib: { type: "string", default: "512" },
    writers: { type: "string", default: "1,2,4" },
    trials: { type: "string", default: "3" },
    target: { type: "string" },
    "no-ffi": { type: "boolean", default: false },
  },
});
const mib = Number(values.mib);
const counts = values.writers!.split(",").map(Number);
const trials = Number(values.trials);
const target = values.target ?? await Deno.makeTempDir({ prefix: "ckpt-shard-bench-" });
const ONE = new URL("./_shard_one.ts", import.meta.url).pathname;

const run = (op: "save" | "load", address: string, count: number, saveId: string): Promise<Run> =>
  runProcesses(
    `${op}`,
    Array.from({ length: count }, (_, index) => [Deno.execPath(), [
      "run",
      "-A",
      ...(values["no-ffi"] ? ["--deny-ffi"] : []),
      ONE,
      JSON.stringify({ op, address, index, count, saveId, mib }),
    ]]),
  );

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
// One writer is CPU-bound without FFI and to S3 (target: 2 writers ≥ 1.5× one); in a local directory
// with FFI it is disk-bound (target: at the disk, the raw durable write under the table).
const cpuBound = values["no-ffi"] || target.startsWith("s3://");
let first: { save: number; load: number } | undefined;
for (const n of counts) {
  const runs = results.get(n)!;
  const save = median(runs.map((r) => r.save.ms)), load = median(runs.map((r) => r.load.ms));
  first ??= { save, load };
  const cell = (ms: number, one: number, cpu: number) =>
    `${(mib / (ms / 1000)).toFixed(0)} MiB/s (${(one / ms).toFixed(2)}×, CPU ${cpu.toFixed(0)} ms)`;
  const mem = (op: "save" | "load") =>
    `${medianWorst(runs.map((r) => r[op]), "addedMiB").toFixed(0)} of ${
      medianWorst(runs.map((r) => r[op]), "peakMiB").toFixed(0)
    } MiB`;
  rows.push(
    `| ${n} | ${cell(save, first.save, median(runs.map((r) => r.save.cpuMs)))} | ${
      cell(load, first.load, median(runs.map((r) => r.load.cpuMs)))
    } | ${(mib / n).toFixed(0)} MiB | ${mem("save")} | ${mem("load")} | ${
      cpuBound && n === 2
        ? `save ${first.save / save >= 1.5 ? "**met**" : "not met"}, load ${
          first.load / load >= 1.5 ? "**met**" : "not met"
        }`
        : ""
    } |`,
  );
}
console.log(
  `${mib} MiB of float32 to ${target}, medians of ${trials} trials, processes${
    values["no-ffi"] ? ", without FFI (--deny-ffi: hashing and I/O in JavaScript and Deno's own calls)" : ""
  }; load average ${loadAverage()}`,
);
console.log(
  "| writers = readers | save | load + verify | share per writer | save: peak RSS added (of peak), worst writer | load: the same | " +
    `target: ${cpuBound ? "2 ≥ 1.5× 1 (one writer CPU-bound)" : "at the disk (below)"} |\n` +
    "| --: | --: | --: | --: | --: | --: | :-- |\n" + rows.join("\n"),
);
if (!target.startsWith("s3://")) {
  const { saveBound, loadBound } = await fileBounds(target, mib * 2 ** 20);
  const best = (op: "save" | "load") => Math.min(...counts.map((n) => median(results.get(n)!.map((r) => r[op].ms))));
  console.log(limitLine("a save (fastest row)", saveBound, best("save") / 1000, "at the disk where disk-bound"));
  console.log(
    limitLine("a load + verify (fastest row)", loadBound, best("load") / 1000, "at the disk where disk-bound"),
  );
}
console.log(
  "Target where one writer is CPU-bound (--no-ffi, an s3:// target): 2 writers ≥ 1.5× one. " +
    "Peak RSS added: the most a process's resident memory rose during its operation over what it held at the start " +
    "signal (each writer already holds the whole replica, as a data-parallel worker does).",
);
if (!values.target) await Deno.remove(target, { recursive: true });
