/**
 * Side by side, in one run: ckpt's binary save and load against `dd`, `np.savez`/`np.load`,
 * `torch.save`/`torch.load`, `openssl speed -evp sha256`, and the checkpointers an ML engineer
 * would pick instead: Orbax (`StandardCheckpointer`, `CheckpointManager`), PyTorch DCP
 * (`dcp.save`/`dcp.load`, `dcp.async_save`), safetensors (`save_file` with and without fsync +
 * rename, `load_file` with and without every page touched) and `tf.train.Checkpoint`
 * (write/read), on the same float32 tensors. The peers run in the environment
 * `scripts/peers_venv.sh` builds once from local wheels (`deno task peers:venv`; the run calls it
 * and prints the versions); without it their rows are left out, saying why, and the numpy/torch
 * rows use Debian's python3 where it has them. Each peer's save first runs one small save
 * elsewhere, as ckpt's rows do (`--warm`): the steady state of a loop that checkpoints
 * periodically. The asynchronous saves (Orbax, `dcp.async_save`, ckpt's `BackgroundWriter`)
 * also report how long `save()` blocked the caller, in a table of their own. What each peer
 * flushes and what it returns for a flipped bit is `deno task bench:peer-facts`
 * (bench/peer_facts.ts). Every method runs in its own process
 * (so each load reads into fresh memory), trials are interleaved (each method once per trial, in
 * a seeded random order of that trial's own), and the table gives medians and ratios against the
 * peer each target names.
 *
 * Two memory regimes decide these numbers on a VM: whether a write lands in page-cache pages the
 * kernel just freed (overwriting or recycling a file: "recycled") or in pages never used before
 * ("fresh": an atomic save's new file), and how fast the VM backs memory a process touches for
 * the first time (slow until the VM has touched it once). Each row names its page regime; a
 * probe before every round measures first-touch speed, and the report states it. ckpt's durable
 * saves take neither: where FFI is granted (every ckpt row runs with -A) they write around the
 * page cache ("direct", as `dd oflag=direct`, which has a row of its own), so the load rows read
 * every file through the cache once before their first trial.
 *
 * A third decides rows that use 2 MiB pages (numpy's arrays, ckpt's buffers where FFI is granted)
 * on a VM that hands free memory back to its host (virtio-balloon free page reporting: free
 * blocks of 2 MiB and more are reported about 2 s after they are freed, and the host drops
 * them): a huge page that lands on such a block is backed afresh by the host, at the slow
 * first-touch speed, while 4 KiB pages mostly come from smaller free blocks that were never
 * reported. So how fast a huge-page process runs depended on what ran before it and how long ago
 * (512 MiB touched in 2 MiB pages on this project's VM: mostly 56–69 ms right after another
 * such process, 435–692 ms after a 4 s pause, up to 1083 ms after other work). Every timed
 * process therefore follows a {@linkcode settle} step, which touches and frees more than the
 * method needs in 2 MiB pages: every method starts on memory the host backs, as on a machine
 * without such a balloon, and the report states how fast the step itself touched. What a method
 * needs is all it touches afresh: a load its tensors, a save its tensors and the new file's
 * page-cache pages, twice its size (with only its size settled, a save's tensors took the settled
 * memory and its page cache landed on memory the host had dropped: 1 GiB `dd` to a new file
 * then `mv`, which holds no tensors, 0.75–0.82 s either way, while a Deno process writing the
 * same 1 GiB of tensors the same way, one fdatasync at the end, took 0.57–2.31 s with its size
 * settled and 0.51–0.55 s with twice it).
 *
 *   deno task bench:compare [--sizes 512] [--trials 3] [--saves 4] [--dir DIR] [--only save,load,memory,peers,extra]
 *
 * The side-by-side scripts listed in `EXTRA` (the byte-grouped codec and JSON comparison,
 * `bench/codec_compare.ts`) run after these rows with the same `--trials`, but at least
 * {@linkcode CODEC_TRIALS} (its files are 4-32 MiB: a few milliseconds of noise move a ratio), so one
 * `deno task bench:compare` prints every row; `--only save,load,memory,peers` leaves them out
 * (and leaving out `peers` leaves out the peers' rows). Add a
 * script there to have it run too.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { peersPython } from "./_peers_env.ts";
import { type Bound, bound, hashPart, usableCores } from "./_bounds.ts";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "512" },
    trials: { type: "string", default: "3" },
    saves: { type: "string", default: "4" },
    dir: { type: "string" },
    only: { type: "string", default: "save,load,memory,peers,extra" },
  },
});
const sizes = values.sizes.split(",").map(Number);
const trials = Number(values.trials);
const parts = new Set(values.only.split(","));
const dir = values.dir ?? await Deno.makeTempDir({ dir: join(import.meta.dirname!, "..", "tmp"), prefix: "bench-" })
  .catch(() => Deno.makeTempDir({ prefix: "ckpt-bench-" }));
await Deno.mkdir(dir, { recursive: true });
const one = new URL("./_save_one.ts", import.meta.url).pathname;
const deno = Deno.execPath();
const MiB = 2 ** 20;

interface Run {
  seconds: number;
  /** For an asynchronous save: how long save() held the caller. */
  blocked?: number;
  peakRss?: number;
  baseRss?: number;
  /** CPU seconds of every thread of the process (what a load row reports). */
  cpuSeconds?: number;
}

