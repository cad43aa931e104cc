// The fuzzer, for long runs:
//   deno task fuzz --minutes N [--seed S] [--target T] [--out DIR] [--jobs J] [--depth fast|thorough]
// Targets take turns; every failing input is saved under DIR (tests/fuzz/failures by default)
// with a name that regenerates it: `--seed S --target T --iteration I` runs exactly that input
// (with the same readers: the reader set is drawn from the iteration's own PRNG).
// `--jobs J` runs J processes, process k taking iterations k, k + J, k + 2J, …, so one run uses
// every core; `--depth fast` (the default here) gives each input the cheap readers and samples the
// expensive ones, `thorough` runs every reader on every input (see `Depth` in _harness.ts).
// Prints a summary per target and exits 1 if anything failed.
import {
  check,
  type Depth,
  type Failure,
  makeCase,
  makeSeeds,
  newStats,
  saveFailure,
  type Stats,
  type Target,
  TARGETS,
} from "./_harness.ts";

function arg(name: string): string | undefined {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Deno.args[i + 1] : undefined;
}

const minutes = Number(arg("minutes") ?? 1);
const seed = Number(arg("seed") ?? Math.floor(Math.random() * 2 ** 31));
const only = arg("target");
const iteration = arg("iteration");
const out = arg("out") ?? new URL("./failures", import.meta.url).pathname;
const jobs = Number(arg("jobs") ?? 1);
const shard = Number(arg("shard") ?? 0); // set by the parent of a --jobs run
const depth = (arg("depth") ?? "fast") as Depth;
const targets = (only ? only.split(",") : [...TARGETS]) as Target[];
for (const t of targets) {
  if (!TARGETS.includes(t)) {
    throw new TypeError(`Unknown target ${JSON.stringify(t)}: use one of ${TARGETS.join(", ")}`);
  }
}
if (!(minutes > 0)) throw new RangeError("--minutes must be a positive number");
if (!(Number.isInteger(jobs) && jobs >= 1)) throw new RangeError("--jobs must be a positive integer");
if (depth !== "fast" && depth !== "thorough") throw new TypeError('--depth must be "fast" or "thorough"');

interface Summary {
  seed: number;
  seconds: number;
  peakRss: number;
  depth: Depth;
  jobs: number;
  stats: Record<string, Stats>;
}

/** Runs `jobs` child processes, each on its own share of the iterations, and merges their summaries. */
async function runJobs(): Promise<{ summary: Summary; failed: boolean }> {
  const self = new URL(import.meta.url).pathname;
  const children = Array.from({ length: jobs }, (_, k) =>
    new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "--allow-read", "--allow-write", "--allow-env", self],
        ...["--minutes", String(minutes), "--seed", String(seed), "--depth", depth, "--out", out],
        ...(only ? ["--target", only] : []),
        ...["--jobs", String(jobs), "--shard", String(k)],
      ],
      stdout: "piped",
      stderr: "inherit",
    }).spawn());
  const summaries = await Promise.all(children.map(async (child, k) => {
    let last = "";
    let pending = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) {
        if (line.startsWith("{")) last = line;
        else if (line.startsWith("FAIL") || line.startsWith("  saved")) console.log(`[job ${k}] ${line}`);
      }
    }
    if (pending.startsWith("{")) last = pending;
    const status = await child.status;
    if (!last) throw new Error(`fuzz job ${k} ended (code ${status.code}) without a summary`);
    return { summary: JSON.parse(last) as Summary, ok: status.success };
  }));
  const stats = Object.fromEntries(targets.map((t) => [t, newStats()])) as Record<string, Stats>;
  for (const { summary } of summaries) {
    for (const [t, s] of Object.entries(summary.stats)) {
      for (const [k, v] of Object.entries(s)) (stats[t]![k as keyof Stats] as number) += v;
    }
  }
  return {
    summary: {
      seed,
      seconds: Math.max(...summaries.map((s) => s.summary.seconds)),
      peakRss: Math.max(...summaries.map((s) => s.summary.peakRss)),
      depth,
      jobs,
      stats,
    },
    failed: summaries.some((s) => !s.ok),
  };
}

/** One process's share: iterations shard, shard + jobs, … until the deadline. */
async function runShard(): Promise<{ summary: Summary; failed: boolean }> {
  const seeds = await makeSeeds();
  const tmp = await Deno.makeTempDir({ prefix: "ckpt-fuzz-" });
  const stats = Object.fromEntries(targets.map((t) => [t, newStats()])) as Record<Target, Stats>;
  let failed = 0;
  let peakRss = 0;

  async function one(t: Target, i: number): Promise<Failure[]> {
    let c, failures: Failure[], accepted: boolean;
    try {
      c = makeCase(seeds, t, seed, i);
      ({ failures, accepted } = await check(c, tmp, depth));
    } catch (e) {
      // The harness's own bug (a mutator, the oracle): report it and go on with the run.
      failed++;
      console.log(`FAIL ${t} iteration ${i}: harness error ${e instanceof Error ? e.stack : String(e)}`);
      return [];
    }
    const s = stats[t];
    s.inputs++;
    if (accepted) s.accepted++;
    for (const kind of new Set(failures.map((f) => f.kind))) s[kind]++;
    if (failures.length) {
      failed++;
      const where = await saveFailure(out, c, seed, failures);
      console.log(`FAIL ${t} iteration ${i}: ${failures.map((f) => `${f.kind} (${f.reader}) ${f.detail}`).join("; ")}`);
      console.log(`  saved ${where}.*  (${c.how})`);
    }
    return failures;
  }

  const started = Date.now();
  try {
    if (iteration !== undefined) {
      for (const t of targets) await one(t, Number(iteration));
    } else {
      const deadline = started + minutes * 60_000;
      let lastReport = started;
      for (let i = shard; Date.now() < deadline; i += jobs) {
        for (const t of targets) await one(t, i);
        if (i % 50 === shard % 50) peakRss = Math.max(peakRss, Deno.memoryUsage().rss);
        if (jobs === 1 && Date.now() - lastReport > 60_000) {
          lastReport = Date.now();
          const n = Object.values(stats).reduce((a, s) => a + s.inputs, 0);
          console.log(`${((Date.now() - started) / 60_000).toFixed(1)} min: ${n} inputs, ${failed} failing`);
        }
      }
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
  const seconds = (Date.now() - started) / 1000;
  return { summary: { seed, seconds, peakRss, depth, jobs, stats }, failed: failed > 0 };
}

const { summary, failed } = jobs > 1 && arg("shard") === undefined && iteration === undefined
  ? await runJobs()
  : await runShard();
if (arg("shard") === undefined) {
  const { seconds, peakRss, stats } = summary;
  console.log(
    `\nseed ${seed}, ${seconds.toFixed(0)} s, ${jobs} job${jobs > 1 ? "s" : ""}, depth ${depth}, peak RSS ${
      (peakRss / 2 ** 20).toFixed(0)
    } MiB per process`,
  );
  console.log("| target | inputs | accepted | non-domain errors | hangs | silent corruptions | readers disagree |");
  console.log("| --- | --: | --: | --: | --: | --: | --: |");
  for (const [t, s] of Object.entries(stats)) {
    console.log(
      `| ${t} | ${s.inputs} | ${s.accepted} | ${s["non-domain error"]} | ${s.hang} | ${s["silent corruption"]} | ${
        s["readers disagree"]
      } |`,
    );
  }
}
console.log(JSON.stringify(summary));
Deno.exit(failed ? 1 : 0);
