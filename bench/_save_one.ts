// One measured operation in its own process, so peak RSS belongs to it alone. Prints one JSON line.
// Used by bench/compare_save.ts; not meant to be run by hand.
import { parseArgs } from "node:util";
import { CheckpointManager, loadCheckpoint, saveCheckpoint, type TensorInput } from "../mod.ts";
import { decodeCheckpoint, verifyCheckpoint } from "../mod.ts";
import process from "node:process";
import { freshBuffer } from "../src/storage/_huge_pages.ts";
import { BackgroundWriter } from "../src/background/writer.ts";

const { values } = parseArgs({
  options: {
    op: { type: "string" },
    mib: { type: "string" },
    out: { type: "string" },
    codec: { type: "string", default: "binary" },
    gzip: { type: "boolean", default: false },
    warm: { type: "boolean", default: false },
    sha256sum: { type: "boolean", default: false },
    saves: { type: "string", default: "4" },
    "no-recycle": { type: "boolean", default: false },
    "two-threads": { type: "boolean", default: false },
    "one-thread": { type: "boolean", default: false },
    copy: { type: "boolean", default: false },
  },
});
const TENSOR_MIB = 16;
const total = Number(values.mib) * 2 ** 20;
const out = values.out!;

/** Deterministic weights-like floats (compressible like real weights, unlike random bytes). */
export function fillWeights(a: Float32Array, seed: number): void {
  let x = seed * 2654435761 >>> 0;
  for (let i = 0; i < a.length; i++) {
    x = (x * 1664525 + 1013904223) >>> 0;
    a[i] = ((x >>> 8) / 16777216 - 0.5) * 0.02;
  }
}

/** The model: one reused buffer per tensor slot would hide allocation; we hold real tensors. */
function model(): TensorInput[] {
  const n = Math.ceil(total / (TENSOR_MIB * 2 ** 20));
  const tensors: TensorInput[] = [];
  for (let i = 0; i < n; i++) {
    const bytes = Math.min(TENSOR_MIB * 2 ** 20, total - i * TENSOR_MIB * 2 ** 20);
    const data = new Float32Array(bytes / 4);
    fillWeights(data, i + 1);
    tensors.push({ name: `layer${i}/kernel`, dtype: "float32", shape: [data.length], data });
  }
  return tensors;
}

