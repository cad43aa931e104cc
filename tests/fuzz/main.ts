// The fuzzer, for long runs: `deno task fuzz --minutes N [--seed S] [--target T] [--out DIR]`.
// Targets take turns; every failing input is saved under DIR (tests/fuzz/failures by default)
// with a name that regenerates it: `--seed S --target T --iteration I` runs exactly that input.
// Prints a summary per target and exits 1 if anything failed.
import {
  check,
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
const targets = (only ? only.split(",") : [...TARGETS]) as Target[];
for (const t of targets) {
  if (!TARGETS.includes(t)) {
    throw new TypeError(`Unknown target ${JSON.stringify(t)}: use one of ${TARGETS.join(", ")}`);
  }
}
if (!(minutes > 0)) throw new RangeError("--minutes must be a positive number");

const seeds = await makeSeeds();
const tmp = await Deno.makeTempDir({ prefix: "ckpt-fuzz-" });
const stats = Object.fromEntries(targets.map((t) => [t, newStats()])) as Record<Target, Stats>;
let failed = 0;
let peakRss = 0;

async function one(t: Target, i: number): Promise<Failure[]> {
  const c = makeCase(seeds, t, seed, i);
  const { failures, accepted } = await check(c, tmp);
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
    for (let i = 0; Date.now() < deadline; i++) {
      for (const t of targets) await one(t, i);
      if (i % 50 === 0) peakRss = Math.max(peakRss, Deno.memoryUsage().rss);
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
console.log(`\nseed ${seed}, ${seconds.toFixed(0)} s, peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB`);
console.log("| target | inputs | accepted | non-domain errors | hangs | silent corruptions | readers disagree |");
console.log("| --- | --: | --: | --: | --: | --: | --: |");
for (const [t, s] of Object.entries(stats)) {
  console.log(
    `| ${t} | ${s.inputs} | ${s.accepted} | ${s["non-domain error"]} | ${s.hang} | ${s["silent corruption"]} | ${
      s["readers disagree"]
    } |`,
  );
}
console.log(JSON.stringify({ seed, seconds, peakRss, stats }));
Deno.exit(failed ? 1 : 0);
