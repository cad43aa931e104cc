/// <reference lib="dom" />
// The page side of bench/web_compare.ts (bundled with TF.js): each call does one timed operation
// in the page and returns its milliseconds, so the Deno side can interleave methods and take
// medians. The same tensors serve every method of a size.
import * as tf from "@tensorflow/tfjs";
import { loadCheckpoint, saveCheckpoint, type TensorInput } from "../mod.ts";
import { OpfsStore } from "../src/storage/opfs.ts";
import { CheckpointWriter, restore, snapshot, StagingPool } from "../src/tfjs/mod.ts";
import { BackgroundWriter } from "../src/background/writer.ts";
import { setWebDigestForTests, sha256, webDigest } from "../src/format/_hash.ts";
import type { ObjectWriter, WriteOptions } from "../src/storage/types.ts";
import { prefixRoom, WEB_COPY_MAX, WEB_RECORD_MIN } from "../src/format/codecs/binary.ts";

const MiB = 2 ** 20;
let tensors: TensorInput[] = [];
let store: OpfsStore | undefined;
let root: FileSystemDirectoryHandle | undefined;
let model: tf.LayersModel | undefined;
const pool = new StagingPool();
/** Keeps what a load returned alive until the next call, so the timing cannot be a dead store. */
let _retained: unknown;

/** Fills `n` bytes with a cheap pseudo-random pattern (incompressible, deterministic). */
function noise(n: number, seed: number): Float32Array {
  const u = new Uint32Array(n / 4);
  let x = seed | 1;
  for (let i = 0; i < u.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    u[i] = x & 0x3f7fffff; // finite floats in [0, 1)
  }
  return new Float32Array(u.buffer);
}

/** `n` bytes of seeded N(0, 0.02) float32: weights-like, so their exponent plane compresses. */
function weights(n: number, seed: number): Float32Array {
  const out = new Float32Array(n / 4);
  let x = seed | 1;
  const rand = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return ((x >>> 0) + 1) / 4294967297;
  };
  for (let i = 0; i < out.length; i += 2) {
    const r = Math.sqrt(-2 * Math.log(rand())) * 0.02;
    const t = 2 * Math.PI * rand();
    out[i] = r * Math.cos(t);
    if (i + 1 < out.length) out[i + 1] = r * Math.sin(t);
  }
  return out;
}

/** ckpt: the tensors saved to OPFS byte-grouped (`compression: "bytegroup"`). */
export function ckptSaveBytegroup(): Promise<number> {
  return timedSave("g.ckpt", "bytegroup");
}

/** ckpt: the byte-grouped save read back from OPFS (DecompressionStream in a page), every digest checked. */
export function ckptLoadBytegroup(): Promise<number> {
  return timedLoad("g.ckpt");
}

/** The size of the byte-grouped save over the uncompressed one (after one of each). */
export async function bytegroupRatio(): Promise<number> {
  const { root } = await opfs();
  const dir = await root.getDirectoryHandle("ckpt");
  const size = async (name: string) => (await (await dir.getFileHandle(name)).getFile()).size;
  return (await size("g.ckpt")) / (await size("a.ckpt"));
}

/**
 * Makes the tensors for one size: `mib` MiB in tensors of `tensorMib` MiB, of incompressible
 * noise or (`"weights"`, for the byte-grouped rows) N(0, 0.02) floats.
 */
export function makeTensors(mib: number, tensorMib: number, kind: "noise" | "weights" = "noise"): number {
  tensors = [];
  _retained = undefined;
  const fill = kind === "weights" ? weights : noise;
  for (let i = 0; i * tensorMib < mib; i++) {
    const bytes = Math.min(tensorMib, mib - i * tensorMib) * MiB;
    tensors.push({ name: `layer${i}/kernel`, dtype: "float32", shape: [bytes / 4], data: fill(bytes, i + 1) });
  }
  return tensors.length;
}

async function opfs(): Promise<{ store: OpfsStore; root: FileSystemDirectoryHandle }> {
  root ??= await (await navigator.storage.getDirectory()).getDirectoryHandle("bench", { create: true });
  store ??= await OpfsStore.open("bench/ckpt");
  return { store, root };
}

