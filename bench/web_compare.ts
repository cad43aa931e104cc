/**
 * Side by side in one browser session per engine (Chromium, Firefox ESR, WebKitGTK; the browser
 * test harness starts them), on the same tensors (`deno task bench:web`):
 *
 * - ckpt `saveCheckpoint` to OPFS (encode, SHA-256 per tensor and of the stream, temporary file
 *   moved over the key) against writing the same bytes to one OPFS file with `createWritable()`,
 *   no encoding, no hashing; and `loadCheckpoint` from OPFS (decode, every digest checked)
 *   against reading the file back with `File.arrayBuffer()`;
 * - the physical limit of each: the larger of the raw read (or write) and SHA-256 over the same
 *   bytes by the engine's own WebCrypto (`crypto.subtle.digest`, one call per tensor);
 * - how responsive the page stays while a `BackgroundWriter` saves the same tensors from its
 *   worker: the longest main-thread task meanwhile (`PerformanceObserver` `longtask` entries,
 *   where the engine has them: Chromium), and in every engine the longest gap between two
 *   `setTimeout(0)` callbacks;
 * - ckpt's byte-grouped save and load (`compression: "bytegroup"`, through the page's
 *   CompressionStream / DecompressionStream) against ckpt uncompressed, on N(0, 0.02) weights;
 * - TF.js's own `model.save("indexeddb://…")` / `tf.loadLayersModel("indexeddb://…")` against
 *   ckpt for the same tfjs-layers model (`snapshot()` + save to OPFS; load + `restore()` into the
 *   model), at sizes below and above 32 MiB, on the cpu backend;
 * - peak JS memory during a large save: the page's heap plus ArrayBuffer backing stores
 *   (CDP `Runtime.getHeapUsage`, sampled every 20 ms from here) above what it held before,
 *   for ckpt's save and for `model.save("indexeddb://…")` of a model of the same size
 *   (Chromium only: the other engines have no such protocol call).
 *
 * Each engine starts with its origin's OPFS emptied (what earlier runs left counts against the
 * quota: WebKit's is 1000 MB, 1048576000 bytes) and prints what `navigator.storage.estimate()`
 * then allows. WebKit's estimate then goes on counting the files each save replaces (768 MiB
 * after three 256 MiB saves to one key, whatever is removed); `OpfsStore` counts the files
 * itself where the estimate refuses, so every engine runs at the same sizes.
 *
 * Trials are interleaved (A, B, A, B…), the table gives medians and, per row, ckpt's speed over
 * the peer's (the peer's time divided by ckpt's: above 1, ckpt is faster). A timing never
 * fails anything here; the README quotes a run.
 *
 *   deno task bench:web [--sizes 64,256] [--bytegroup-sizes 64] [--model-sizes 8,48,128] [--heap-mib 256]
 *                       [--trials 5] [--engines chromium,firefox,webkit] [--large-mib 2560]
 *
 * `--large-mib N` adds one save and one load + verify of an N MiB checkpoint (tensors of
 * `--tensor-mib`), to OPFS and back tensor by tensor: above 2048 it is larger than the largest
 * ArrayBuffer Chromium allows. Chromium also gives the peak memory above the tensors during each.
 *
 * @module
 */
import { parseArgs } from "node:util";
import type { CDPSession } from "puppeteer-core";
import { openSession, serveSite, type WebPage } from "../tests/web/_browser.ts";
import { type Engine, ENGINES, locate } from "../tests/web/_engines.ts";
import { machineCpuSeconds } from "./_bounds.ts";

type Page = WebPage;

type Lib = typeof import("./_web_page.ts");
declare const m: Lib;

