/**
 * Side by side against one S3 endpoint (the local Ceph RGW from `deno task store:start`, or
 * whatever the AWS_* variables name), on the same tensors, trials interleaved:
 *
 * - save: ckpt to `s3://` (encode + SHA-256 + multipart upload) vs the same S3 client uploading
 *   the tensors' raw bytes (no encoding, no hashing: the floor of the network path) vs ckpt to a
 *   local file;
 * - load: ckpt from `s3://` with every digest verified (one GET, each body read from the response
 *   straight into its tensor's buffer: written there by the transport where FFI is granted, else
 *   copied from the reader's buffer: src/storage/object_reader.ts) vs the same with
 *   `readConcurrency: 4` (parallel ranged GETs of 8 MiB) vs ckpt decoding the stream of one GET
 *   (the path before) vs the plain download of the object vs ckpt from the local file;
 * - peak RSS of a large save to `s3://` of tensors pulled one at a time (views of one buffer, so
 *   the input makes no garbage), in its own process.
 *
 * Under the table, each direction's physical limit (bench/_bounds.ts): for the loads, the larger
 * of the plain download read straight into fresh memory (buffers allocated as ckpt allocates
 * tensors, filled by the transport and kept to the end as a load keeps its tensors: the row "load
 * plain → fresh memory") and SHA-256 over the same bytes on the cores ckpt can use; for the
 * saves, the larger of the plain upload and the hash.
 *
 * Medians and ratios are printed, with each row's CPU time (the process's user + system time over
 * the operation: the RGW's own is not included), which a loaded machine changes far less than the
 * wall-clock time, and the whole machine's ("machine CPU", from /proc/stat: RGW's included, and any
 * other process's, so it means something only on a quiet machine). RGW shares the cores: the load
 * limit also holds the machine's CPU for the download into fresh memory plus one SHA-256 pass,
 * spread over all the cores, and under it ckpt's CPU beyond the plain download's is split into
 * the hash, the fresh memory a load keeps, and the rest.
 *
 *   deno task bench:s3 [--mib 256] [--trials 3] [--rss-mib 1024 (0: skip the RSS row)]
 *
 * @module
 */
import { parseArgs } from "node:util";
import process from "node:process";
// deno-lint-ignore no-import-prefix -- by full specifier, so the module loads without this repo's deno.json
import { AwsClient } from "npm:aws4fetch@1.0.20";
import { loadCheckpoint, saveCheckpoint, type TensorInput } from "../mod.ts";
import { DEFAULT_S3_CONCURRENCY, DEFAULT_S3_PART_SIZE, S3Store } from "../src/storage/s3.ts";
import { freshBuffer } from "../src/storage/_huge_pages.ts";
import {
  bound,
  hashPart,
  limitLine,
  loadAverage,
  machineCpuSeconds,
  sha256SecondsOneCore,
  usableCores,
} from "./_bounds.ts";

const { values } = parseArgs({
  options: {
    mib: { type: "string", default: "256" },
    trials: { type: "string", default: "3" },
    "rss-mib": { type: "string", default: "1024" },
    // internal: one RSS-measured save in a child process
    "child-save": { type: "string" },
    bucket: { type: "string" },
  },
});
const MiB = 2 ** 20;
const TENSOR_MIB = 16;
const env = (k: string, d: string) => Deno.env.get(k) || d;
const endpoint = env("AWS_ENDPOINT_URL", "http://127.0.0.1:7480");
const credentials = {
  accessKeyId: env("AWS_ACCESS_KEY_ID", "ckpt-local-access-key"),
  secretAccessKey: env("AWS_SECRET_ACCESS_KEY", "ckpt-local-secret-key"),
};
const region = env("AWS_REGION", "us-east-1");
const storage = { s3: { endpoint, credentials, region } };
const ranged = { s3: { ...storage.s3, readConcurrency: 4 } };

/** Deterministic weights-like floats. */
function fill(a: Float32Array, seed: number): void {
  let x = seed * 2654435761 >>> 0;
  for (let i = 0; i < a.length; i++) {
    x = (x * 1664525 + 1013904223) >>> 0;
    a[i] = ((x >>> 8) / 16777216 - 0.5) * 0.02;
  }
}

function tensorOf(i: number, bytes: number): TensorInput {
  const data = new Float32Array(bytes / 4);
  fill(data, i + 1);
  return { name: `layer${i}/kernel`, dtype: "float32", shape: [data.length], data };
}

/** Tensors of `mib` MiB in all, made one at a time as the save pulls them. */
async function* lazyTensors(mib: number): AsyncGenerator<TensorInput> {
  for (let i = 0, left = mib * MiB; left > 0; i++, left -= TENSOR_MIB * MiB) {
    yield tensorOf(i, Math.min(TENSOR_MIB * MiB, left));
  }
}

function peakRss(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(Deno.readTextFileSync("/proc/self/status"));
  return m ? Number(m[1]) * 1024 : NaN;
}