/** Milliseconds of one save of the tensors to OPFS under `key`. */
async function timedSave(key: string, compression: "none" | "bytegroup"): Promise<number> {
  const { store } = await opfs();
  const t0 = performance.now();
  await saveCheckpoint({ store, key }, { metadata: { step: 1 }, tensors }, { compression });
  return performance.now() - t0;
}

/** Milliseconds of one load of `key` from OPFS (kept alive until the next call). */
async function timedLoad(key: string): Promise<number> {
  const { store } = await opfs();
  _retained = undefined;
  const t0 = performance.now();
  const back = await loadCheckpoint({ store, key });
  const ms = performance.now() - t0;
  if (back.tensors.length !== tensors.length) throw new Error("ckpt load returned the wrong tensors");
  _retained = back;
  return ms;
}

/** ckpt: encode, hash and write the tensors to OPFS (temporary file, moved over the key). */
export function ckptSave(): Promise<number> {
  return timedSave("a.ckpt", "none");
}

/** ckpt: read from OPFS, decode and check every digest. */
export function ckptLoad(): Promise<number> {
  return timedLoad("a.ckpt");
}

/** The peer: the same bytes written to one OPFS file, tensor by tensor, no encoding, no hashing. */
export async function rawWrite(): Promise<number> {
  const { root } = await opfs();
  const t0 = performance.now();
  const w = await (await root.getFileHandle("raw.bin", { create: true })).createWritable();
  for (const t of tensors) await w.write(t.data as Float32Array<ArrayBuffer>);
  await w.close();
  return performance.now() - t0;
}

/** The peer: the same bytes read back from OPFS into memory, no decoding, no hashing. */
export async function rawRead(): Promise<number> {
  const { root } = await opfs();
  _retained = undefined;
  const t0 = performance.now();
  const bytes = await (await (await root.getFileHandle("raw.bin")).getFile()).arrayBuffer();
  const ms = performance.now() - t0;
  if (bytes.byteLength !== tensors.reduce((n, t) => n + t.data.byteLength, 0)) throw new Error("short raw read");
  _retained = bytes;
  return ms;
}

/**
 * The physical limit's other half: SHA-256 of the same bytes as `rawRead` by the platform's own
 * (`crypto.subtle.digest`, one call per tensor, all in flight at once). Nothing else happens in
 * the call, so the machine's CPU the bench takes around it is the hash's.
 */
export async function webCryptoSha256(): Promise<number> {
  const t0 = performance.now();
  await Promise.all(tensors.map((t) => crypto.subtle.digest("SHA-256", t.data as Float32Array<ArrayBuffer>)));
  return performance.now() - t0;
}

/**
 * The hash a save of a caller's own arrays does (no room in front of them for a record prefix),
 * as it does it: each record of 1 MiB to {@linkcode WEB_COPY_MAX} copied whole into one buffer and
 * hashed with one WebCrypto call, one record after another; larger ones (and smaller) by ckpt's
 * incremental WebAssembly SHA-256 in 4 MiB updates.
 */
export async function recordSha256(): Promise<number> {
  const t0 = performance.now();
  let copy = new Uint8Array(0);
  for (const t of tensors) {
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    const room = prefixRoom(t);
    if (bytes.byteLength >= WEB_RECORD_MIN && room + bytes.byteLength <= WEB_COPY_MAX) {
      if (copy.byteLength < room + bytes.byteLength) copy = new Uint8Array(room + bytes.byteLength);
      copy.set(bytes, room);
      await crypto.subtle.digest("SHA-256", copy.subarray(0, room + bytes.byteLength));
      continue;
    }
    const h = sha256();
    for (let i = 0; i < bytes.byteLength; i += 4 * MiB) h.update(bytes.subarray(i, i + 4 * MiB));
    h.digest();
  }
  return performance.now() - t0;
}

