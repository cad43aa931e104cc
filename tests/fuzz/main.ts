// The fuzzer, for long runs:
//   deno task fuzz --minutes N [--seed S] [--target T] [--out DIR] [--jobs J] [--depth fast|thorough]
// Targets take turns; every failing input is saved under DIR (tests/fuzz/failures by default)
// with a name that regenerates it: `--seed S --target T --iteration I` runs exactly that input
// (with the same readers: the reader set is drawn from the iteration's own PRNG).
// `--jobs J` runs J processes, process k taking iterations k, k + J, k + 2J, …, so one run uses
// every core; `--depth fast` (the default here) gives each input the cheap readers and samples the
// expensive ones, `thorough` runs every reader on every input (see `Depth` in _harness.ts).
// Allocation beyond the caps: every input is decoded under small caps (FUZZ_LIMITS), and each
// process checks its peak RSS (/proc/self/status, reset through /proc/self/clear_refs: Linux, and
// Deno allows it only with --allow-all) after every batch of 32 iterations; a batch whose peak rose
// more than ALLOCATION_SLACK above where it started is replayed input by input, and the input that
// did it is saved like any other failure.
// Prints a summary per target (inputs, inputs/s, findings) and exits 1 if anything failed.
import {
  ALLOCATION_SLACK,
  type Case,
  check,
  type Depth,
  type Failure,
  fuzzTempDir,
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
  /** Whether peak RSS was checked per batch (Linux). */
  watchMemory: boolean;
  jobs: number;
  stats: Record<string, Stats>;
}

/** Runs `jobs` child processes, each on its own share of the iterations, and merges their summaries. */
async function runJobs(): Promise<{ summary: Summary; failed: boolean }> {
  const self = new URL(import.meta.url).pathname;
  const children = Array.from({ length: jobs }, (_, k) =>
    new Deno.Command(Deno.execPath(), {
      args: [
        // All access: Deno reads /proc/self (the memory check below) only with --allow-all.
        ...["run", "--allow-all", self],
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
        else if (/^(FAIL| {2}saved|[0-9.]+ min:)/.test(line)) console.log(`[job ${k}] ${line}`);
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
      watchMemory: summaries.every((s) => s.summary.watchMemory),
    },
    failed: summaries.some((s) => !s.ok),
  };
}

/** This process's resident and peak resident bytes (Linux), or undefined where /proc is not there. */
function rss(): { now: number; peak: number } | undefined {
  try {
    const status = Deno.readTextFileSync("/proc/self/status");
    const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(status)?.[1]) * 1024;
    return { now: kib("VmRSS"), peak: kib("VmHWM") };
  } catch {
    return undefined;
  }
}

/** Resets the peak resident size to the current one (Linux 4.0+); false where that is not possible. */
function resetPeak(): boolean {
  try {
    Deno.writeTextFileSync("/proc/self/clear_refs", "5");
    return true;
  } catch {
    return false;
  }
}

/** Iterations per batch: the peak RSS is checked after each. */
const BATCH = 32;

/** One process's share: iterations shard, shard + jobs, … until the deadline. */
async function runShard(): Promise<{ summary: Summary; failed: boolean }> {
  const seeds = await makeSeeds();
  const tmp = await fuzzTempDir("ckpt-fuzz-");
  const stats = Object.fromEntries(targets.map((t) => [t, newStats()])) as Record<Target, Stats>;
  let failed = 0;
  let peakRss = 0;
  // Allocation beyond the caps: each batch's peak RSS against its starting RSS; a batch that rose
  // more than ALLOCATION_SLACK is replayed input by input to find the one that did it.
  const watchMemory = rss() !== undefined && resetPeak();

  async function report(t: Target, c: Case, failures: Failure[]) {
    failed++;
    const where = await saveFailure(out, c, seed, failures);
    console.log(
      `FAIL ${t} iteration ${c.iteration}: ${failures.map((f) => `${f.kind} (${f.reader}) ${f.detail}`).join("; ")}`,
    );
    console.log(`  saved ${where}.*  (${c.how})`);
  }

  function harnessError(t: Target, i: number, e: unknown) {
    // The harness's own bug (a mutator, the oracle): report it and go on with the run.
    failed++;
    console.log(`FAIL ${t} iteration ${i}: harness error ${e instanceof Error ? e.stack : String(e)}`);
  }

  async function one(t: Target, i: number): Promise<void> {
    let c: Case, failures: Failure[], accepted: boolean;
    try {
      c = makeCase(seeds, t, seed, i);
      ({ failures, accepted } = await check(c, tmp, depth));
    } catch (e) {
      return harnessError(t, i, e);
    }
    const s = stats[t];
    s.inputs++;
    if (accepted) s.accepted++;
    for (const kind of new Set(failures.map((f) => f.kind))) s[kind]++;
    if (failures.length) await report(t, c, failures);
  }

  async function replay(batch: number[]): Promise<void> {
    for (const i of batch) {
      for (const t of targets) {
        resetPeak();
        const before = rss()!.now;
        let c: Case;
        try {
          c = makeCase(seeds, t, seed, i);
          await check(c, tmp, depth);
        } catch {
          continue; // reported as a harness error on its first run
        }
        const rise = rss()!.peak - before;
        if (rise > ALLOCATION_SLACK) {
          stats[t]["allocation beyond caps"]++;
          await report(t, c, [{
            kind: "allocation beyond caps",
            reader: "all",
            detail: `peak RSS rose ${(rise / 2 ** 20).toFixed(0)} MiB decoding one input under FUZZ_LIMITS`,
          }]);
        }
      }
    }
  }

  const started = Date.now();
  try {
    if (iteration !== undefined) {
      if (watchMemory) await replay([Number(iteration)]);
      for (const t of targets) await one(t, Number(iteration));
    } else {
      const deadline = started + minutes * 60_000;
      let lastReport = started;
      let batch: number[] = [];
      let batchStart = rss()?.now ?? 0;
      for (let i = shard; Date.now() < deadline; i += jobs) {
        for (const t of targets) await one(t, i);
        batch.push(i);
        if (batch.length < BATCH) continue;
        const m = rss();
        if (m) {
          peakRss = Math.max(peakRss, m.peak);
          if (watchMemory && m.peak - batchStart > ALLOCATION_SLACK) await replay(batch);
          if (watchMemory) resetPeak();
          batchStart = rss()!.now;
        }
        batch = [];
        if (Date.now() - lastReport > 60_000) {
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
  return { summary: { seed, seconds, peakRss, depth, jobs, stats, watchMemory }, failed: failed > 0 };
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
  console.log(
    "| target | inputs | inputs/s | accepted | non-domain errors | hangs | silent corruptions | readers disagree | " +
      "allocation beyond caps |",
  );
  console.log("| --- | --: | --: | --: | --: | --: | --: | --: | --: |");
  for (const [t, s] of Object.entries(stats)) {
    console.log(
      `| ${t} | ${s.inputs} | ${(s.inputs / seconds).toFixed(1)} | ${s.accepted} | ${
        s["non-domain error"]
      } | ${s.hang} | ${s["silent corruption"]} | ${s["readers disagree"]} | ${s["allocation beyond caps"]} |`,
    );
  }
  if (!summary.watchMemory) console.log("(peak RSS not checked per batch: needs Linux /proc/self/clear_refs)");
}
console.log(JSON.stringify(summary));
Deno.exit(failed ? 1 : 0);
