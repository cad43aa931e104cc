/**
 * ckpt's sharded checkpoints against PyTorch DCP (`torch.distributed.checkpoint`), each writer and
 * reader a separate process: ckpt's `saveShard` / `readShards` (bench/_shard_one.ts), and DCP's
 * `dcp.save` / `dcp.load` on ranks of a gloo process group on the CPU (bench/_dcp_one.py, from the
 * peers' environment that `scripts/peers_venv.sh` builds from the local wheels). Both hold the
 * same 32 float32 tensors (`--mib` in all), split the same way: DCP's rank i holds exactly the
 * tensors ckpt's plan gives writer i (ckpt's writers each hold the whole replica, as data-parallel
 * workers do, and the planner picks each one's share). Three scenarios: saved by 2 and loaded by
 * 2, saved by 2 and loaded by 1, saved by 1 and loaded by 2 (the last two: each library's own
 * resharding). Durability is equal: ckpt's save fsyncs its parts, the manifest and their
 * directories; DCP's FileSystemWriter fsyncs its files and .metadata but no directory, so its
 * rank 0 fsyncs the checkpoint's directory and its parent, inside the timing. ckpt's load verifies
 * every tensor's SHA-256; DCP stores no checksum, so its load verifies nothing.
 *
 * Processes are started and made ready (imports, process group, tensors built) before the clock;
 * the clock runs from the start signal until the last process reports. Trials are interleaved
 * (each method and scenario once per trial); medians; each row's ratio against DCP's same row;
 * the peak resident memory a process adds during its operation, against its share of the bytes;
 * the load average; the physical limit of the save (a raw durable write of the same bytes, or
 * SHA-256 over them spread over the cores) and of the load (a raw read into fresh memory, or
 * the hash).
 *
 *   deno task bench:shard-dcp [--mib 512] [--trials 3] [--dir DIR] [--scenarios 2:2,2:1,1:2]
 *
 * (`--scenarios`: savers:loaders pairs; the physical limits are printed for the first.)
 *
 * @module
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { deleteShardedCheckpoint, planShards, slicesOf } from "../src/shard/mod.ts";
import { replicaOf } from "./_shard_data.ts";
import { peersPython } from "./_peers_env.ts";
import { median, medianWorst, type Run, runProcesses } from "./_shard_procs.ts";
import { fileBounds, limitLine, loadAverage } from "./_bounds.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mib: { type: "string", default: "512" },
    trials: { type: "string", default: "3" },
    dir: { type: "string" },
    scenarios: { type: "string", default: "2:2,2:1,1:2" },
  },
});
const mib = Number(values.mib);
const trials = Number(values.trials);
if (!Number.isSafeInteger(mib) || mib < 1) {
  throw new RangeError(`Invalid --mib ${values.mib}: expected a whole number ≥ 1`);
}
if (!Number.isSafeInteger(trials) || trials < 1) {
  throw new RangeError(`Invalid --trials ${values.trials}: expected a whole number ≥ 1`);
}
const env = await peersPython();
if ("error" in env) {
  console.error(env.error);
  Deno.exit(2);
}
const python = env.python;
if (values.dir) await Deno.mkdir(values.dir, { recursive: true });
const dir = await Deno.realPath(values.dir ?? await Deno.makeTempDir({ prefix: "ckpt-shard-dcp-" }));
const ONE = new URL("./_shard_one.ts", import.meta.url).pathname;
const DCP_ONE = new URL("./_dcp_one.py", import.meta.url).pathname;
const bytes = mib * 2 ** 20;

// The tensors ckpt's planner gives each of `count` writers; DCP's ranks hold the same.
const replica = replicaOf(1).map((t) => t.name);
const per = replicaOf(mib)[0]!.shape[0]!;
const spec = replica.map((name) => ({ name, dtype: "float32" as const, shape: [per] }));
function namesOf(count: number, index: number): string[] {
  const plan = planShards(Array.from({ length: count }, () => spec));
  return slicesOf(plan, index).map((s) => {
    if (s.rows[0] !== 0 || s.rows[1] !== per) throw new Error(`the plan splits ${s.name}: DCP rows cannot follow`);
    return s.name;
  });
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

type Method = "ckpt" | "DCP";
const ckptRun = (op: "save" | "load", address: string, count: number, saveId: string) =>
  runProcesses(
    `ckpt ${op}`,
    Array.from({ length: count }, (_, index) => [Deno.execPath(), [
      "run",
      "-A",
      ONE,
      JSON.stringify({ op, address, index, count, saveId, mib }),
    ]]),
  );
function dcpRun(op: "save" | "load", at: string, count: number): Promise<Run> {
  const port = freePort();
  return runProcesses(
    `DCP ${op}`,
    Array.from({ length: count }, (_, index) => [python, [
      DCP_ONE,
      JSON.stringify({ op, dir: at, index, count, port, per, names: namesOf(count, index), sync_dir: true }),
    ]]),
  );
}

const scenarios = values.scenarios!.split(",").map((pair) => {
  const [s, l] = pair.split(":").map(Number);
  if (!Number.isSafeInteger(s) || !Number.isSafeInteger(l) || s! < 1 || l! < 1) {
    throw new RangeError(`Invalid --scenarios ${values.scenarios}: expected savers:loaders pairs such as 2:2,2:1,1:2`);
  }
  return [s!, l!] as [number, number];
});
const methods: Method[] = ["ckpt", "DCP"];
const results = new Map<string, { save: Run; load: Run }[]>();
const key = (m: Method, [s, l]: [number, number]) => `${m} ${s}→${l}`;
console.log(`load average at start: ${loadAverage()}`);
console.log(env.versions);
for (let t = 0; t < trials; t++) {
  // Interleaved: every scenario and method once per trial, so a change in the machine's load touches all alike.
  for (const sc of scenarios) {
    for (const m of methods) {
      const at = join(dir, `${m}-${sc[0]}-${sc[1]}-${t}`);
      let save: Run, load: Run;
      if (m === "ckpt") {
        save = await ckptRun("save", `${at}.ckpt`, sc[0], `d${sc[0]}t${t}`);
        load = await ckptRun("load", `${at}.ckpt`, sc[1], `d${sc[0]}t${t}`);
        await deleteShardedCheckpoint(`${at}.ckpt`);
      } else {
        save = await dcpRun("save", at, sc[0]);
        load = await dcpRun("load", at, sc[1]);
        await Deno.remove(at, { recursive: true });
      }
      results.set(key(m, sc), [...(results.get(key(m, sc)) ?? []), { save, load }]);
    }
  }
}

// The physical limits: a raw durable write of the same bytes, a raw read of them into fresh memory, the hash.
const { saveBound, loadBound } = await fileBounds(dir, bytes);

const met = (ratio: number) => ratio >= 1 ? "**met**" : "not met";
const mibps = (ms: number) => `${(mib / (ms / 1000)).toFixed(0)} MiB/s`;
const rows: string[] = [];
const ckptMs = new Map<string, { save: number; load: number }>();
for (const sc of scenarios) {
  const dcpRuns = results.get(key("DCP", sc))!;
  const dcp = { save: median(dcpRuns.map((r) => r.save.ms)), load: median(dcpRuns.map((r) => r.load.ms)) };
  for (const m of methods) {
    const runs = results.get(key(m, sc))!;
    const save = median(runs.map((r) => r.save.ms)), load = median(runs.map((r) => r.load.ms));
    if (m === "ckpt") ckptMs.set(`${sc}`, { save, load });
    const mem = (op: "save" | "load", n: number) =>
      `${medianWorst(runs.map((r) => r[op]), "addedMiB").toFixed(0)} of ${
        medianWorst(runs.map((r) => r[op]), "peakMiB").toFixed(0)
      } MiB (share ${(mib / n).toFixed(0)} MiB)`;
    rows.push(
      `| ${sc[0]} → ${sc[1]} | ${m === "ckpt" ? "ckpt `saveShard` / `readShards`" : "DCP `dcp.save` / `dcp.load`"} | ${
        mibps(save)
      } | ${(dcp.save / save).toFixed(2)}× | ${mibps(load)}${
        m === "DCP" ? " (no verify: no checksum)" : " (verified)"
      } | ${(dcp.load / load).toFixed(2)}× | ${
        m === "DCP" ? "" : `save ${met(dcp.save / save)}, load ${met(dcp.load / load)}`
      } | ${mem("save", sc[0])} | ${mem("load", sc[1])} |`,
    );
  }
}
console.log(
  `\n${mib} MiB of float32 (32 tensors) in ${dir}, one process per writer and reader, medians of ${trials} trial${
    trials === 1 ? "" : "s"
  }, interleaved; load average ${loadAverage()}`,
);
console.log(
  "| saved by → loaded by | method | save (durable) | × DCP | load | × DCP | target: ckpt ≥ 1.0× DCP | " +
    "save: peak RSS added (of peak), worst process | load: the same |",
);
console.log("| :-- | :-- | --: | --: | --: | --: | :-- | --: | --: |\n" + rows.join("\n"));
const [savers, loaders] = scenarios[0]!;
const first = ckptMs.get(`${scenarios[0]}`)!;
console.log(limitLine(`a save by ${savers}`, saveBound, first.save / 1000, "ckpt ≥ 1.0× DCP"));
console.log(limitLine(`a load + verify by ${loaders}`, loadBound, first.load / 1000, "ckpt ≥ 1.0× DCP"));
console.log(
  "× DCP: the row's speed over DCP's in the same scenario (above 1.00: ckpt faster). " +
    "ckpt's load verifies every tensor's SHA-256 against the manifest; DCP stores no checksum and verifies nothing. " +
    "Both saves are durable: ckpt fsyncs its parts, manifest and directories; DCP fsyncs its files and .metadata " +
    "(sync_files=True) and, added here inside the timing, rank 0 fsyncs the checkpoint's directory and its parent.",
);
if (!values.dir) await Deno.remove(dir, { recursive: true });