if (values["child-save"] !== undefined) {
  // One large save of tensors pulled one at a time, all views of one buffer (so the input makes no
  // garbage and what grows is the save's own memory); prints the RSS before and the peak after.
  const shared = new Float32Array(TENSOR_MIB * MiB / 4).fill(0.5);
  const count = Number(values["child-save"]) / TENSOR_MIB;
  const before = Deno.memoryUsage().rss;
  const { bytes } = await saveCheckpoint(`s3://${values.bucket}/rss.ckpt`, {
    metadata: { step: 1 },
    tensors: (async function* () {
      for (let i = 0; i < count; i++) {
        yield { name: `t${i}`, dtype: "float32" as const, shape: [shared.length], data: shared };
      }
    })(),
  }, { storage });
  console.log(JSON.stringify({ before, peak: peakRss(), bytes }));
  Deno.exit(0);
}

const mib = Number(values.mib);
const trials = Number(values.trials);
const rssMib = Number(values["rss-mib"]);
const bucket = `ckpt-bench-${Date.now().toString(36)}`;
const signer = new AwsClient({ ...credentials, service: "s3", region, retries: 0 });
const adminFetch = async (path: string, method: string) => {
  const res = await fetch(await signer.sign(new URL(path, endpoint).href, { method }));
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
};
await adminFetch(`/${bucket}`, "PUT");
const store = new S3Store({ bucket, endpoint, credentials, region });
const dir = await Deno.makeTempDir({ prefix: "ckpt-bench-s3-" });

const tensors: TensorInput[] = [];
for await (const t of lazyTensors(mib)) tensors.push(t);
const raw = tensors.map((t) => new Uint8Array((t.data as Float32Array).buffer));
const checkpoint = { metadata: { step: 1 }, tensors };

async function drain(body: ReadableStream<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of body) n += c.byteLength;
  return n;
}

const methods: Record<string, () => Promise<void>> = {
  "save ckpt → s3": async () => void await saveCheckpoint(`s3://${bucket}/ckpt.ckpt`, checkpoint, { storage }),
  "save plain upload": async () => {
    const w = await store.writer("plain.bin");
    for (const r of raw) await w.write(r);
    await w.close();
  },
  "save ckpt → file": async () => void await saveCheckpoint(`${dir}/ckpt.ckpt`, checkpoint),
  "load ckpt ← s3 + verify": async () => {
    const back = await loadCheckpoint(`s3://${bucket}/ckpt.ckpt`, { storage });
    if (back.tensors.length !== tensors.length) throw new Error("short load");
  },
  "load ckpt ← s3 4 ranges + verify": async () => {
    const back = await loadCheckpoint(`s3://${bucket}/ckpt.ckpt`, { storage: ranged });
    if (back.tensors.length !== tensors.length) throw new Error("short load");
  },
  "load ckpt ← one GET + verify": async () => {
    const back = await loadCheckpoint((await store.get("ckpt.ckpt")).body);
    if (back.tensors.length !== tensors.length) throw new Error("short load");
  },
  "load plain download": async () => {
    if (await drain((await store.get("plain.bin")).body) !== mib * MiB) throw new Error("short download");
  },
  "load plain → fresh memory": async () => {
    // The download read straight into fresh buffers of 16 MiB allocated as ckpt allocates tensors
    // (2 MiB pages where FFI is granted), each read handing the transport the rest of the buffer
    // (a byte stream's own-buffer read: no chunk, no copy), and kept to the end as a load keeps
    // its tensors (dropped, later buffers could reuse the memory of earlier ones, already touched):
    // the raw read of the load rows' limit.
    const { body, length } = await store.get("plain.bin");
    const reader = body.getReader({ mode: "byob" });
    const kept: Uint8Array[] = [];
    let left = length;
    while (left > 0) {
      const size = Math.min(left, 16 * MiB);
      let rest = freshBuffer(size);
      for (let at = 0; at < size;) {
        const { done, value } = await reader.read(rest);
        if (done) throw new Error("short download");
        at += value.byteLength;
        left -= value.byteLength;
        // The read took the buffer and gave it back (the same memory) with the bytes at its start.
        rest = new Uint8Array(value.buffer, value.byteOffset + value.byteLength, size - at);
      }
      kept.push(rest); // (a view of the buffer the last read gave back: the memory the bytes are in)
    }
    if (!(await reader.read(new Uint8Array(1))).done) throw new Error("long download");
    if (kept.length !== Math.ceil(length / (16 * MiB))) throw new Error("lost a buffer");
  },
  "load ckpt ← file + verify": async () => {
    const back = await loadCheckpoint(`${dir}/ckpt.ckpt`);
    if (back.tensors.length !== tensors.length) throw new Error("short load");
  },
};