/** Runs a command (with `env` added to this one's), polling its VmHWM (peak RSS) until it exits. */
async function runTimed(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ seconds: number; stdout: string; peak: number }> {
  const t0 = performance.now();
  const child = new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" }).spawn();
  let peak = 0;
  let done = false;
  const poll = (async () => {
    while (!done) {
      try {
        const m = /VmHWM:\s+(\d+) kB/.exec(await Deno.readTextFile(`/proc/${child.pid}/status`));
        if (m) peak = Math.max(peak, Number(m[1]) * 1024);
      } catch { /* exited */ }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const out = await child.output();
  done = true;
  await poll;
  const seconds = (performance.now() - t0) / 1000;
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`);
  return { seconds, stdout: new TextDecoder().decode(out.stdout), peak };
}

async function ckpt(
  op: string,
  mib: number,
  out: string,
  extra: string[] = [],
  env: Record<string, string> = {},
  permissions = ["-A"],
): Promise<Run> {
  const args = ["run", ...permissions, one, "--op", op, "--mib", String(mib), "--out", out, ...extra];
  const r = await runTimed(deno, args, env);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

async function has(cmd: string, args: string[]): Promise<boolean> {
  try {
    return (await new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).output()).success;
  } catch {
    return false;
  }
}

/**
 * glibc's tunable that makes malloc ask for transparent huge pages (`madvise(MADV_HUGEPAGE)`) on
 * the memory it maps, as numpy does itself for every array of 4 MiB or more: first-touching fresh
 * memory then faults once per 2 MiB instead of once per 4 KiB. A JS library cannot madvise, so
 * the load row is run both ways.
 */
const HUGEPAGES = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1";
/**
 * Permissions of a ckpt process without FFI: a load then cannot madvise its tensor buffers into
 * huge pages (`src/storage/_huge_pages.ts`), which it does where FFI is granted (`-A`).
 */
const NO_FFI = ["-A", "--deny-ffi"];

/**
 * The peers' environment (scripts/peers_venv.sh, from local wheels): Orbax, DCP, safetensors,
 * tf.train.Checkpoint, and the numpy and torch of the np/torch rows. Without it (or with
 * `--only` leaving out `peers`) the peer rows are left out, saying why, and the np/torch rows
 * use Debian's python3 where it has them.
 */
const peers = parts.has("peers") ? await peersPython() : { error: "peer rows left out (--only without peers)" };
const PY = "python" in peers ? peers.python : "/usr/bin/python3";
const PEERS_PY = new URL("./_peers.py", import.meta.url).pathname;

/** One peer's save or load (bench/_peers.py), in its own process. */
async function peer(op: "save" | "load", kind: string, raw: string, out: string): Promise<Run> {
  return JSON.parse((await runTimed(PY, [PEERS_PY, op, kind, raw, out])).stdout.trim().split("\n").at(-1)!);
}
// Saves and loads the raw float32 file's bytes as 16 MiB tensors, timing only the operation.
// A save writes a new file, fsyncs it and renames it over the target, as an atomic save must.
const PY_SCRIPT = `
import json, os, sys, time
op, kind, raw, out = sys.argv[1:5]
import numpy as np
if kind == "torch":
    import torch
if op == "save":
    a = np.fromfile(raw, dtype=np.float32)
    step = 4 * 1024 * 1024
    arrays = {f"layer{i}/kernel": a[i * step:(i + 1) * step] for i in range((a.size + step - 1) // step)}
    if kind == "torch":
        arrays = {k: torch.from_numpy(v) for k, v in arrays.items()}
    t = time.perf_counter()
    with open(out + ".tmp", "wb") as f:
        if kind == "torch":
            torch.save(arrays, f)
        else:
            np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.rename(out + ".tmp", out)
    d = os.open(os.path.dirname(out), os.O_RDONLY)
    os.fsync(d)
    os.close(d)
    print(json.dumps({"seconds": time.perf_counter() - t}))
else:
    t = time.perf_counter()
    if kind == "torch":
        arrays = torch.load(out)
        n = sum(v.numel() for v in arrays.values())
    else:
        with np.load(out) as f:
            arrays = {k: f[k] for k in f.files}
        n = sum(v.size for v in arrays.values())
    print(json.dumps({"seconds": time.perf_counter() - t, "elements": int(n)}))
`;
const haveNumpy = await has(PY, ["-c", "import numpy"]);
const haveTorch = await has(PY, ["-c", "import torch"]);

/**
 * The peers' saves (bench/_peers.py): kind, row label, page regime. What each flushes and renames
 * is what `deno task bench:peer-facts` read from strace (docs/performance.md has its table).
 */
const PEER_SAVES: [kind: string, name: string, pages: string][] = [
  [
    "orbax",
    "Orbax `StandardCheckpointer.save` until `wait_until_finished` (fsyncs its files and directories, renames its directory into place)",
    "fresh",
  ],
  ["orbax-manager", "Orbax `CheckpointManager.save` (keep 2) until `wait_until_finished`", "fresh"],
  ["dcp", "`dcp.save`, one process (fsyncs its two files, no directory)", "fresh"],
  ["dcp-async", "`dcp.async_save` until its future is done", "fresh"],
  ["safetensors", "safetensors `save_file` (no fsync)", "fresh"],
  ["safetensors-durable", "safetensors `save_file` to a new file, fsync, rename, directory fsync", "fresh"],
  ["tf", "`tf.train.Checkpoint.write` (no fsync)", "fresh"],
];
/** The peers' loads: kind, the save kind whose files it reads, row label. */
const PEER_LOADS: [kind: string, files: string, name: string][] = [
  ["orbax", "orbax", "Orbax `StandardCheckpointer.restore` (into new jax arrays)"],
  ["dcp", "dcp", "`dcp.load` into a state dict of `torch.empty` tensors"],
  ["safetensors", "safetensors", "safetensors `load_file` (maps the file: no page read yet)"],
  ["safetensors-touched", "safetensors", "safetensors `load_file`, then one byte of every 4 KiB page read"],
  ["tf", "tf", "`tf.train.Checkpoint.read` into the variables of a model built first"],
];
/** ckpt's background saves, beside the peers' asynchronous ones. */
const BACKGROUND = "ckpt `BackgroundWriter.save` (buffers moved to the worker) until durable";
const BACKGROUND_COPY = "same, the caller's arrays copied first (it keeps them, as Orbax and DCP stage theirs)";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
const mbs = (bytes: number, s: number) => bytes / 1e6 / s;
const fmtMiB = (b: number) => `${(b / MiB).toFixed(0)} MiB`;

/** openssl's single-thread SHA-256 speed on 16 KiB blocks (MB/s): the ceiling of one core. */
async function opensslSpeed(): Promise<number> {
  try {
    const o = await new Deno.Command("openssl", {
      args: ["speed", "-evp", "sha256", "-seconds", "2"],
      stdout: "piped",
      stderr: "null",
    }).output();
    const line = new TextDecoder().decode(o.stdout).split("\n").find((l) => /^sha256\s/.test(l));
    const cols = line?.trim().split(/\s+/);
    return cols ? parseFloat(cols[5]!) * 1000 / 1e6 : NaN; // the 16384-byte column, in kB/s
  } catch {
    return NaN;
  }
}

async function loadAverage(): Promise<string> {
  try {
    return (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  } catch {
    return "unknown";
  }
}

/**
 * Whether this machine hands free memory back to its host (see the module doc): a virtio balloon
 * offering free page reporting (feature bit 5), and from which block size the kernel reports.
 */
async function pageReporting(): Promise<string> {
  const balloons = "/sys/bus/virtio/drivers/virtio_balloon";
  let reporting = false;
  try {
    for await (const e of Deno.readDir(balloons)) {
      if (!e.name.startsWith("virtio")) continue;
      const features = await Deno.readTextFile(`${balloons}/${e.name}/features`);
      if (features[5] === "1") reporting = true;
    }
  } catch { /* no balloon driver */ }
  if (!reporting) return "none (no virtio balloon reporting free pages): 2 MiB pages stay with this machine";
  const order = await Deno.readTextFile("/sys/module/page_reporting/parameters/page_reporting_order").then(
    (t) => Number(t.trim()),
    () => NaN,
  );
  const size = Number.isFinite(order) ? `${(2 ** order * 4) / 1024} MiB` : "an unknown size";
  return `on (virtio balloon): free blocks of ${size} and more go back to the host about 2 s after they are freed, ` +
    "so every timed process follows a settle step (see bench/compare_save.ts)";
}

/** A method in a comparison: its row label, page regime, and how to run one trial. */
interface Method {
  name: string;
  pages: string;
  run: () => Promise<Run>;
}

/** Memory a method's process uses besides its tensors (the runtime, Python and numpy), with room to spare. */
const SETTLE_EXTRA_MIB = 256;

/**
 * Reads each file that exists once (and every file under each directory), through the page cache,
 * so the loads that follow find it there.
 */
async function readThrough(paths: string[]): Promise<void> {
  const buf = new Uint8Array(16 * MiB);
  for (const path of paths) {
    const st = await Deno.stat(path).catch(() => undefined);
    if (st?.isDirectory) {
      const inside: string[] = [];
      for await (const e of Deno.readDir(path)) inside.push(join(path, e.name));
      await readThrough(inside);
      continue;
    }
    const f = await Deno.open(path).catch(() => undefined);
    if (!f) continue;
    try {
      while (await f.read(buf) !== null) { /* read on */ }
    } finally {
      f.close();
    }
  }
}

/**
 * Touches and frees `mib` + {@linkcode SETTLE_EXTRA_MIB} MiB in 2 MiB pages in a process of its
 * own, just before a timed one (see the module doc); returns its touch speed in MB/s. `mib` is
 * what the method touches afresh: its size for a load, twice that for a save.
 */
async function settle(mib: number): Promise<number> {
  const r = await ckpt("settle", mib + SETTLE_EXTRA_MIB, "-");
  return mbs((mib + SETTLE_EXTRA_MIB) * MiB, r.seconds);
}

/** The regimes one comparison ran in: 4 KiB first-touch probes, 2 MiB settle steps (MB/s). */
interface Regime {
  probes: number[];
  settles: number[];
  /** What each settle step touched besides {@linkcode SETTLE_EXTRA_MIB}, in MiB. */
  fresh: number;
  mib: number;
}

/**
 * Runs `methods` in `trials` interleaved rounds, a first-touch probe before each round and a
 * {@linkcode settle} step before each timed process.
 */
async function interleaved(
  methods: Method[],
  mib: number,
  fresh: number,
): Promise<{ runs: Map<string, Run[]> } & Regime> {
  const runs = new Map<string, Run[]>(methods.map((m) => [m.name, []]));
  const probes: number[] = [];
  const settles: number[] = [];
  for (let t = 0; t < trials; t++) {
    const p = await ckpt("probe", Math.min(mib, 256), "-");
    probes.push(mbs(Math.min(mib, 256) * MiB, p.seconds));
    for (const m of shuffled(methods, t + 1)) {
      settles.push(await settle(fresh));
      runs.get(m.name)!.push(await m.run());
    }
  }
  return { runs, probes, settles, fresh, mib };
}

/**
 * `items` in an order of their own for trial `seed` (seeded, so a run can be repeated): on this
 * VM a process that follows one which freed much memory ran up to 3× slower than the same
 * process one later (a huge-page load after a 4 KiB-page one: 0.69–1.30 s against 0.40–0.45 s
 * for 512 MiB), so no method may always follow the same one.
 */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let x = (seed * 2654435761) >>> 0;
  for (let i = out.length - 1; i > 0; i--) {
    x = (x * 1664525 + 1013904223) >>> 0;
    const j = x % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function regime({ probes, settles, fresh, mib }: Regime): string {
  const range = (xs: number[]) => `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)} MB/s`;
  const lo = Math.min(...probes), hi = Math.max(...probes);
  const kind = hi < 1000 ? "cold (first touch slow)" : lo >= 1000 ? "warm" : "mixed";
  return `first touch of fresh memory ${range(probes)} before the rounds: ${kind}; ` +
    `each timed process after a settle step that touched ${
      fresh === mib ? "its size" : `${fresh / mib}× its size (its tensors and the new file's page cache)`
    } + ${SETTLE_EXTRA_MIB} MiB in 2 MiB pages at ${range(settles)}`;
}

interface Row {
  name: string;
  pages: string;
  seconds: number;
  mbs: number;
  ratio?: string;
  target?: string;
}

function table(title: string, rows: Row[]): void {
  console.log(`\n${title}\n`);
  console.log("| method | pages | median s | MB/s | ratio | target |");
  console.log("| --- | --- | ---: | ---: | --- | --- |");
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${r.pages} | ${r.seconds.toFixed(3)} | ${r.mbs.toFixed(0)} | ${r.ratio ?? ""} | ${
        r.target ?? ""
      } |`,
    );
  }
}

/**
 * The asynchronous saves, as Orbax reports them: how long `save()` held the caller (medians), and
 * how long until the checkpoint was complete; target: ckpt's stall ≤ the best peer's.
 */
function blocking(runs: Map<string, Run[]>, order: string[]): void {
  const rows = order.filter((n) => runs.get(n)?.every((r) => r.blocked !== undefined));
  if (rows.length === 0) return;
  const blocked = (n: string) => median(runs.get(n)!.map((r) => r.blocked!));
  const peerRows = rows.filter((n) => n !== BACKGROUND && n !== BACKGROUND_COPY);
  const best = peerRows.length ? Math.min(...peerRows.map(blocked)) : undefined;
  console.log("\n### Blocking time of the asynchronous saves (the same runs)\n");
  console.log("| method | median s save() blocked the caller | median s until complete | ratio | target |");
  console.log("| --- | ---: | ---: | --- | --- |");
  for (const n of rows) {
    const b = blocked(n);
    // The copying row is set beside the peer that copies too (DCP stages a copy; Orbax keeps a
    // reference to jax arrays, which cannot change), and carries no target: moving is ckpt's way.
    const copies = PEER_SAVES.find(([kind]) => kind === "dcp-async")![1];
    const cell = best === undefined
      ? ["no peer in this run", ""]
      : n === BACKGROUND
      ? [`${(b / best).toFixed(2)}× the best peer's`, `≤ 1.0× the best peer's: ${b <= best ? "**met**" : "not met"}`]
      : n === BACKGROUND_COPY
      ? [runs.has(copies) ? `${(b / blocked(copies)).toFixed(2)}× \`dcp.async_save\`'s (which copies too)` : "", ""]
      : [b === best ? "best peer" : "", ""];
    console.log(
      `| ${n} | ${b.toFixed(3)} | ${median(runs.get(n)!.map((r) => r.seconds)).toFixed(3)} | ${cell[0]} | ${cell[1]} |`,
    );
  }
}

/**
 * The physical-limit row under a table (bench/_bounds.ts): the bound, and `row`'s speed as a
 * share of the speed the bound allows.
 */
function limitRow(b: Bound, row: Row, what: string, bytes: number): Row {
  return {
    name: `physical limit: ${b.text}`,
    pages: "",
    seconds: b.seconds,
    mbs: mbs(bytes, b.seconds),
    ratio: `${what} at ${(b.seconds / row.seconds).toFixed(2)}× the limit's speed`,
    target: row.target ?? "",
  };
}

/** "0.93× peer; target ≥ 1.0×: met" style cells. */
function vs(value: number, peer: number | undefined, peerName: string, goal?: number): Pick<Row, "ratio" | "target"> {
  if (peer === undefined || !Number.isFinite(peer)) return { ratio: `no ${peerName} in this run` };
  const r = value / peer;
  return {
    ratio: `${r.toFixed(2)}× ${peerName}`,
    ...(goal === undefined
      ? {}
      : { target: `≥ ${goal.toFixed(1)}× ${peerName}: ${r >= goal ? "**met**" : "not met"}` }),
  };
}

const openssl0 = await opensslSpeed();
console.log(
  `ckpt save/load side by side — ${Deno.build.os}, ${navigator.hardwareConcurrency} cores, Deno ${Deno.version.deno}, ` +
    `${new Date().toISOString().slice(0, 16)}Z`,
);
console.log(`load average at start: ${await loadAverage()}`);
console.log(
  `${trials} interleaved trials per method (each trial in its own seeded random order), medians; each method in its own process; dir ${dir}`,
);
console.log(`openssl speed -evp sha256 (one core, 16 KiB blocks): ${openssl0.toFixed(0)} MB/s`);
console.log(
  "python" in peers
    ? `${peers.versions} (${PY}, built by scripts/peers_venv.sh; its numpy and torch run the np and torch rows)`
    : `${peers.error}\npython3-numpy: ${haveNumpy ? "yes" : "no"}; python3-torch: ${
      haveTorch ? "yes" : "no (deno task peers:venv, or apt-get install python3-torch, to add the torch rows)"
    }`,
);
const thp = await Deno.readTextFile("/sys/kernel/mm/transparent_hugepage/enabled").then(
  (t) => t.trim(),
  () => "unknown",
);
console.log(
  `transparent huge pages: ${thp} (numpy madvises its arrays; so does a ckpt load where FFI is granted: ckpt rows run with -A, the load rows also without FFI and with ${HUGEPAGES})`,
);
console.log(`free page reporting: ${await pageReporting()}`);
console.log(
  "pages: 'fresh' = the bytes go to a new file (page-cache pages never used by that file: an atomic save); " +
    "'recycled' = they overwrite or reuse a file being replaced; 'direct' = no page-cache pages: written around the " +
    "cache (O_DIRECT), as a durable ckpt save to a local file is where FFI is granted (every ckpt row runs with -A)",
);

for (const mib of sizes) {
  const bytes = mib * MiB;
  const raw = join(dir, `raw-${mib}.bin`);
  await ckpt("raw", mib, raw);
  console.log(`\n## ${mib} MiB of float32 tensors (${Math.ceil(mib / 16)} × 16 MiB)`);

  let saveRows: Map<string, Run[]> | undefined;
  if (parts.has("save")) {
    const methods: Method[] = [
      {
        name: "`dd bs=16M conv=fdatasync` over the previous file",
        pages: "recycled",
        run: async () => {
          const r = await runTimed("dd", [`if=${raw}`, `of=${join(dir, "dd.bin")}`, "bs=16M", "conv=fdatasync"]);
          return { seconds: r.seconds };
        },
      },
      {
        name: "same `dd` to a new file, then `mv` over",
        pages: "fresh",
        run: async () => {
          const r = await runTimed("sh", [
            "-c",
            `dd if="$0" of="$1.tmp" bs=16M conv=fdatasync 2>/dev/null && mv "$1.tmp" "$1"`,
            raw,
            join(dir, "dd-atomic.bin"),
          ]);
          return { seconds: r.seconds };
        },
      },
      {
        name: "ckpt binary save (atomic, fsync, one hash pass)",
        pages: "direct (new file)",
        run: () => ckpt("save", mib, join(dir, "b.ckpt"), ["--warm"]),
      },
      {
        name: "ckpt binary save, `sha256sum: true` (second pass)",
        pages: "direct (new file)",
        run: () => ckpt("save", mib, join(dir, "b2.ckpt"), ["--warm", "--sha256sum"]),
      },
      {
        name: `ckpt in a rotating CheckpointManager, \`recycle: true\` (keep 2, median of saves 3–${values.saves})`,
        pages: "direct (retention's file reused)",
        run: () => ckpt("manager", mib, join(dir, "managed"), ["--saves", values.saves]),
      },
      {
        name: "same manager, `recycle: false` (the default)",
        pages: "direct (new file)",
        run: () => ckpt("manager", mib, join(dir, "managed-fresh"), ["--saves", values.saves, "--no-recycle"]),
      },
    ];
    methods.push({
      name: "same `dd` new+mv with `oflag=direct` (around the page cache, as ckpt where FFI is granted)",
      pages: "direct (new file)",
      run: async () => {
        const r = await runTimed("sh", [
          "-c",
          `dd if="$0" of="$1.tmp" bs=16M oflag=direct conv=fdatasync 2>/dev/null && mv "$1.tmp" "$1"`,
          raw,
          join(dir, "dd-direct.bin"),
        ]);
        return { seconds: r.seconds };
      },
    });
    if (haveNumpy) {
      methods.push({
        name: "`np.savez` to a new file, fsync, rename",
        pages: "fresh",
        run: async () =>
          JSON.parse((await runTimed(PY, ["-c", PY_SCRIPT, "save", "numpy", raw, join(dir, "np.npz")])).stdout),
      });
    }
    if (haveTorch) {
      methods.push({
        name: "`torch.save` to a new file, fsync, rename",
        pages: "fresh",
        run: async () =>
          JSON.parse((await runTimed(PY, ["-c", PY_SCRIPT, "save", "torch", raw, join(dir, "t.pt")])).stdout),
      });
    }
    methods.push(
      {
        name: BACKGROUND,
        pages: "direct (new file)",
        run: () => ckpt("background", mib, join(dir, "bg.ckpt")),
      },
      {
        name: BACKGROUND_COPY,
        pages: "direct (new file)",
        run: () => ckpt("background", mib, join(dir, "bg-copy.ckpt"), ["--copy"]),
      },
    );
    if ("python" in peers) {
      for (const [kind, name, pages] of PEER_SAVES) {
        methods.push({ name, pages, run: () => peer("save", kind, raw, join(dir, kind)) });
      }
    }
    const { runs, ...regimeSeen } = await interleaved(methods, mib, 2 * mib);
    saveRows = runs;
    const med = (n: string) => runs.has(n) ? median(runs.get(n)!.map((r) => r.seconds)) : undefined;
    const speed = (n: string) => {
      const s = med(n);
      return s === undefined ? undefined : mbs(bytes, s);
    };
    const ddInPlace = speed(methods[0]!.name);
    const ddAtomic = speed(methods[1]!.name);
    const savez = speed("`np.savez` to a new file, fsync, rename");
    const rows: Row[] = methods.map((m) => ({
      name: m.name,
      pages: m.pages,
      seconds: med(m.name)!,
      mbs: speed(m.name)!,
    }));
    const save = rows[2]!;
    const a = vs(save.mbs, savez, "np.savez", 1.0);
    const b = vs(save.mbs, ddAtomic, "dd new+mv", 0.9);
    // torch.save is a peer shown for reference (no target names it).
    const torchSave = speed("`torch.save` to a new file, fsync, rename");
    save.ratio = [a.ratio, b.ratio, ...(torchSave ? [vs(save.mbs, torchSave, "torch.save").ratio] : [])].join("; ");
    save.target = [a.target, b.target].filter(Boolean).join("; ");
    Object.assign(rows[3]!, vs(rows[3]!.mbs, savez, "np.savez"));
    Object.assign(rows[4]!, vs(rows[4]!.mbs, ddInPlace, "dd in place", 0.8));
    Object.assign(rows[5]!, vs(rows[5]!.mbs, ddInPlace, "dd in place"));
    for (const r of rows.slice(6)) Object.assign(r, vs(r.mbs, ddAtomic, "dd new+mv"));
    // The peers' rows: how ckpt's durable save compares with each (target: at least as fast).
    for (const r of rows) {
      if (!PEER_SAVES.some(([, name]) => name === r.name)) continue;
      const v = vs(save.mbs, r.mbs, "this", 1.0);
      Object.assign(r, { ratio: `ckpt save is ${v.ratio}`, target: `ckpt ${v.target}` });
    }
    rows[1]!.ratio = vs(rows[1]!.mbs, ddInPlace, "dd in place").ratio;
    rows.push(limitRow(
      bound([{ name: "dd new+mv", seconds: med(methods[1]!.name)! }, hashPart(bytes, bytes / (openssl0 * 1e6))]),
      save,
      "ckpt binary save",
      bytes,
    ));
    table(`### Save (${regime(regimeSeen)}; load average ${await loadAverage()})`, rows);
    blocking(runs, methods.map((m) => m.name));
  }

  if (parts.has("load")) {
    // Files to load: ckpt's (written above, or now), and the peers'.
    const ckptFile = join(dir, "b.ckpt");
    if (!saveRows) await ckpt("save", mib, ckptFile);
    if (haveNumpy && !saveRows) await runTimed(PY, ["-c", PY_SCRIPT, "save", "numpy", raw, join(dir, "np.npz")]);
    if (haveTorch && !saveRows) await runTimed(PY, ["-c", PY_SCRIPT, "save", "torch", raw, join(dir, "t.pt")]);
    const peerFiles = "python" in peers ? [...new Set(PEER_LOADS.map(([, files]) => files))] : [];
    if (!saveRows) { for (const kind of peerFiles) await peer("save", kind, raw, join(dir, kind)); }
    const methods: Method[] = [
      {
        name: "ckpt load + verify, into fresh memory, without FFI (`-A --deny-ffi`: 4 KiB pages)",
        pages: "cached",
        run: () => ckpt("load", mib, ckptFile, [], {}, NO_FFI),
      },
      {
        name:
          "same, FFI granted (`-A`): tensor buffers madvised into 2 MiB pages, as numpy does, and each tensor hashed by libcrypto on a native thread while the next is read",
        pages: "cached",
        run: () => ckpt("load", mib, ckptFile),
      },
      {
        name: `same without FFI, in a process started with \`${HUGEPAGES}\` (2 MiB pages from malloc)`,
        pages: "cached",
        run: () => ckpt("load", mib, ckptFile, [], { GLIBC_TUNABLES: HUGEPAGES.split("=").slice(1).join("=") }, NO_FFI),
      },
      {
        name:
          "ckpt verify (`verifyCheckpoint`, as `ckpt verify`: every digest checked, no tensor kept; a second thread reads and hashes every other tensor)",
        pages: "cached",
        run: () => ckpt("verify", mib, ckptFile),
      },
      {
        name: "same verify, one thread (`parallelHash: false`)",
        pages: "cached",
        run: () => ckpt("verify", mib, ckptFile, ["--one-thread"]),
      },
      {
        name: "ckpt streaming decode (`decodeCheckpoint` with `reuseBuffers`: each tensor verified, then handed out)",
        pages: "cached",
        run: () => ckpt("load-stream", mib, ckptFile),
      },
      {
        name: "`sha256sum` of the same file",
        pages: "cached",
        run: async () => ({ seconds: (await runTimed("sha256sum", [ckptFile])).seconds }),
      },
      {
        name:
          "ckpt load + verify without FFI, `parallelHash: true` (a Worker reads and hashes every other tensor; with FFI the native thread takes its place)",
        pages: "cached",
        run: () => ckpt("load", mib, ckptFile, ["--two-threads"], {}, NO_FFI),
      },
      {
        name: "ckpt streaming decode, `parallelHash: true` (`reuseBuffers`: the transfer scheme)",
        pages: "cached",
        run: () => ckpt("load-stream", mib, ckptFile, ["--two-threads"]),
      },
      {
        name:
          "ckpt load + verify into the tensors the process already has (`into`: a model's buffers, made and touched before the clock starts)",
        pages: "cached",
        run: () => ckpt("load-into", mib, ckptFile),
      },
    ];
    methods.push({
      name:
        "raw read of the same file into fresh memory (16 MiB buffers as ckpt allocates them, all kept to the end as a load keeps its tensors, nothing checked)",
      pages: "cached",
      run: () => ckpt("read-raw", mib, ckptFile),
    });
    if (haveNumpy) {
      methods.push({
        name: "`np.load` of the .npz, every array read",
        pages: "cached",
        run: async () =>
          JSON.parse((await runTimed(PY, ["-c", PY_SCRIPT, "load", "numpy", raw, join(dir, "np.npz")])).stdout),
      });
    }
    if (haveTorch) {
      methods.push({
        name: "`torch.load`",
        pages: "cached",
        run: async () =>
          JSON.parse((await runTimed(PY, ["-c", PY_SCRIPT, "load", "torch", raw, join(dir, "t.pt")])).stdout),
      });
    }
    if ("python" in peers) {
      for (const [kind, files, name] of PEER_LOADS) {
        methods.push({ name, pages: "cached", run: () => peer("load", kind, raw, join(dir, files)) });
      }
    }
    if (new Set(methods.map((m) => m.name)).size !== methods.length) throw new Error("two load rows share a name");
    // Every file in the page cache before the first timed load: a save written around the cache
    // (ckpt's, where FFI is granted) leaves its file on the disk only.
    await readThrough([ckptFile, join(dir, "np.npz"), join(dir, "t.pt"), ...peerFiles.map((f) => join(dir, f))]);
    const { runs, ...regimeSeen } = await interleaved(methods, mib, mib);
    const openssl1 = await opensslSpeed();
    const openssl = median([openssl0, openssl1].filter(Number.isFinite));
    const med = (n: string) => median(runs.get(n)!.map((r) => r.seconds));
    const rows: Row[] = methods.map((m) => ({
      name: m.name,
      pages: m.pages,
      seconds: med(m.name),
      mbs: mbs(bytes, med(m.name)),
    }));
    const npLoad = haveNumpy ? rows.find((r) => r.name.startsWith("`np.load`"))!.mbs : undefined;
    const [load, loadFfi, hugetlb, verify, verifyOne, decode, sha256sum, loadTwo, decodeTwo, loadInto] = rows;
    Object.assign(load!, vs(load!.mbs, npLoad, "np.load", 0.9));
    Object.assign(loadFfi!, vs(loadFfi!.mbs, npLoad, "np.load", 1.0));
    hugetlb!.ratio = vs(hugetlb!.mbs, npLoad, "np.load").ratio;
    Object.assign(verify!, vs(verify!.mbs, openssl, "openssl sha256", 0.8));
    for (const r of [verifyOne, decode, sha256sum, decodeTwo]) r!.ratio = vs(r!.mbs, openssl, "openssl sha256").ratio;
    loadTwo!.ratio = vs(loadTwo!.mbs, npLoad, "np.load").ratio;
    const torchLoad = rows.find((r) => r.name === "`torch.load`")?.mbs;
    loadInto!.ratio = [vs(loadInto!.mbs, npLoad, "np.load").ratio, vs(loadInto!.mbs, torchLoad, "torch.load").ratio]
      .join(
        "; ",
      );
    // torch.load is a peer shown for reference: how ckpt's loads (FFI granted, then without) compare to it.
    const torchRow = rows.find((r) => r.name === "`torch.load`");
    if (torchRow) {
      torchRow.ratio = `ckpt load is ${vs(loadFfi!.mbs, torchRow.mbs, "torch.load").ratio} (${
        (load!.mbs / torchRow.mbs).toFixed(2)
      }× without FFI)`;
      torchRow.target = `ckpt (FFI) ${vs(loadFfi!.mbs, torchRow.mbs, "torch.load", 1.0).target}`;
    }
    // The peers' loads: how ckpt's load + verify (FFI granted; then without) compares with each.
    for (const r of rows) {
      if (!PEER_LOADS.some(([, , name]) => name === r.name)) continue;
      const v = vs(loadFfi!.mbs, r.mbs, "this", 1.0);
      r.ratio = `ckpt load is ${v.ratio} (${(load!.mbs / r.mbs).toFixed(2)}× without FFI)`;
      // A mapping hands out the page cache's own pages, read when first touched: only the row that
      // touches them is a load to compare with (ckpt's lands in memory of its own, verified).
      if (!r.name.includes("no page read yet")) r.target = `ckpt ${v.target}`;
    }
    const rawRead = rows.find((r) => r.name.startsWith("raw read of the same file"))!;
    const fileBytes = (await Deno.stat(ckptFile)).size;
    const hash = hashPart(fileBytes, fileBytes / (openssl * 1e6));
    // Both must run on the same cores: the read's CPU (the kernel's copy and first touch of the
    // fresh pages) and the hash's, shared by all of them, bound a verified load too.
    const readCpu = median(runs.get(rawRead.name)!.map((r) => r.cpuSeconds ?? 0));
    const cores = usableCores();
    rows.push(limitRow(
      bound([{ name: "raw read", seconds: rawRead.seconds }, hash, {
        name: `(raw read's CPU ${readCpu.toFixed(3)} s + SHA-256 on one core ${
          (fileBytes / (openssl * 1e6)).toFixed(3)
        } s) / ${cores} cores`,
        seconds: (readCpu + fileBytes / (openssl * 1e6)) / cores,
      }]),
      loadFfi!,
      "ckpt load + verify (FFI)",
      bytes,
    ));
    table(
      `### Load (page cache warm; tensors land in fresh memory; ${regime(regimeSeen)}; openssl ${
        openssl.toFixed(0)
      } MB/s; load average ${await loadAverage()})`,
      rows,
    );
  }

  if (parts.has("memory")) {
    const lazy = await ckpt("save-lazy-pooled", mib, join(dir, "lazy.ckpt"));
    const stream = await ckpt("load-stream", mib, join(dir, "lazy.ckpt"));
    const verified = await ckpt("verify", mib, join(dir, "lazy.ckpt"));
    console.log(
      `\nbounded memory: a save of lazily produced tensors (producer recycling two 16 MiB buffers, both filled before the start: ckpt's own memory) peaks at +${
        fmtMiB(lazy.peakRss! - lazy.baseRss!)
      } RSS over its start; a tensor-by-tensor load at +${fmtMiB(stream.peakRss! - stream.baseRss!)}; a verify at +${
        fmtMiB(verified.peakRss! - verified.baseRss!)
      }`,
    );
  }
  await Deno.remove(raw).catch(() => {});
}
if (!values.dir) await Deno.remove(dir, { recursive: true });

/**
 * At least this many trials for the codec rows: with 3, their 4-32 MiB files left ratios swinging by a third
 * from run to run (trained parameters saved at 6.6× gzip at 11:04 and 5.0× at 12:46 UTC on 2026-12-04, the
 * second run with the faster encoder).
 */
const CODEC_TRIALS = 9;

/** Other side-by-side scripts, run after these rows in the same run: file in bench/, and its arguments. */
const EXTRA: [string, string[]][] = [[
  "codec_compare.ts",
  ["--trials", String(Math.max(CODEC_TRIALS, Number(values.trials)))],
]];

if (parts.has("extra")) {
  const here = import.meta.dirname!;
  for (const [file, args] of EXTRA) {
    const path = join(here, file);
    if (!(await Deno.stat(path).catch(() => undefined))) continue;
    console.log(`\n## bench/${file} ${args.join(" ")}\n`);
    const out = await new Deno.Command(deno, {
      args: ["run", "-A", path, ...args],
      stdout: "inherit",
      stderr: "inherit",
    })
      .output();
    if (!out.success) console.log(`(bench/${file} failed with exit code ${out.code})`);
  }
}