/** Where one {@linkcode ckptSave}'s time goes: see {@linkcode ckptSavePhases}. */
export interface SavePhases {
  /** The whole save, ms. */
  total: number;
  /** Writes of 64 KiB or more (the tensor bodies): how many, and the ms from each `write()` to its resolution, summed. */
  bodies: number;
  bodyMs: number;
  /** Smaller writes (a record's digest joined with the next record's prefix): how many, ms summed. */
  small: number;
  smallMs: number;
  /** Ms between the first write's start and the last's end with no write in flight. */
  noWrite: number;
  /** Ms before the first write (opening the temporary file) and after the last (closing it, moving it over the key). */
  outside: number;
  /** Ms the store took to open its writer, and to close it (the writes still under way, closing the file, the move over the key). */
  openMs: number;
  closeMs: number;
  /** WebCrypto calls: how many, the ms the page's thread spent inside them, and from each call to its digest, summed. */
  hashes: number;
  hashCallMs: number;
  hashMs: number;
}

/**
 * One {@linkcode ckptSave} with every store `write()` and WebCrypto call timed (the digests are
 * the page's own, through ckpt's test hook): what the save's time is spent on beside the raw
 * write's.
 */
export async function ckptSavePhases(): Promise<SavePhases> {
  const { store } = await opfs();
  const writes: [number, number, number][] = [];
  const hashes: [number, number, number][] = [];
  // The page's own WebCrypto, timed: the hook steps aside for each call, then comes back.
  const hook = (bytes: Uint8Array) => {
    setWebDigestForTests("restore");
    const start = performance.now();
    const job = webDigest(bytes)!;
    const called = performance.now();
    setWebDigestForTests(hook);
    return job.then((d) => (hashes.push([start, called, performance.now()]), d));
  };
  setWebDigestForTests(hook);
  const writer = store.writer.bind(store);
  // This save's writer, timed (an own property over the class's method, removed after).
  let openMs = 0;
  let closeMs = 0;
  store.writer = async (key: string, options?: WriteOptions): Promise<ObjectWriter> => {
    const o0 = performance.now();
    const w = await writer(key, options);
    openMs = performance.now() - o0;
    return {
      write: async (chunk) => {
        const start = performance.now();
        await w.write(chunk);
        writes.push([start, performance.now(), chunk.byteLength]);
      },
      close: async () => {
        const c0 = performance.now();
        try {
          return await w.close();
        } finally {
          closeMs = performance.now() - c0;
        }
      },
      abort: (reason) => w.abort(reason),
    };
  };
  const t0 = performance.now();
  try {
    await saveCheckpoint({ store, key: "a.ckpt" }, { metadata: { step: 1 }, tensors });
  } finally {
    setWebDigestForTests("restore");
    delete (store as { writer?: unknown }).writer;
  }
  const total = performance.now() - t0;
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const big = writes.filter((w) => w[2] >= 64 * 1024);
  const small = writes.filter((w) => w[2] < 64 * 1024);
  let noWrite = 0;
  let end = writes[0]?.[0] ?? t0;
  for (const [start, stop] of writes) {
    noWrite += Math.max(0, start - end);
    end = Math.max(end, stop);
  }
  return {
    total,
    bodies: big.length,
    bodyMs: sum(big.map((w) => w[1] - w[0])),
    small: small.length,
    smallMs: sum(small.map((w) => w[1] - w[0])),
    noWrite,
    outside: (writes[0]?.[0] ?? t0) - t0 + (t0 + total - end),
    openMs,
    closeMs,
    hashes: hashes.length,
    hashCallMs: sum(hashes.map((h) => h[1] - h[0])),
    hashMs: sum(hashes.map((h) => h[2] - h[0])),
  };
}

/**
 * A worker that writes buffers the page posts to it at their offsets through a sync access
 * handle on one OPFS file, and posts each buffer back once written.
 */
const PIPE_WORKER = `let h;
onmessage = async (e) => {
  const d = e.data;
  try {
    if (d.open) {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("bench", { create: true });
      h = await (await dir.getFileHandle(d.open, { create: true })).createSyncAccessHandle();
      h.truncate(0);
      postMessage({});
    } else if (d.buf) {
      const n = h.write(new Uint8Array(d.buf, 0, d.n), { at: d.at });
      if (n !== d.n) throw new Error("short write");
      postMessage({ buf: d.buf }, [d.buf]);
    } else {
      h.close(); // not flushed: as createWritable()'s close, and ckpt's page save
      postMessage({});
    }
  } catch (err) {
    postMessage({ error: String(err) });
  }
};`;
let pipeWorker: Worker | undefined;