const times: Record<string, number[]> = Object.fromEntries(Object.keys(methods).map((k) => [k, []]));
const cpus: Record<string, number[]> = Object.fromEntries(Object.keys(methods).map((k) => [k, []]));
const machine: Record<string, number[]> = Object.fromEntries(Object.keys(methods).map((k) => [k, []]));
const names = Object.keys(methods);
const saves = names.filter((n) => n.startsWith("save"));
const loads = names.filter((n) => n.startsWith("load"));
console.error(`${mib} MiB of float32 tensors, ${trials} interleaved trials, endpoint ${endpoint}`);
for (let t = 0; t < trials; t++) {
  // Saves first (loads read what they wrote), each group in a rotated order.
  for (const group of [saves, loads]) {
    const order = group.map((_, i) => group[(i + t) % group.length]!);
    for (const name of order) {
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const m0 = machineCpuSeconds();
      await methods[name]!();
      const c = process.cpuUsage(c0);
      times[name]!.push((performance.now() - t0) / 1000);
      cpus[name]!.push((c.user + c.system) / 1e6);
      machine[name]!.push(machineCpuSeconds() - m0);
    }
  }
  console.error(`trial ${t + 1}/${trials} done`);
}

const median = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const row = (name: string, base: string) => {
  const m = median(times[name]!);
  const ratio = median(times[base]!) / m;
  console.log(
    `| ${name.padEnd(32)} | ${m.toFixed(2).padStart(6)} s | ${(mib / m).toFixed(0).padStart(5)} MiB/s | ${
      ratio.toFixed(2).padStart(7)
    }× | ${median(cpus[name]!).toFixed(2).padStart(6)} s | ${median(machine[name]!).toFixed(2).padStart(8)} s |`,
  );
};
console.log(
  `\n| ${mib} MiB, median of ${trials}`.padEnd(35) + "| time     | speed       | vs plain | CPU time | machine CPU |",
);
console.log("|----------------------------------|----------|-------------|----------|----------|-------------|");
for (const n of saves) row(n, "save plain upload");
for (const n of loads) row(n, "load plain download");
const fileBytes = (await Deno.stat(`${dir}/ckpt.ckpt`)).size;
const hashOneCore = sha256SecondsOneCore(fileBytes);
const hash = hashPart(fileBytes, hashOneCore);
const saveLimit = bound([{ name: "plain upload", seconds: median(times["save plain upload"]!) }, hash]);
// The store shares this machine's cores: a load + verify needs at least the CPU the whole machine
// spends on the download into fresh memory (RGW's, the client's, the kernel's) plus one SHA-256
// pass over the bytes, and no split of that work runs faster than on all the cores at once.
const freshMachine = median(machine["load plain → fresh memory"]!);
const cores = usableCores();
const loadLimit = bound([
  { name: "plain download → fresh memory", seconds: median(times["load plain → fresh memory"]!) },
  hash,
  {
    name: `(whole machine's CPU, a bound only when nothing else runs: that download's ${
      freshMachine.toFixed(3)
    } s + SHA-256 on one core ${hashOneCore.toFixed(3)} s) / ${cores} cores`,
    seconds: (freshMachine + hashOneCore) / cores,
  },
]);
console.log(`\nload average ${loadAverage()}`);
console.log(limitLine("save → s3", saveLimit, median(times["save ckpt → s3"]!), "none (shown for reference)"));
console.log(
  limitLine("load ← s3 + verify", loadLimit, median(times["load ckpt ← s3 + verify"]!), "≥ 0.9× the plain download"),
);
// Where ckpt's CPU goes beyond the plain download's (this process only): the hash, the first touch
// of the memory a load keeps (the download into fresh memory, kept, less the plain one), the rest.
const cpuOf = (name: string) => median(cpus[name]!);
const extra = cpuOf("load ckpt ← s3 + verify") - cpuOf("load plain download");
const touch = cpuOf("load plain → fresh memory") - cpuOf("load plain download");
console.log(
  `| CPU of load ← s3 + verify over the plain download | ${extra.toFixed(3)} s = SHA-256 on one core ${
    hashOneCore.toFixed(3)
  } s + fresh memory kept ${touch.toFixed(3)} s + the rest ${(extra - hashOneCore - touch).toFixed(3)} s |`,
);

// Peak RSS of a large save, in its own process (`--rss-mib 0` skips it).
if (rssMib > 0) {
  const child = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, "--child-save", String(rssMib), "--bucket", bucket],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!child.success) throw new Error("the RSS child failed");
  const { before, peak } = JSON.parse(new TextDecoder().decode(child.stdout));
  const inFlight = DEFAULT_S3_PART_SIZE * (DEFAULT_S3_CONCURRENCY + 1);
  console.log(
    `\npeak RSS of a ${rssMib} MiB save to s3://: ${(peak / MiB).toFixed(0)} MiB, ${
      ((peak - before) / MiB).toFixed(0)
    } MiB above the ${(before / MiB).toFixed(0)} MiB before it started (parts in flight + the one filling: ${
      (inFlight / MiB).toFixed(0)
    } MiB)`,
  );
}

await store.sweep();
for await (const o of store.list()) await store.delete(o.key);
await adminFetch(`/${bucket}`, "DELETE");
await Deno.remove(dir, { recursive: true });
