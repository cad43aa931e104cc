// openObjectReader over an in-memory store: every byte arrives in order whatever the read
// pattern, bodies announced with `target` land in place by parallel ranged GETs (never more in
// flight than the cap), and a short range or a version change mid-read is an error.
import assert from "node:assert/strict";
import { OBJECT_READER_WINDOW, openObjectReader, openObjectStream } from "../../src/storage/object_reader.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import type { GetOptions, GetResult, ObjectStore } from "../../src/storage/types.ts";

const MiB = 2 ** 20;

function bytes(n: number, seed: number): Uint8Array {
  let x = seed;
  return new Uint8Array(n).map(() => (x = (x * 1103515245 + 12345) >>> 0) >>> 24);
}

/** `store` with its `get` replaced (counting how many are in flight). */
function wrapped(
  store: ObjectStore,
  get: (key: string, options: GetOptions | undefined, inner: ObjectStore["get"]) => Promise<GetResult>,
): ObjectStore & { inFlight: number; peak: number } {
  const w = Object.create(store) as ObjectStore & { inFlight: number; peak: number };
  w.inFlight = 0;
  w.peak = 0;
  w.get = async (key, options) => {
    w.peak = Math.max(w.peak, ++w.inFlight);
    try {
      await new Promise((r) => setTimeout(r, 1)); // let the others start
      return await get(key, options, store.get.bind(store));
    } finally {
      w.inFlight--;
    }
  };
  return w;
}

/** Reads the whole object the way a decoder does: small reads, and bodies announced first. */
async function readAll(r: Awaited<ReturnType<typeof openObjectReader>>, bodies: number[]): Promise<Uint8Array> {
  const out = new Uint8Array(r.size);
  let at = 0;
  const fill = async (into: Uint8Array) => {
    let k = 0;
    while (k < into.byteLength) {
      const n = await r.read(into.subarray(k));
      if (n === null) throw new Error("early end");
      k += n;
    }
  };
  for (const len of bodies) {
    await fill(out.subarray(at, at + 100)); // a record header
    at += 100;
    const body = out.subarray(at, at + len);
    r.target!(body);
    await fill(body);
    at += len;
  }
  await fill(out.subarray(at));
  assert.equal(await r.read(new Uint8Array(1)), null);
  return out;
}

Deno.test("openObjectReader reads an object bit for bit, bodies straight into place, at most `concurrency` GETs at once", async () => {
  const mem = new MemoryStore();
  const bodies = [3 * MiB + 5, 17, 5 * MiB, 2 * MiB + 1];
  const data = bytes(bodies.reduce((a, b) => a + b + 100, 0) + 1234, 1);
  await mem.put("o.bin", data);
  const store = wrapped(mem, (k, o, get) => get(k, o));
  const r = await openObjectReader(store, "o.bin", { partSize: MiB, concurrency: 3 });
  assert.equal(r.size, data.byteLength);
  assert.deepEqual(await readAll(r, bodies), data);
  assert.equal(store.peak, 3);
  assert.equal(r.stats.peakInFlight, 3);
  assert.equal(r.stats.bytesFetched, data.byteLength);
  // All but the window that comes with each announced body (it holds what follows the body: the
  // next header and the first MiB of the next body) went straight into place.
  // body 0 less the first window's 1 MiB - 100; body 1 (17 bytes) and the 100-byte header after
  // it in the window after body 0, which holds the first 1 MiB - 217 of body 2; 1 MiB - 100 of
  // body 3 in the window after body 2.
  assert.equal(r.stats.bytesDirect, (2 * MiB + 105) + (4 * MiB + 217) + (MiB + 101));
  // The same bytes read with no announcement at all, in odd sizes.
  const plain = await openObjectReader(mem, "o.bin");
  const out = new Uint8Array(data.byteLength);
  for (let at = 0, step = 1; at < out.byteLength; step = step * 7 % 300_001 + 1) {
    at += (await plain.read(out.subarray(at, at + step)))!;
  }
  assert.deepEqual(out, data);
  assert.equal(plain.stats.bytesDirect, 0);
});

Deno.test("openObjectReader refuses a range that ends short or comes from another version", async () => {
  const mem = new MemoryStore();
  const data = bytes(4 * MiB, 2);
  await mem.put("o.bin", data);
  // A store that sends one byte less than it says for every range after the first.
  let calls = 0;
  const short = wrapped(mem, async (k, o, get) => {
    const r = await get(k, o);
    if (calls++ === 0 && o?.range) return r;
    const all = new Uint8Array(await new Response(r.body).arrayBuffer());
    return { ...r, body: new Blob([all.subarray(0, all.byteLength - 1)]).stream() };
  });
  const a = await openObjectReader(short, "o.bin", { partSize: MiB });
  const body = new Uint8Array(data.byteLength - OBJECT_READER_WINDOW);
  await a.read(new Uint8Array(OBJECT_READER_WINDOW));
  a.target!(body);
  await assert.rejects(
    () => a.read(body),
    /^SyntaxError: Cannot read memory:\/\/store\/o\.bin: the store sent 1048575 of the 1048576 bytes asked for at offset 1048576$/,
  );
  a.close();
  // The object replaced after the first request: the next range says so, naming both versions.
  const b = await openObjectReader(mem, "o.bin");
  const before = b.version;
  const after = (await mem.put("o.bin", bytes(4 * MiB, 3))).version;
  await b.read(new Uint8Array(OBJECT_READER_WINDOW));
  await assert.rejects(
    () => b.read(new Uint8Array(10)),
    new RegExp(`the object changed while being read \\(version ${before}, now ${after}\\)`),
  );
  await assert.rejects(() => openObjectReader(mem, "o.bin", { concurrency: 0 }), RangeError);
  // One GET whose body ends early: the read that needs the missing bytes says so.
  calls = 0;
  const one = await openObjectStream(short, "o.bin");
  await assert.rejects(
    () => one.read(new Uint8Array(data.byteLength)),
    /^SyntaxError: Cannot read memory:\/\/store\/o\.bin: the body ended at byte 4194303 of 4194304$/,
  );
});

Deno.test("openObjectReader: a read of a range that failed before the read came rejects, never waits", async () => {
  const mem = new MemoryStore();
  await mem.put("o.bin", bytes(4 * MiB, 4));
  // Every range after the first window fails at once, before the decoder reads the body.
  const down = Object.create(mem) as MemoryStore;
  down.get = (key, options) =>
    options?.range && "offset" in options.range && options.range.offset > 0
      ? Promise.reject(new Error("the network is down"))
      : mem.get(key, options);
  const r = await openObjectReader(down, "o.bin", { partSize: MiB });
  await r.read(new Uint8Array(OBJECT_READER_WINDOW));
  const body = new Uint8Array(MiB);
  r.target!(body);
  await new Promise((wait) => setTimeout(wait, 20)); // the ranges' failures (no I/O) are in by now
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<string>((resolve) => timer = setTimeout(() => resolve("hung"), 10_000));
  try {
    const got = await Promise.race([r.read(body).then(() => "read", (e: Error) => e.message), hung]);
    assert.equal(got, "the network is down");
  } finally {
    clearTimeout(timer);
    r.close();
  }
});