/**
 * The same bytes as {@linkcode rawWrite}, written by a worker through a sync access handle: the
 * page copies each 1 MiB into one of four reused buffers and transfers it there (a caller's
 * arrays stay the caller's), the worker writes it and sends it back. No hashing. NaN where the
 * engine gives its workers no sync access handle (WebKitGTK).
 */
export async function rawWritePiped(): Promise<number> {
  pipeWorker ??= new Worker(URL.createObjectURL(new Blob([PIPE_WORKER], { type: "text/javascript" })));
  const w = pipeWorker;
  const free: ArrayBuffer[] = [];
  let made = 0;
  let wake: (() => void) | undefined;
  let done: ((v: unknown) => void) | undefined;
  let failed: string | undefined;
  w.onmessage = (e) => {
    if (e.data.error) failed = e.data.error;
    if (e.data.buf) free.push(e.data.buf);
    const d = done;
    done = undefined;
    d?.(e.data);
    const k = wake;
    wake = undefined;
    k?.();
  };
  const ask = (m: unknown) => new Promise((r) => (done = r, w.postMessage(m)));
  const t0 = performance.now();
  await ask({ open: "piped.bin" });
  if (failed) return NaN; // no sync access handle in this engine's workers (WebKitGTK)
  let at = 0;
  for (const t of tensors) {
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    for (let i = 0; i < bytes.byteLength; i += MiB) {
      const part = bytes.subarray(i, Math.min(bytes.byteLength, i + MiB));
      while (!free.length && made >= 4 && !failed) await new Promise<void>((r) => wake = r);
      if (failed) throw new Error(`the piped write failed: ${failed}`);
      const buf = free.pop() ?? (made++, new ArrayBuffer(MiB));
      new Uint8Array(buf).set(part);
      w.postMessage({ buf, n: part.byteLength, at }, [buf]);
      at += part.byteLength;
    }
  }
  while (free.length < made && !failed) await new Promise<void>((r) => wake = r);
  await ask({ close: true });
  if (failed) throw new Error(`the piped write failed: ${failed}`);
  return performance.now() - t0;
}

/**
 * {@linkcode rawWrite} and {@linkcode recordSha256} at once: what the engine's write and that hash
 * take together on the cores they share (a save can be no faster where they contend).
 */
export async function rawWriteWhileHashing(): Promise<number> {
  const t0 = performance.now();
  await Promise.all([rawWrite(), recordSha256()]);
  return performance.now() - t0;
}

/**
 * Empties the origin's OPFS (what earlier runs left: WebKit refuses writes past its quota) and
 * says how much the engine then allows (`navigator.storage.estimate()`).
 */
export async function emptyOpfs(): Promise<{ removed: number; quota: number; usage: number }> {
  const top = await navigator.storage.getDirectory() as FileSystemDirectoryHandle & {
    keys(): AsyncIterable<string>;
  };
  const names: string[] = [];
  for await (const name of top.keys()) names.push(name);
  for (const name of names) await top.removeEntry(name, { recursive: true });
  store = undefined;
  root = undefined;
  const { quota = 0, usage = 0 } = await navigator.storage.estimate();
  return { removed: names.length, quota, usage };
}

let writer: BackgroundWriter | undefined;

/** What the page's main thread went through while something ran: see {@linkcode watchMainThread}. */
interface MainThread {
  /** The longest task the engine reported (`longtask` entries); null where it has none (not Chromium). */
  longTask: number | null;
  /** The longest gap between two `setTimeout(0)` callbacks, in every engine. */
  gap: number;
}

/**
 * Runs `work` while this thread watches itself: the longest task the engine reports
 * (`PerformanceObserver`, `longtask`, where the engine has it: Chromium) and the longest gap
 * between two timer callbacks (`setTimeout(0)`, every engine); with `work`'s time in ms.
 */
async function watchMainThread(work: () => Promise<unknown>): Promise<MainThread & { ms: number }> {
  const types = (PerformanceObserver as unknown as { supportedEntryTypes?: readonly string[] }).supportedEntryTypes;
  let longTask: number | null = null;
  const observer = types?.includes("longtask")
    ? new PerformanceObserver((list) => {
      for (const e of list.getEntries()) longTask = Math.max(longTask ?? 0, e.duration);
    })
    : undefined;
  observer?.observe({ type: "longtask" });
  if (observer) longTask = 0;
  let gap = 0;
  let last = performance.now();
  let probing = true;
  const probe = () => {
    const now = performance.now();
    gap = Math.max(gap, now - last);
    last = now;
    if (probing) setTimeout(probe, 0);
  };
  setTimeout(probe, 0);
  const t0 = performance.now();
  try {
    await work();
  } finally {
    probing = false;
  }
  const ms = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 50)); // the observer's last entries
  observer?.disconnect();
  return { ms, longTask, gap };
}