/** Peak RSS from /proc (NaN where that is not readable: another OS, or a run with a permission denied). */
function peakRss(): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(Deno.readTextFileSync("/proc/self/status"));
    return m ? Number(m[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}
function rss(): number {
  return Deno.memoryUsage().rss;
}

/**
 * Prints a load's line: its time since `t0`, and the CPU time of every thread since `cpu0` (user
 * + system, and user alone: what survives a loaded machine, unlike `seconds`).
 */
function reportLoad(t0: number, cpu0: NodeJS.CpuUsage, tensors: number, baseRss: number): void {
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  console.log(JSON.stringify({ seconds, cpuSeconds, cpuUser: cpu.user / 1e6, tensors, peakRss: peakRss(), baseRss }));
}

const op = values.op;
if (op === "raw") {
  // The raw tensor bytes, for dd to copy.
  const f = await Deno.open(out, { write: true, create: true, truncate: true });
  for (const t of model()) {
    const b = new Uint8Array(t.data.buffer);
    let o = 0;
    while (o < b.length) o += await f.write(b.subarray(o));
  }
  f.close();
  console.log(JSON.stringify({ ok: true }));
} else if (op === "save") {
  const tensors = model();
  if (values.warm) {
    // Steady state, as in a training run that checkpoints periodically: one small save first
    // compiles the code paths and touches the staging buffers.
    await saveCheckpoint(out + ".warm", {
      metadata: { step: 0 },
      tensors: [{ ...tensors[0]!, data: tensors[0]!.data.subarray(0, 2 ** 21) as Float32Array, shape: [2 ** 21] }],
    }, {
      codec: values.codec as "binary" | "json",
      compression: values.gzip ? "gzip" : "none",
    });
    await Deno.remove(out + ".warm");
  }
  const before = rss();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await saveCheckpoint(out, { metadata: { step: 1 }, tensors }, {
    codec: values.codec as "binary" | "json",
    compression: values.gzip ? "gzip" : "none",
    sha256sum: values.sha256sum,
  });
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  console.log(
    JSON.stringify({ seconds, cpuSeconds, bytes: r.bytes, sha256: r.sha256, peakRss: peakRss(), baseRss: before }),
  );
} else if (op === "background") {
  // A BackgroundWriter save, as Orbax and DCP's async_save report theirs: how long save() blocks
  // the caller, and how long until the checkpoint is durable. The writer (its worker) is made and
  // one small save run first, as in a training loop that checkpoints periodically. `--copy`: the
  // caller keeps its arrays (they are copied on the calling thread first, as Orbax and DCP stage
  // theirs); without it save() moves their buffers to the worker.
  const tensors = model();
  const writer = new BackgroundWriter({ idleTimeout: Infinity });
  const small = new Float32Array(2 ** 21);
  await writer.save(out + ".warm", {
    metadata: { step: 0 },
    tensors: [{ name: "warm", dtype: "float32", shape: [small.length], data: small }],
  });
  await Deno.remove(out + ".warm");
  const t0 = performance.now();
  const given = values.copy ? tensors.map((t) => ({ ...t, data: t.data.slice() })) : tensors;
  const saving = writer.save(out, { metadata: { step: 1 }, tensors: given });
  const blocked = (performance.now() - t0) / 1000;
  const r = await saving;
  const seconds = (performance.now() - t0) / 1000;
  await writer.close();
  console.log(JSON.stringify({ seconds, blocked, bytes: r.bytes, peakRss: peakRss() }));
} else if (op === "manager") {
  // A training loop's steady state: a manager keeping 2 checkpoints saves --saves times; from the
  // third save on, retention deletes one checkpoint per save. Reports every save's time.
  const tensors = model();
  await Deno.remove(out, { recursive: true }).catch(() => {});
  const manager = await CheckpointManager.open(out, { maxToKeep: 2, recycle: !values["no-recycle"] });
  const seconds: number[] = [];
  for (let step = 1; step <= Number(values.saves); step++) {
    tensors[0]!.data[0] = step; // a different checkpoint each time
    const t0 = performance.now();
    await manager.save({ metadata: { step }, tensors });
    seconds.push((performance.now() - t0) / 1000);
  }
  await manager.close();
  const steady = seconds.slice(2).sort((a, b) => a - b);
  const median = steady.length ? steady[steady.length >> 1]! : seconds.at(-1)!;
  console.log(JSON.stringify({ seconds: median, all: seconds, peakRss: peakRss() }));
} else if (op === "probe") {
  // How fast this process touches fresh memory: the regime every other row runs in.
  const t0 = performance.now();
  const a = new Uint8Array(total);
  for (let i = 0; i < a.length; i += 4096) a[i] = 1;
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds, bytes: a.length }));
} else if (op === "settle") {
  // Touches and frees `--mib` in 2 MiB pages (where FFI is granted, as a load's tensor buffers),
  // so that the next process finds memory its VM backs: see `settle` in bench/compare_save.ts.
  const t0 = performance.now();
  const held: Uint8Array[] = [];
  for (let left = total; left > 0; left -= TENSOR_MIB * 2 ** 20) {
    const b = freshBuffer(Math.min(left, TENSOR_MIB * 2 ** 20));
    for (let i = 0; i < b.length; i += 4096) b[i] = 1;
    held.push(b);
  }
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds, bytes: held.reduce((n, b) => n + b.length, 0) }));
} else if (op === "save-lazy") {
  // Tensors produced one at a time and dropped after writing: memory must stay bounded.
  const before = rss();
  const n = Math.ceil(total / (TENSOR_MIB * 2 ** 20));
  const lazy = async function* (): AsyncGenerator<TensorInput> {
    for (let i = 0; i < n; i++) {
      const data = new Float32Array(TENSOR_MIB * 2 ** 18);
      fillWeights(data, i + 1);
      yield { name: `layer${i}/kernel`, dtype: "float32", shape: [data.length], data };
    }
  };
  const t0 = performance.now();
  const r = await saveCheckpoint(out, { metadata: { step: 1 }, tensors: lazy() });
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds, bytes: r.bytes, peakRss: peakRss(), baseRss: before }));
} else if (op === "save-lazy-pooled") {
  // Like save-lazy, but the producer cycles through two buffers, as a snapshot staging pool does.
  // Both are filled before the starting RSS is taken, so the growth is ckpt's own footprint.
  const n = Math.ceil(total / (TENSOR_MIB * 2 ** 20));
  const pool = [new Float32Array(TENSOR_MIB * 2 ** 18), new Float32Array(TENSOR_MIB * 2 ** 18)];
  pool.forEach((a, i) => fillWeights(a, i + 1));
  const before = rss();
  const lazy = async function* (): AsyncGenerator<TensorInput> {
    for (let i = 0; i < n; i++) {
      const data = pool[i % 2]!;
      fillWeights(data, i + 1);
      yield { name: `layer${i}/kernel`, dtype: "float32", shape: [data.length], data };
    }
  };
  const t0 = performance.now();
  const r = await saveCheckpoint(out, { metadata: { step: 1 }, tensors: lazy() });
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds, bytes: r.bytes, sha256: r.sha256, peakRss: peakRss(), baseRss: before }));
} else if (op === "load") {
  const before = rss();
  const t0 = performance.now();
  // The default (two threads for a local file of 64 MiB or more); `--two-threads` adds the
  // transfer scheme of `parallelHash: true`.
  const parallelHash = values["two-threads"] ? true : values["one-thread"] ? false : undefined;
  const cpu0 = process.cpuUsage();
  const c = await loadCheckpoint(out, { parallelHash });
  reportLoad(t0, cpu0, c.tensors.length, before);
} else if (op === "read-raw") {
  // The file read whole into fresh memory, nothing checked: with the hash, the physical limit of
  // the load rows. The memory is what ckpt's loads read into (`freshBuffer`: 2 MiB pages where
  // FFI is granted), one buffer per 16 MiB as the tensors are, and every buffer is kept to the
  // end, as a load keeps its tensors: dropped, later buffers reused the memory of earlier ones
  // (a peak RSS of ~170 MiB for 512 MiB read), so the read touched less fresh memory than a load.
  const before = rss();
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const file = await Deno.open(out);
  let size = (await file.stat()).size;
  const kept: Uint8Array[] = [];
  while (size > 0) {
    const b = freshBuffer(Math.min(size, TENSOR_MIB * 2 ** 20));
    kept.push(b);
    for (let at = 0; at < b.length;) {
      const n = await file.read(b.subarray(at));
      if (n === null) throw new Error(`${out} ended early`);
      at += n;
    }
    size -= b.length;
  }
  file.close();
  reportLoad(t0, cpu0, kept.length, before);
} else if (op === "load-into") {
  // A restore into the tensors a process already has (a model built before it resumes): their
  // buffers are made and touched first, untimed; the load reads into them (`into`).
  const into = new Map<string, Float32Array>();
  for (let i = 0, left = total; left > 0; i++, left -= TENSOR_MIB * 2 ** 20) {
    into.set(`layer${i}/kernel`, new Float32Array(Math.min(left, TENSOR_MIB * 2 ** 20) / 4).fill(1));
  }
  const before = rss();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const c = await loadCheckpoint(out, { into });
  reportLoad(t0, cpu0, c.tensors.length, before);
} else if (op === "load-stream") {
  // Tensor by tensor, each dropped after use: memory must stay bounded.
  const before = rss();
  const t0 = performance.now();
  let n = 0;
  const options = { reuseBuffers: true, parallelHash: values["two-threads"] ? true : undefined };
  for await (const r of decodeCheckpoint(out, options)) if (r.type === "tensor") n++;
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds, tensors: n, peakRss: peakRss(), baseRss: before }));
} else if (op === "verify") {
  // Every digest checked, no tensor kept (what `ckpt verify` does).
  const before = rss();
  const t0 = performance.now();
  const { tensors } = await verifyCheckpoint(out, { parallelHash: !values["one-thread"] });
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds, tensors: tensors.length, peakRss: peakRss(), baseRss: before }));
} else if (op === "naive") {
  // The naive way: a fresh 1 MiB chunk per write, awaited one by one, then fsync.
  const tensors = model();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const f = await Deno.open(out, { write: true, create: true, truncate: true });
  for (const t of tensors) {
    const b = new Uint8Array(t.data.buffer);
    for (let o = 0; o < b.length; o += 2 ** 20) {
      const chunk = b.slice(o, o + 2 ** 20);
      let w = 0;
      while (w < chunk.length) w += await f.write(chunk.subarray(w));
    }
  }
  await f.syncData();
  f.close();
  const cpu = process.cpuUsage(cpu0);
  console.log(
    JSON.stringify({
      seconds: (performance.now() - t0) / 1000,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      peakRss: peakRss(),
    }),
  );
} else {
  throw new TypeError(`unknown --op ${op}`);
}
