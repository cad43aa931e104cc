// openObjectReader when a ranged GET fails: the failure of any range stops the reader and wakes
// the read waiting on any other, so every read and every load settles. Once, a range that failed
// before the decoder reached it (the object replaced mid-load, answered by a later range first)
// left the read that then waited on it asleep for ever: a load that never settled hung CI.
// The one-GET reader (openObjectStream) has no such waits: a failed or cancelled body ends the
// read that waits on it. Each step here is ordered by promises the fake store resolves, not by timing.
import assert from "node:assert/strict";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import { OBJECT_READER_WINDOW, openObjectReader, openObjectStream } from "../../src/storage/object_reader.ts";
import type { GetOptions, GetResult, ObjectStore } from "../../src/storage/types.ts";

const MiB = 2 ** 20;
/** How long a read that should settle at once may take before the test calls it hung. */
const DEADLINE_MS = 20_000;

/**
 * `mem` read by ranged GETs of 1 MiB, 4 at once, its GETs answered by `answer` (given the call's
 * number from 0, and the memory store's own answer).
 */
function fakeS3(
  mem: MemoryStore,
  answer: (call: number, got: GetResult, options: GetOptions | undefined) => Promise<GetResult> | GetResult,
): ObjectStore {
  let calls = 0;
  return Object.assign(Object.create(mem) as ObjectStore, {
    ranged: { concurrency: 4, partSize: MiB },
    head: mem.head.bind(mem),
    get: async (key: string, options?: GetOptions) => answer(calls++, await mem.get(key, options), options),
  });
}

/** The same answer, as a later version of the object. */
const replaced = (got: GetResult): GetResult => ({ ...got, info: { ...got.info, version: "v2" } });

/** A body that sends `first` bytes, then nothing until its request is aborted. */
function held(signal: AbortSignal | undefined, first = 0): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start: (c) => first ? c.enqueue(new Uint8Array(first)) : undefined,
    pull: () => new Promise((_, reject) => signal?.addEventListener("abort", () => reject(signal.reason))),
  });
}

/** `p`, or a failure naming `what` once it has not settled for {@linkcode DEADLINE_MS}. */
async function settles<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} never settled`)), DEADLINE_MS);
  });
  try {
    return await Promise.race([p, hung]);
  } finally {
    clearTimeout(timer);
  }
}

/** Lets every pending promise reaction run (they all do before the next timer fires). */
const drained = () => new Promise((r) => setTimeout(r, 0));

Deno.test("loadCheckpoint with parallel ranged GETs rejects when a later range of a body fails before the decoder reaches it", async () => {
  const mem = new MemoryStore();
  const big = new Float32Array(3 * MiB / 4).map((_, i) => Math.sin(i));
  await saveCheckpoint({ store: mem, key: "c.ckpt" }, {
    metadata: { step: 1 },
    tensors: [{ name: "big", dtype: "float32", shape: [big.length], data: big }],
  });
  // GETs: 0 the first window, 1-3 the body's three ranges. The third answers from a new version
  // at once; the first waits until that failure has been handled, so the decoder, waiting on it,
  // reaches the third range only after the third range failed.
  const third = Promise.withResolvers<void>();
  const store = fakeS3(mem, async (call, got) => {
    if (call === 1) await third.promise.then(drained);
    if (call !== 3) return got;
    third.resolve();
    return replaced(got);
  });
  await assert.rejects(
    () => settles(loadCheckpoint({ store, key: "c.ckpt" }), "the load"),
    /^Error: Cannot read memory:\/\/store\/c\.ckpt: the object changed while being read \(version \S+, now v2\)$/,
  );
});

Deno.test("openObjectReader: a range that fails wakes the read waiting on another, stops the requests in flight, and every later read throws the same", async () => {
  const mem = new MemoryStore();
  const data = new Uint8Array(4 * MiB).map((_, i) => i * 13);
  const version = (await mem.put("o.bin", data)).version;
  let first: AbortSignal | undefined;
  // The body's first range sends nothing until it is aborted; its third is from a new version.
  const store = fakeS3(mem, (call, got, options) => {
    if (call === 1) return (first = options?.signal, { ...got, body: held(options?.signal) });
    return call === 3 ? replaced(got) : got;
  });
  const r = await openObjectReader(store, "o.bin", { partSize: MiB });
  try {
    assert.equal(await r.read(new Uint8Array(OBJECT_READER_WINDOW)), OBJECT_READER_WINDOW);
    const body = new Uint8Array(3 * MiB);
    r.target!(body);
    const changed = new RegExp(`the object changed while being read \\(version ${version}, now v2\\)$`);
    await assert.rejects(() => settles(r.read(body), "the read waiting on the held range"), changed);
    assert.equal(first?.aborted, true, "the held range's request was not aborted");
    await assert.rejects(() => r.read(body), changed);
  } finally {
    r.close();
  }
});

Deno.test("openObjectReader: close wakes a read waiting on a range, and later reads say the reader was closed", async () => {
  const mem = new MemoryStore();
  await mem.put("o.bin", new Uint8Array(3 * MiB));
  const store = fakeS3(mem, (call, got, options) => call === 1 ? { ...got, body: held(options?.signal) } : got);
  const r = await openObjectReader(store, "o.bin", { partSize: MiB });
  await r.read(new Uint8Array(OBJECT_READER_WINDOW));
  const body = new Uint8Array(2 * MiB);
  r.target!(body);
  const reading = settles(r.read(body), "the read waiting when the reader was closed");
  await drained(); // the read now waits on the held range
  r.close();
  const closed = /^Error: Cannot read memory:\/\/store\/o\.bin: the reader was closed$/;
  await assert.rejects(() => reading, closed);
  await assert.rejects(() => r.read(body), closed);
});

Deno.test("openObjectStream (one GET): a read waiting on the body settles when the body fails or the reader is closed", async () => {
  const mem = new MemoryStore();
  await mem.put("o.bin", new Uint8Array(3 * MiB));
  const broken = new Error("connection reset");
  const stores = {
    failing: fakeS3(mem, (_, got) => ({
      ...got,
      body: new ReadableStream({ start: (c) => c.enqueue(new Uint8Array(100)), pull: (c) => c.error(broken) }),
    })),
    held: fakeS3(mem, (_, got, options) => ({ ...got, body: held(options?.signal, 100) })),
  };
  const failing = await openObjectStream(stores.failing, "o.bin");
  await assert.rejects(() => settles(failing.read(new Uint8Array(MiB)), "the read of a failing body"), broken);
  const r = await openObjectStream(stores.held, "o.bin");
  const reading = settles(r.read(new Uint8Array(MiB)), "the read waiting when the reader was closed");
  await drained();
  r.close();
  await assert.rejects(() => reading, /^Error: Cannot read memory:\/\/store\/o\.bin: the reader was closed$/);
});