/**
 * A `BackgroundWriter` save of copies of the tensors to OPFS (its worker encodes, hashes and
 * writes), while this thread watches itself ({@linkcode watchMainThread}).
 */
export async function backgroundSaveLongestTask(): Promise<{ ms: number; longTask: number | null; gap: number }> {
  writer ??= new BackgroundWriter({ idleTimeout: Infinity });
  const copies = tensors.map((t) => ({ ...t, data: (t.data as Float32Array).slice() }));
  await writer.save("opfs:///bench/ckpt/warm.ckpt", { metadata: { step: 0 }, tensors: [] }); // the worker is up
  const watched = await watchMainThread(() =>
    writer!.save("opfs:///bench/ckpt/bg.ckpt", { metadata: { step: 1 }, tensors: copies })
  );
  // Not kept: with the other methods' files it would pass WebKit's 1000 MB quota at 256 MiB.
  const { store } = await opfs();
  await store.delete("bg.ckpt");
  return watched;
}

/** The model's weights in bytes. */
function modelSize(): number {
  return model!.countParams() * 4;
}

/** Builds a tfjs-layers MLP of about `mib` MiB of float32 weights (dense layers of width `width`). */
export async function makeModel(mib: number, width: number): Promise<number> {
  model?.dispose();
  model = undefined;
  modelBytes = undefined;
  _retained = undefined;
  await tf.setBackend("cpu");
  const layers = Math.max(1, Math.round((mib * MiB) / (width * width * 4)));
  const m = tf.sequential();
  for (let i = 0; i < layers; i++) {
    m.add(tf.layers.dense({
      name: `dense${i}`,
      units: width,
      inputShape: i === 0 ? [width] : undefined,
      kernelInitializer: tf.initializers.randomUniform({ minval: -0.05, maxval: 0.05, seed: i + 1 }),
    }));
  }
  model = m;
  return m.countParams() * 4;
}

/**
 * WebKitGTK 2.50 counts each OPFS write as the file's size so far (a 48 MiB save: about 450 MiB of
 * estimated usage) and recounts only when a request would pass its 1000 MiB quota, so after two
 * saves ckpt's own quota check (which trusts `navigator.storage.estimate()`) refused the next one.
 * Before each timed model save (untimed), where the estimate leaves less than `room` bytes, this
 * has the engine recount: a probe file resized just past the estimated free space (granted, since
 * the files really there are few), then discarded; the estimate then holds what is there plus that
 * resize, hence only when little is left (and again where the engine granted it without a
 * recount). Chromium's and Firefox's estimates count the bytes
 * written, with gigabytes free: there it does nothing.
 */
async function recountWhereStale(room: number): Promise<void> {
  // A resize the engine grants without a recount only adds to its count: then again, a few times.
  for (let i = 0; i < 4; i++) {
    const { quota = 0, usage = 0 } = await navigator.storage.estimate();
    if (quota - usage >= room) return;
    const dir = (await opfs()).root;
    const file = await dir.getFileHandle("recount.bin", { create: true });
    const w = await file.createWritable();
    try {
      await w.write({ type: "truncate", size: quota - usage + 2 ** 20 });
    } finally {
      await w.abort();
      await dir.removeEntry("recount.bin");
    }
  }
}

/** TF.js's own: `model.save("indexeddb://…")` (weights concatenated into one buffer, stored in IndexedDB). */
export async function idbSave(): Promise<number> {
  await recountWhereStale(3 * modelSize());
  const t0 = performance.now();
  await model!.save("indexeddb://ckpt-bench");
  return performance.now() - t0;
}