const { values } = parseArgs({
  args: Deno.args,
  options: {
    sizes: { type: "string", default: "64,256" },
    "model-sizes": { type: "string", default: "8,48,128" },
    "bytegroup-sizes": { type: "string", default: "64" },
    "heap-mib": { type: "string", default: "256" },
    trials: { type: "string", default: "5" },
    "tensor-mib": { type: "string", default: "4" },
    engines: { type: "string", default: ENGINES.join(",") },
    "large-mib": { type: "string", default: "0" },
  },
});
const list = (s: string) => s.split(",").filter((x) => x !== "").map(Number);
const SIZES = list(values.sizes);
const MODEL_SIZES = list(values["model-sizes"]);
const BYTEGROUP_SIZES = list(values["bytegroup-sizes"]);
const HEAP_MIB = Number(values["heap-mib"]);
const TRIALS = Number(values.trials);
const TENSOR_MIB = Number(values["tensor-mib"]);
const LARGE_MIB = Number(values["large-mib"]);
const MiB = 2 ** 20;

const WANTED = values.engines.split(",").filter((e) => e !== "") as Engine[];
for (const e of WANTED) {
  if (!ENGINES.includes(e)) {
    console.error(`--engines: unknown engine "${e}" (${ENGINES})`);
    Deno.exit(1);
  }
  const { missing } = locate(e);
  if (missing.length) {
    console.error(`bench:web: ${e} needs ${missing.join(", ")} (apt-get install them, or leave it out of --engines)`);
    Deno.exit(1);
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
/** How many tensors a checkpoint of `mib` MiB has (of `--tensor-mib` each, the last one smaller). */
const tensorsOf = (mib: number) => Math.ceil(mib / TENSOR_MIB);
const mbs = (mib: number, ms: number) => (mib * MiB) / 1e6 / (ms / 1000);

type Op = Exclude<
  keyof Lib,
  | "makeTensors"
  | "makeModel"
  | "cleanUp"
  | "bytegroupRatio"
  | "emptyOpfs"
  | "backgroundSaveLongestTask"
  | "takeWatchedSaves"
  | "rawModelWriteVia"
  | "ckptSavePhases"
>;
const call = (page: Page, op: Op) => page.evaluate((op: Op) => m[op](), op);

/**
 * Medians of interleaved runs: each op's milliseconds, and the whole machine's CPU seconds during
 * its call (every process: a browser spreads one operation over several, so only the machine's
 * total holds all of it; this one idles meanwhile).
 */
interface Timed {
  ms: Record<string, number>;
  cpu: Record<string, number>;
}

/** Runs `ops` interleaved for `TRIALS` rounds (after one untimed warm-up round); medians. */
async function interleaved(page: Page, ops: Op[]): Promise<Timed> {
  for (const op of ops) await call(page, op);
  const times: Record<string, number[]> = Object.fromEntries(ops.map((op) => [op, []]));
  const cpus: Record<string, number[]> = Object.fromEntries(ops.map((op) => [op, []]));
  for (let i = 0; i < TRIALS; i++) {
    // Alternate which method goes first, so neither always runs on a warmer or cooler machine.
    for (const op of i % 2 ? [...ops].reverse() : ops) {
      const c0 = machineCpuSeconds();
      times[op]!.push(await call(page, op));
      cpus[op]!.push(machineCpuSeconds() - c0);
    }
  }
  const medians = (xs: Record<string, number[]>) => Object.fromEntries(ops.map((op) => [op, median(xs[op]!)]));
  return { ms: medians(times), cpu: medians(cpus) };
}

interface Heap {
  usedSize: number;
  backingStorageSize?: number;
}

/** Heap plus ArrayBuffer backing stores, in bytes. */
async function heapNow(cdp: CDPSession): Promise<number> {
  const h = await cdp.send("Runtime.getHeapUsage") as Heap;
  if (h.backingStorageSize === undefined) {
    throw new Error("this Chromium's Runtime.getHeapUsage has no backingStorageSize");
  }
  return h.usedSize + h.backingStorageSize;
}

/** Peak of heap + backing stores above the level before `op`, sampled while it runs; in bytes. */
async function peakDuring(page: Page, cdp: CDPSession, op: Op): Promise<{ peak: number; samples: number }> {
  await cdp.send("HeapProfiler.collectGarbage");
  const base = await heapNow(cdp);
  let peak = base;
  let samples = 0;
  let running = true;
  const sampler = (async () => {
    while (running) {
      peak = Math.max(peak, await heapNow(cdp));
      samples++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    await call(page, op);
  } finally {
    running = false;
    await sampler;
  }
  return { peak: peak - base, samples };
}

const OPTIONS = { entries: { bench: "bench/_web_page.ts" } };
const site = await serveSite(OPTIONS);
const rows: string[] = [];
const row = (...cells: string[]) => {
  rows.push(`| ${cells.join(" | ")} |`);
  console.log(rows.at(-1));
};
console.log(
  `${navigator.hardwareConcurrency} cores, ${new Date().toISOString().slice(0, 10)}; ` +
    `medians of ${TRIALS} interleaved trials after a warm-up\n`,
);
row("engine", "what", "MiB", "ckpt", "peer", "ckpt speed ÷ peer speed");
row("---", "---", "---:", "---:", "---:", "---:");
try {
  for (const engine of WANTED) {
    const session = await openSession(engine, site, OPTIONS);
    console.log(`${engine}: ${session.browser.version}`);
    try {
      await bench(engine, session.page);
    } finally {
      await session.close();
    }
  }
} finally {
  await site.close();
}

async function bench(engine: Engine, page: Page): Promise<void> {
  const cdp: CDPSession | undefined = engine === "chromium" ? await page.puppeteer!.createCDPSession() : undefined;
  const row = (...cells: string[]) => {
    rows.push(`| ${[engine, ...cells].join(" | ")} |`);
    console.log(rows.at(-1));
  };
  // What earlier runs left counts against the quota (WebKit's refused a run so): start empty.
  const q = await page.evaluate(() => m.emptyOpfs());
  console.log(
    `${engine}: OPFS emptied (${q.removed} entries); the engine allows ${(q.quota / MiB).toFixed(0)} MiB ` +
      `(navigator.storage.estimate(): quota ${q.quota} bytes, ${q.usage} used)`,
  );
  for (const mib of SIZES) {
    await page.evaluate((mib: number, t: number) => m.makeTensors(mib, t), mib, TENSOR_MIB);
    const { ms: r, cpu: rc } = await interleaved(page, [
      "rawWrite",
      "ckptSave",
      "recordSha256",
      "rawWriteWhileHashing",
      "rawWritePiped",
    ]);
    const w = [mbs(mib, r.ckptSave!), mbs(mib, r.rawWrite!)];
    row(
      "save to OPFS vs raw `createWritable()` write",
      String(mib),
      `${r.ckptSave!.toFixed(0)} ms (${w[0]!.toFixed(0)} MB/s)`,
      `${r.rawWrite!.toFixed(0)} ms (${w[1]!.toFixed(0)} MB/s)`,
      `${(w[0]! / w[1]!).toFixed(2)}×`,
    );
    const { ms: l, cpu: lc } = await interleaved(page, ["rawRead", "ckptLoad", "webCryptoSha256"]);
    const rd = [mbs(mib, l.ckptLoad!), mbs(mib, l.rawRead!)];
    row(
      "load + verify from OPFS vs raw `File.arrayBuffer()` (target ≥ 0.8×)",
      String(mib),
      `${l.ckptLoad!.toFixed(0)} ms (${rd[0]!.toFixed(0)} MB/s)`,
      `${l.rawRead!.toFixed(0)} ms (${rd[1]!.toFixed(0)} MB/s)`,
      `${(rd[0]! / rd[1]!).toFixed(2)}×`,
    );
    // The physical limit: a load + verify can be no faster than the raw read into fresh memory,
    // nor than SHA-256 over the same bytes by the platform's own (WebCrypto: ckpt's load runs it
    // on a worker while the page's thread reads, so the two overlap); a save no faster than the
    // raw write, nor than that hash.
    const hash = l.webCryptoSha256!;
    for (
      const [what, ckptMs, rawMs, raw] of [
        ["load + verify", l.ckptLoad!, l.rawRead!, "raw read"],
        ["save", r.ckptSave!, r.rawWrite!, "raw write"],
      ] as const
    ) {
      const limit = Math.max(rawMs, hash);
      row(
        `${what}: physical limit, the larger of the ${raw} (${
          rawMs.toFixed(0)
        } ms) and WebCrypto SHA-256 over the same bytes (${hash.toFixed(0)} ms)`,
        String(mib),
        `${ckptMs.toFixed(0)} ms (${mbs(mib, ckptMs).toFixed(0)} MB/s)`,
        `${limit.toFixed(0)} ms (${mbs(mib, limit).toFixed(0)} MB/s)`,
        `${(limit / ckptMs).toFixed(2)}×`,
      );
    }
    // A caller's own arrays have no room in front for a record prefix: their save copies each
    // record of up to 4 MiB + 64 KiB into one buffer for one WebCrypto call (larger ones: the
    // incremental WebAssembly SHA-256), one record after another, while the engine writes. Its
    // bound is the larger of the raw write and that hash, or, where the two contend for the
    // cores, the two run at once.
    const hashed = r.recordSha256!;
    const both = r.rawWriteWhileHashing!;
    const bound = Math.max(r.rawWrite!, hashed);
    row(
      `save of a caller's own arrays: its bound, the larger of the raw write (${
        r.rawWrite!.toFixed(0)
      } ms) and ckpt's hash of the same records as the save does it (a copy + WebCrypto per record up to 4 MiB, ` +
        `else WebAssembly: ${hashed.toFixed(0)} ms); the raw write with that hash at once: ${both.toFixed(0)} ms`,
      String(mib),
      `${r.ckptSave!.toFixed(0)} ms (${mbs(mib, r.ckptSave!).toFixed(0)} MB/s)`,
      `${bound.toFixed(0)} ms (${mbs(mib, bound).toFixed(0)} MB/s); at once ${both.toFixed(0)} ms (${
        (both / r.ckptSave!).toFixed(2)
      }×)`,
      `${(bound / r.ckptSave!).toFixed(2)}×`,
    );
    const piped = r.rawWritePiped!; // NaN in the page, null once it crossed to here
    row(
      "raw write through a worker's sync access handle (the page copies each 1 MiB into reused buffers it " +
        "transfers there, as a ckpt save from a page does) vs raw `createWritable()`",
      String(mib),
      !(piped > 0)
        ? "none: this engine gives its workers no sync access handle"
        : `${piped.toFixed(0)} ms (${mbs(mib, piped).toFixed(0)} MB/s); machine CPU ${rc.rawWritePiped!.toFixed(2)} s`,
      `${r.rawWrite!.toFixed(0)} ms; machine CPU ${rc.rawWrite!.toFixed(2)} s`,
      !(piped > 0) ? "" : `${(r.rawWrite! / piped).toFixed(2)}×`,
    );
    // Where the browser's processes together need more CPU than the cores give, the cores are the
    // bound: the machine's CPU for the raw operation plus that for the hash, over the cores.
    const cores = navigator.hardwareConcurrency;
    for (
      const [what, ckptMs, ckptCpu, rawCpu, raw, hashCpu, hashed] of [
        ["load + verify", l.ckptLoad!, lc.ckptLoad!, lc.rawRead!, "raw read", lc.webCryptoSha256!, "WebCrypto SHA-256"],
        [
          "save",
          r.ckptSave!,
          rc.ckptSave!,
          rc.rawWrite!,
          "raw write",
          rc.recordSha256!,
          "the hash as the save does it",
        ],
      ] as const
    ) {
      const limit = ((rawCpu + hashCpu) / cores) * 1000;
      row(
        `${what}: CPU bound, the machine's CPU (every process) for the ${raw} (${rawCpu.toFixed(2)} s) + ${hashed} ` +
          `(${hashCpu.toFixed(2)} s), over ${cores} cores; ckpt's machine CPU ${ckptCpu.toFixed(2)} s`,
        String(mib),
        `${ckptMs.toFixed(0)} ms (${mbs(mib, ckptMs).toFixed(0)} MB/s)`,
        `${limit.toFixed(0)} ms (${mbs(mib, limit).toFixed(0)} MB/s)`,
        `${(limit / ckptMs).toFixed(2)}×`,
      );
    }
    // Where that save's time goes beside the raw write's (one traced save after the rounds).
    const p = await page.evaluate(() => m.ckptSavePhases());
    row(
      "save of a caller's own arrays: where its time goes (one save, every `write()` and WebCrypto call timed)",
      String(mib),
      `${p.total.toFixed(0)} ms: ${p.bodies} large writes ${p.bodyMs.toFixed(0)} ms (${
        (p.bodyMs / Math.max(1, p.bodies)).toFixed(1)
      } ms each; the raw write's ${(r.rawWrite! / tensorsOf(mib)).toFixed(1)}), ${p.small} small writes (a digest + ` +
        `the next prefix) ${p.smallMs.toFixed(0)} ms, no write in flight ${
          p.noWrite.toFixed(0)
        } ms, before the first ` +
        `and after the last write ${p.outside.toFixed(0)} ms (opening the store's writer ${
          p.openMs.toFixed(0)
        } ms, closing it ${p.closeMs.toFixed(0)} ms); ${p.hashes} WebCrypto calls: ${
          p.hashCallMs.toFixed(0)
        } ms inside the calls on the page's thread, ${p.hashMs.toFixed(0)} ms from call to digest`,
      "",
      "",
    );
    // The page stays responsive while a worker saves: the longest main-thread task meanwhile.
    const tasks = [];
    for (let i = 0; i < TRIALS; i++) tasks.push(await page.evaluate(() => m.backgroundSaveLongestTask()));
    const longTasks = tasks.map((t) => t.longTask).filter((t): t is number => t !== null);
    row(
      "`BackgroundWriter` save to OPFS: longest main-thread task meanwhile (PerformanceObserver `longtask`; " +
        "longest `setTimeout(0)` gap)",
      String(mib),
      `${longTasks.length ? `${Math.max(...longTasks).toFixed(0)} ms` : "no longtask entries in this engine"}; ` +
        `${Math.max(...tasks.map((t) => t.gap)).toFixed(0)} ms gap`,
      `save ${median(tasks.map((t) => t.ms)).toFixed(0)} ms`,
      "",
    );
  }
  for (const mib of BYTEGROUP_SIZES) {
    // Byte-grouped against uncompressed, both ckpt, on N(0, 0.02) weights: what a page pays for
    // the smaller file (CompressionStream / DecompressionStream: deflate at zlib's default level,
    // not the Huffman-only deflate node:zlib allows).
    await page.evaluate((mib: number, t: number) => m.makeTensors(mib, t, "weights"), mib, TENSOR_MIB);
    const s = (await interleaved(page, ["ckptSave", "ckptSaveBytegroup"])).ms;
    const l = (await interleaved(page, ["ckptLoad", "ckptLoadBytegroup"])).ms;
    const ratio = await page.evaluate(() => m.bytegroupRatio());
    row(
      `byte-grouped save to OPFS vs uncompressed (N(0, 0.02) weights, file ${ratio.toFixed(3)} of the size)`,
      String(mib),
      `${s.ckptSaveBytegroup!.toFixed(0)} ms (${mbs(mib, s.ckptSaveBytegroup!).toFixed(0)} MB/s)`,
      `${s.ckptSave!.toFixed(0)} ms (${mbs(mib, s.ckptSave!).toFixed(0)} MB/s)`,
      `${(s.ckptSave! / s.ckptSaveBytegroup!).toFixed(2)}×`,
    );
    row(
      "byte-grouped load + verify from OPFS vs uncompressed",
      String(mib),
      `${l.ckptLoadBytegroup!.toFixed(0)} ms (${mbs(mib, l.ckptLoadBytegroup!).toFixed(0)} MB/s)`,
      `${l.ckptLoad!.toFixed(0)} ms (${mbs(mib, l.ckptLoad!).toFixed(0)} MB/s)`,
      `${(l.ckptLoad! / l.ckptLoadBytegroup!).toFixed(2)}×`,
    );
  }
  await page.evaluate(() => m.makeTensors(0, 1));
  for (const mib of MODEL_SIZES) {
    const bytes = await page.evaluate((mib: number) => m.makeModel(mib, mib >= 32 ? 2048 : 1024), mib);
    const size = (bytes / MiB).toFixed(0);
    await page.evaluate(() => m.takeWatchedSaves());
    // With the bound's parts (below) in the same rounds, so that they share the machine's state.
    const { ms: s } = await interleaved(page, [
      "idbSave",
      "ckptModelSave",
      "ckptModelSavePooled",
      "ckptModelSaveBackground",
      "modelSnapshot",
      "rawModelWriteWorker",
      "modelWebCryptoSha256",
    ]);
    const watched = (await page.evaluate(() => m.takeWatchedSaves())).slice(1); // after the warm-up round
    row(
      "tfjs model: `snapshot` + save to OPFS vs `model.save('indexeddb://…')`",
      size,
      `${s.ckptModelSave!.toFixed(0)} ms`,
      `${s.idbSave!.toFixed(0)} ms`,
      `${(s.idbSave! / s.ckptModelSave!).toFixed(2)}×`,
    );
    row(
      "the same, `snapshot` into a `StagingPool` (reused buffers, as in a training loop)",
      size,
      `${s.ckptModelSavePooled!.toFixed(0)} ms`,
      `${s.idbSave!.toFixed(0)} ms`,
      `${(s.idbSave! / s.ckptModelSavePooled!).toFixed(2)}×`,
    );
    // How a page saves while it trains: `CheckpointWriter` (snapshot into its pool, the buffer
    // moved to its worker, which hashes with WebCrypto and writes through a sync access handle).
    const idb = s.idbSave!;
    const bg = s.ckptModelSaveBackground!;
    row(
      "tfjs model: `CheckpointWriter.save` (snapshot, then its worker saves to OPFS) vs " +
        "`model.save('indexeddb://…')`, end to end (target ≥ 1.0×)",
      size,
      `${bg.toFixed(0)} ms`,
      `${idb.toFixed(0)} ms`,
      `${(idb / bg).toFixed(2)}×`,
    );
    // A task shorter than 50 ms is never reported as a long task: then the bound is that.
    const longTasks = watched.map((w) => w.longTask).filter((t): t is number => t !== null);
    const longest = longTasks.length ? Math.max(...longTasks) : undefined;
    const gaps = watched.map((w) => w.gap);
    const [taskText, blocked] = longest === undefined
      ? ["no longtask entries in this engine", median(gaps)]
      : longest === 0
      ? ["no task of 50 ms or more", 50]
      : [`${longest.toFixed(0)} ms`, longest];
    row(
      "the same: the page's main thread meanwhile, its longest task (PerformanceObserver `longtask`; else the median " +
        "longest `setTimeout(0)` gap) over `model.save`'s time (target ≤ 0.2×)",
      size,
      `${taskText}; \`setTimeout(0)\` gap ${median(gaps).toFixed(0)} ms (median; max ${Math.max(...gaps).toFixed(0)})`,
      `${idb.toFixed(0)} ms`,
      `${longest === 0 ? "< " : ""}${(blocked / idb).toFixed(2)}×${
        longest === undefined ? "" : ` (gap ${(median(gaps) / idb).toFixed(2)}×)`
      }`,
    );
    // Its physical limit: the copy out of TF.js, then the larger of the raw write a worker can
    // do and WebCrypto SHA-256 over the same bytes (the worker hashes while it writes).
    const b = s;
    const via = await page.evaluate(() => m.rawModelWriteVia());
    const limit = b.modelSnapshot! + Math.max(b.rawModelWriteWorker!, b.modelWebCryptoSha256!);
    row(
      `the same: physical limit, the copy out of TF.js (\`snapshot\` into a pool, ${
        b.modelSnapshot!.toFixed(0)
      } ms) + the larger of a raw write in a worker (${via}, moved over its name: ${
        b.rawModelWriteWorker!.toFixed(0)
      } ms) and WebCrypto SHA-256 over the same bytes (${b.modelWebCryptoSha256!.toFixed(0)} ms)`,
      size,
      `${bg.toFixed(0)} ms`,
      `${limit.toFixed(0)} ms`,
      `${(limit / bg).toFixed(2)}×`,
    );
    // Chromium's `crypto.subtle.digest` hashes on the calling thread before it returns (48 MiB:
    // the call took as long as the hash), so on the worker's one thread the two add up.
    const serial = b.modelSnapshot! + b.rawModelWriteWorker! + b.modelWebCryptoSha256!;
    row(
      "the same: its bound on one worker thread, the copy + the raw write + SHA-256 one after the other " +
        "(Chromium's `crypto.subtle.digest` hashes on the calling thread before it returns)",
      size,
      `${bg.toFixed(0)} ms`,
      `${serial.toFixed(0)} ms`,
      `${(serial / bg).toFixed(2)}×`,
    );
    const { ms: l } = await interleaved(page, ["idbLoad", "ckptModelLoad"]);
    row(
      "tfjs model: load + verify + `restore` vs `tf.loadLayersModel('indexeddb://…')`",
      size,
      `${l.ckptModelLoad!.toFixed(0)} ms`,
      `${l.idbLoad!.toFixed(0)} ms`,
      `${(l.idbLoad! / l.ckptModelLoad!).toFixed(2)}×`,
    );
  }
  if (HEAP_MIB > 0 && cdp) {
    await page.evaluate(() => m.makeModel(0, 1));
    await page.evaluate((mib: number, t: number) => m.makeTensors(mib, t), HEAP_MIB, TENSOR_MIB);
    await call(page, "ckptSave");
    const peaks: number[] = [];
    let samples = Infinity;
    for (let i = 0; i < 3; i++) {
      const p = await peakDuring(page, cdp, "ckptSave");
      peaks.push(p.peak);
      samples = Math.min(samples, p.samples);
    }
    row(
      "peak heap + ArrayBuffers above the tensors during a save to OPFS",
      String(HEAP_MIB),
      `${(median(peaks) / MiB).toFixed(1)} MiB (≥ ${samples} samples per save)`,
      "",
      "",
    );
    await page.evaluate(() => m.makeTensors(0, 1));
    await page.evaluate((mib: number) => m.makeModel(mib, 2048), HEAP_MIB);
    const idb: number[] = [];
    const ours: number[] = [];
    for (let i = 0; i < 3; i++) {
      idb.push((await peakDuring(page, cdp, "idbSave")).peak);
      ours.push((await peakDuring(page, cdp, "ckptModelSave")).peak);
    }
    row(
      "tfjs model: peak above the model, `snapshot` + save vs `model.save('indexeddb://…')`",
      String(HEAP_MIB),
      `${(median(ours) / MiB).toFixed(1)} MiB`,
      `${(median(idb) / MiB).toFixed(1)} MiB`,
      `${(median(ours) / median(idb)).toFixed(2)}× the memory`,
    );
  }
  if (LARGE_MIB > 0) {
    await page.evaluate(() => m.makeModel(0, 1));
    await page.evaluate((mib: number, t: number) => m.makeTensors(mib, t), LARGE_MIB, TENSOR_MIB);
    const peak = async (op: Op) => cdp ? (await peakDuring(page, cdp, op)).peak : undefined;
    const t0 = performance.now();
    const savePeak = await peak("ckptSave") ?? await call(page, "ckptSave");
    const saveMs = performance.now() - t0;
    const t1 = performance.now();
    const loadPeak = await peak("ckptLoad") ?? await call(page, "ckptLoad");
    const loadMs = performance.now() - t1;
    const mem = (b: number) => cdp ? `, peak ${(b / MiB).toFixed(0)} MiB above the tensors` : "";
    row(
      "one large checkpoint, tensor by tensor: save to OPFS / load + verify",
      String(LARGE_MIB),
      `${saveMs.toFixed(0)} ms${mem(savePeak)} / ${loadMs.toFixed(0)} ms${mem(loadPeak)}`,
      "",
      "",
    );
  }
  await page.evaluate(() => m.cleanUp());
}