/** TF.js's own: `tf.loadLayersModel("indexeddb://…")` (builds the model and sets its weights). */
export async function idbLoad(): Promise<number> {
  _retained = undefined;
  const t0 = performance.now();
  const m = await tf.loadLayersModel("indexeddb://ckpt-bench");
  const ms = performance.now() - t0;
  m.dispose();
  return ms;
}

/** ckpt for the same model: `snapshot()` (copies the weights out of TF.js) then a save to OPFS. */
export async function ckptModelSave(): Promise<number> {
  await recountWhereStale(3 * modelSize());
  const { store } = await opfs();
  const t0 = performance.now();
  await saveCheckpoint({ store, key: "model.ckpt" }, await snapshot({ model: model!, step: 1 }));
  return performance.now() - t0;
}

/**
 * ckpt for the same model as a training loop saves it: `snapshot()` into a staging pool (the
 * buffers of the save before, as `CheckpointWriter` reuses them), then a save to OPFS.
 */
export async function ckptModelSavePooled(): Promise<number> {
  await recountWhereStale(3 * modelSize());
  const { store } = await opfs();
  const t0 = performance.now();
  const ckpt = await snapshot({ model: model!, step: 1, staging: pool });
  await saveCheckpoint({ store, key: "model.ckpt" }, ckpt);
  const ms = performance.now() - t0;
  pool.release(ckpt);
  return ms;
}

let modelWriter: CheckpointWriter | undefined;
let watchedSaves: MainThread[] = [];

/**
 * ckpt for the same model as a page saves it while it trains: `CheckpointWriter.save`
 * (`snapshot` into the writer's staging pool, the one buffer moved to its worker, which encodes,
 * hashes with WebCrypto and writes to OPFS through a sync access handle), until the file is
 * written; what the main thread went through meanwhile is kept for {@linkcode takeWatchedSaves}.
 */
export async function ckptModelSaveBackground(): Promise<number> {
  const { store } = await opfs();
  if (!modelWriter) {
    modelWriter = new CheckpointWriter({ idleTimeout: Infinity });
    await recountWhereStale(3 * modelSize());
    await modelWriter.save({ store, key: "bgmodel.ckpt" }, { model: model!, step: 0 }); // the worker is up
  }
  await recountWhereStale(3 * modelSize());
  const w = await watchMainThread(() => modelWriter!.save({ store, key: "bgmodel.ckpt" }, { model: model!, step: 1 }));
  watchedSaves.push({ longTask: w.longTask, gap: w.gap });
  return w.ms;
}

/** What the main thread went through during each {@linkcode ckptModelSaveBackground} since the last call. */
export function takeWatchedSaves(): MainThread[] {
  const out = watchedSaves;
  watchedSaves = [];
  return out;
}

/** The model's weights as one array (a snapshot's tensors, concatenated), for the raw bounds. */
let modelBytes: Uint8Array<ArrayBuffer> | undefined;

async function modelAsBytes(): Promise<Uint8Array<ArrayBuffer>> {
  if (modelBytes) return modelBytes;
  const ckpt = await snapshot({ model: model!, step: 1 });
  const out = new Uint8Array(ckpt.tensors.reduce((n, t) => n + t.data.byteLength, 0));
  let at = 0;
  for (const t of ckpt.tensors) {
    out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), at);
    at += t.data.byteLength;
  }
  return modelBytes = out;
}

/** The bound's first part: `snapshot` into a staging pool alone (the copy out of TF.js). */
export async function modelSnapshot(): Promise<number> {
  const t0 = performance.now();
  const ckpt = await snapshot({ model: model!, step: 1, staging: pool });
  const ms = performance.now() - t0;
  pool.release(ckpt);
  return ms;
}

/** The bound's hash: WebCrypto SHA-256 over the model's bytes, one call per weight as the worker makes them. */
export async function modelWebCryptoSha256(): Promise<number> {
  const bytes = await modelAsBytes();
  const sizes = model!.getWeights().map((w) => w.size * 4);
  const pieces: Uint8Array<ArrayBuffer>[] = [];
  let at = 0;
  for (const n of sizes) {
    pieces.push(bytes.subarray(at, at + n));
    at += n;
  }
  const t0 = performance.now();
  await Promise.all(pieces.map((p) => crypto.subtle.digest("SHA-256", p)));
  return performance.now() - t0;
}

/**
 * The raw write a worker can do: in a dedicated worker (plain script, no ckpt), the model's bytes
 * written to a fresh OPFS file through a sync access handle (4 MiB writes; createWritable() where
 * the engine refuses one: WebKitGTK), flushed, closed and moved over its name; timed from the
 * page, the buffer moved there and back.
 */
const RAW_SYNC_WORKER = `
onmessage = async (e) => {
  const { name, buf } = e.data;
  try {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("bench", { create: true });
    const file = await dir.getFileHandle(name + ".tmp", { create: true });
    const u = new Uint8Array(buf);
    let via = "sync access handle";
    let h;
    // Asked of another file: WebKitGTK's refusal leaves the file unwritable by createWritable() too.
    const probe = await dir.getFileHandle(name + ".probe", { create: true });
    try {
      (await probe.createSyncAccessHandle()).close();
      h = await file.createSyncAccessHandle();
    } catch {
      via = "createWritable() (the engine refused a sync access handle)";
    }
    await dir.removeEntry(name + ".probe");
    if (h) {
      let at = 0;
      while (at < u.byteLength) at += h.write(u.subarray(at, at + 4 * 1048576), { at });
      h.flush();
      h.close();
    } else {
      const w = await file.createWritable();
      // Copies, not views: WebKitGTK's write(view) writes the view's whole buffer (ckpt copies too).
      for (let at = 0; at < u.byteLength; at += 4 * 1048576) await w.write(u.slice(at, at + 4 * 1048576));
      await w.close();
    }
    await file.move(dir, name);
    postMessage({ buf, via }, [buf]);
  } catch (e) {
    postMessage({ buf, error: e.name + ": " + e.message }, [buf]);
  }
};`;
let rawWorker: Worker | undefined;

/** How {@linkcode RAW_SYNC_WORKER} wrote last. */
let rawVia = "";

/** How the last {@linkcode rawModelWriteWorker} wrote (a sync access handle, or createWritable). */
export function rawModelWriteVia(): string {
  return rawVia;
}

/** The raw bound: {@linkcode RAW_SYNC_WORKER}'s write of the model's bytes, in ms. */
export async function rawModelWriteWorker(): Promise<number> {
  await recountWhereStale(3 * modelSize());
  const bytes = await modelAsBytes();
  rawWorker ??= new Worker(URL.createObjectURL(new Blob([RAW_SYNC_WORKER], { type: "text/javascript" })));
  const t0 = performance.now();
  const back = await new Promise<{ buf: ArrayBuffer; via?: string; error?: string }>((resolve, reject) => {
    rawWorker!.onmessage = (e) => resolve(e.data);
    rawWorker!.onerror = (e) => reject(new Error(`the raw-write worker failed: ${e.message}`));
    rawWorker!.postMessage({ name: "rawmodel.bin", buf: bytes.buffer }, [bytes.buffer]);
  });
  const ms = performance.now() - t0;
  modelBytes = new Uint8Array(back.buf);
  if (back.error) throw new Error(`a raw OPFS write in a worker failed: ${back.error}`);
  rawVia = back.via!;
  return ms;
}

/** ckpt for the same model: load and verify from OPFS, then `restore()` into the model. */
export async function ckptModelLoad(): Promise<number> {
  const { store } = await opfs();
  const t0 = performance.now();
  const report = await restore(await loadCheckpoint({ store, key: "model.ckpt" }), { model: model! });
  const ms = performance.now() - t0;
  if (report.missing.length || report.mismatched.length) throw new Error("ckpt restore did not match the model");
  return ms;
}

/** Removes what the bench wrote (OPFS directory and the IndexedDB model). */
export async function cleanUp(): Promise<void> {
  await writer?.close();
  writer = undefined;
  await modelWriter?.close();
  modelWriter = undefined;
  rawWorker?.terminate();
  rawWorker = undefined;
  pipeWorker?.terminate();
  pipeWorker = undefined;
  modelBytes = undefined;
  model?.dispose();
  model = undefined;
  tensors = [];
  _retained = undefined;
  store = undefined;
  root = undefined;
  await (await navigator.storage.getDirectory()).removeEntry("bench", { recursive: true }).catch(() => {});
  await tf.io.removeModel("indexeddb://ckpt-bench").catch(() => {});
}
