/**
 * One object of any {@linkcode ObjectStore} read front to back as a decoder's byte source
 * ({@linkcode ByteReader}), as a local file is: a load of a binary checkpoint from `s3://` copies
 * each tensor body from the response straight into the tensor's own buffer.
 *
 * - {@linkcode openObjectStream}: one GET of the whole object (the default for `s3://` loads).
 * - {@linkcode openObjectReader}: parallel ranged GETs (`S3StoreOptions.readConcurrency` above
 *   1). A decoder announces where a body goes ({@linkcode ByteReader.target}); the reader splits
 *   it into ranges of at most `partSize` bytes, `concurrency` in flight, each response copied from
 *   the transport's chunks into its place in that buffer as it arrives: no intermediate buffer, no
 *   join. Besides the caller's buffers it holds one window of {@linkcode OBJECT_READER_WINDOW}
 *   bytes (the bytes right after a body are fetched with it, so the next record's header costs no
 *   round trip of its own), or, read with no announcements (a verify), one `partSize` part ahead.
 *   Every range must come from the version the first request saw: a response of another version
 *   (the object was overwritten mid-load) is an error naming both, never a splice of two
 *   versions. A range that ends short, or runs long, is a `SyntaxError`. The first range that
 *   fails stops the reader: the other requests are aborted, and the read waiting (or the next)
 *   throws that failure.
 * - **Retries** are the store's, per request: `S3Store` retries a failed request and resumes a
 *   broken body from the byte where it stopped, with `If-Match`.
 *
 * @module
 */
import type { ByteReader } from "../format/_byte_reader.ts";
import type { ObjectStore } from "./types.ts";

/** Default bytes per ranged GET of a large body: 8 MiB (S3's own guidance for ranged reads is 8–16 MiB). */
export const DEFAULT_OBJECT_READER_PART_SIZE = 8 * 2 ** 20;
/** Default ranged GETs in flight at once. */
export const DEFAULT_OBJECT_READER_CONCURRENCY = 4;
/** Bytes fetched at once for what lies between large bodies (headers, small tensors). */
export const OBJECT_READER_WINDOW = 1 * 2 ** 20;

/** Options for {@linkcode openObjectReader}. */
export interface ObjectReaderOptions {
  /** The most bytes one ranged GET of a body fetches. @default {DEFAULT_OBJECT_READER_PART_SIZE} */
  partSize?: number;
  /** The most ranged GETs in flight at once. @default {DEFAULT_OBJECT_READER_CONCURRENCY} */
  concurrency?: number;
  /** A fresh buffer for a body (huge pages where a platform module offers them). @default {new Uint8Array(n)} */
  allocate?: (n: number) => Uint8Array;
  /** Cancels the requests. */
  signal?: AbortSignal;
}

/** An {@linkcode ObjectReader}'s counts, for tests and benchmarks. */
export interface ObjectReaderStats {
  /** Ranged GETs sent (the first included). */
  requests: number;
  /** Bytes the store sent. */
  bytesFetched: number;
  /** Of those, bytes that went straight into a buffer a decoder announced (no copy after the transport's). */
  bytesDirect: number;
  /** The most ranged GETs that were in flight at once. */
  peakInFlight: number;
}

/** A {@linkcode ByteReader} over one object, with its counts; `close` stops what is in flight. */
export interface ObjectReader extends ByteReader {
  /** The object's address. */
  readonly url: string;
  /** The object's version (ETag), as the first response gave it. */
  readonly version: string;
  /** The object's size. */
  readonly size: number;
  /** The object's first bytes (up to {@linkcode OBJECT_READER_WINDOW}), as the first request fetched them: a format's magic. */
  readonly head: Uint8Array;
  /** What it fetched so far. */
  readonly stats: Readonly<ObjectReaderStats>;
  /** Stops the requests in flight (their buffers then hold partial bytes); later reads reject. */
  close(): void;
}

function positiveInt(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`Invalid ObjectReaderOptions.${name}: expected an integer >= 1, got ${value}`);
  }
  return value;
}

/** What both readers share: the object's description, their counts, `stat`, `allocate` and `close`. */
function described(
  url: string,
  info: { version: string; size: number },
  head: Uint8Array,
  stats: ObjectReaderStats,
  allocate: ((n: number) => Uint8Array) | undefined,
  close: () => void,
): Omit<ObjectReader, "read"> {
  const { version, size } = info;
  return {
    url,
    version,
    size,
    head,
    stats,
    close,
    stat: () => Promise.resolve({ size }),
    ...(allocate ? { allocate } : {}),
  };
}

/** A counting semaphore: `concurrency` ranged GETs in flight at most. */
class Slots {
  #free: number;
  #waiting: (() => void)[] = [];
  constructor(n: number) {
    this.#free = n;
  }
  async take(): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return;
    }
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }
  give(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#free++;
  }
}

/** A range being fetched into `into` (its bytes `[start, start + into.byteLength)` of the object). */
interface Flight {
  start: number;
  into: Uint8Array;
  /** Bytes of `into` that arrived so far, in order. */
  filled: number;
  /** A read waiting for `filled` to reach `need`. */
  waiter?: { need: number; wake: () => void } | undefined;
}

/**
 * Opens `key` for a front-to-back read; the first request fetches the first window and tells the
 * object's size and version.
 *
 * @example Read an object whole through the reader
 * ```ts
 * import { OBJECT_READER_WINDOW, openObjectReader } from "./object_reader.ts";
 * import { MemoryStore } from "./memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore();
 * const bytes = new Uint8Array(3 * 2 ** 20).map((_, i) => i * 7);
 * await store.put("x.bin", bytes);
 * const r = await openObjectReader(store, "x.bin", { partSize: 2 ** 20 });
 * const body = new Uint8Array(bytes.byteLength);
 * r.target!(body); // a decoder says where the next bytes go
 * let at = 0;
 * for (let n; at < body.byteLength && (n = await r.read(body.subarray(at))) !== null;) at += n;
 * assert.deepEqual(body, bytes);
 * assert.equal(await r.read(new Uint8Array(1)), null);
 * // The first request fetched the first window; the rest went straight into `body`, in two ranges.
 * assert.equal(r.stats.bytesDirect, bytes.byteLength - OBJECT_READER_WINDOW);
 * assert.equal(r.stats.requests, 3);
 * ```
 */
export async function openObjectReader(
  store: ObjectStore,
  key: string,
  options: ObjectReaderOptions = {},
): Promise<ObjectReader> {
  const partSize = positiveInt(options.partSize ?? DEFAULT_OBJECT_READER_PART_SIZE, "partSize");
  const concurrency = positiveInt(options.concurrency ?? DEFAULT_OBJECT_READER_CONCURRENCY, "concurrency");
  const url = store.url + key;
  const abort = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, abort.signal]) : abort.signal;
  const slots = new Slots(concurrency);
  const stats: ObjectReaderStats = { requests: 0, bytesFetched: 0, bytesDirect: 0, peakInFlight: 0 };
  let inFlight = 0;
  let closed = false;

  /** Copies a response body into `into`, which must be filled exactly. */
  const fill = async (
    body: ReadableStream<Uint8Array>,
    into: Uint8Array,
    start: number,
    flight?: Flight,
  ): Promise<void> => {
    let at = 0;
    for await (const chunk of body) {
      if (at + chunk.byteLength > into.byteLength) {
        await body.cancel().catch(() => {});
        throw new SyntaxError(
          `Cannot read ${url}: the store sent more than the ${into.byteLength} bytes asked for at offset ${start}`,
        );
      }
      into.set(chunk, at);
      at += chunk.byteLength;
      if (flight) {
        // A read waiting for these bytes goes on now: the decoder hashes them while the rest arrive.
        flight.filled = at;
        if (flight.waiter && at >= flight.waiter.need) flight.waiter.wake();
      }
    }
    stats.bytesFetched += at;
    if (at !== into.byteLength) {
      throw new SyntaxError(
        `Cannot read ${url}: the store sent ${at} of the ${into.byteLength} bytes asked for at offset ${start}`,
      );
    }
  };

  // The first window: the object's size and version.
  stats.requests++;
  const first = await store.get(key, { range: { offset: 0, length: OBJECT_READER_WINDOW }, signal });
  const size = first.info.size;
  const version = first.info.version;
  let window: Uint8Array = new Uint8Array(first.length);
  let windowAt = 0;
  await fill(first.body, window, 0);
  const head = window;

  let pos = 0;
  /** The ranges of the body a decoder announced, in order; empty when none is being read. */
  let flights: Flight[] = [];
  /** Why the reader stopped: the first range that failed, or `close`. Every read after it throws it. */
  let failure: { error: unknown } | undefined;
  /** Stops the reader: the requests in flight are aborted and a read waiting on a range wakes to throw `error`. */
  const fail = (error: unknown): void => {
    if (failure) return;
    failure = { error };
    closed = true;
    abort.abort(error);
    for (const f of flights) f.waiter?.wake();
  };
  /** Throws why the reader stopped, if it did (a function: a read checks again after each wait). */
  const throwIfStopped = (): void => {
    if (failure) throw failure.error;
  };
  /** `p`, failing with the reader's failure (not the abort it caused in the other requests). */
  const settled = (p: Promise<void>): Promise<void> => p.catch((e) => Promise.reject(failure ? failure.error : e));

  /** Fetches `into.byteLength` bytes from `start` into `into`, in one ranged GET, once a slot is free. */
  const fetchRange = (start: number, into: Uint8Array, flight?: Flight): Promise<void> => {
    const run = async () => {
      await slots.take();
      try {
        if (closed) throw new Error(`Cannot read ${url}: the reader was closed`);
        stats.peakInFlight = Math.max(stats.peakInFlight, ++inFlight);
        stats.requests++;
        const r = await store.get(key, { range: { offset: start, length: into.byteLength }, signal });
        if (r.info.version !== version) {
          await r.body.cancel().catch(() => {});
          throw new Error(
            `Cannot read ${url}: the object changed while being read (version ${version}, now ${r.info.version})`,
          );
        }
        if (r.offset !== start || r.length !== into.byteLength) {
          await r.body.cancel().catch(() => {});
          throw new SyntaxError(
            `Cannot read ${url}: asked for ${into.byteLength} bytes at ${start}, got ${r.length} at ${r.offset}`,
          );
        }
        await fill(r.body, into, start, flight);
      } catch (e) {
        fail(e); // a range no read waits on yet stops the reader too: nothing can wait on it forever
        throw e;
      } finally {
        inFlight--;
        slots.give();
      }
    };
    const p = run();
    p.catch(() => {}); // awaited by the read that needs it
    return p;
  };

  /**
   * Windows fetched ahead, in order: the one after an announced body (fetched with it), or, while
   * nothing is announced, the next part (a verify reads front to back and announces nothing).
   */
  let ahead: { at: number; bytes: Uint8Array; done: Promise<void> }[] = [];
  /** True while the object is read with no announcement: then one part is fetched ahead. */
  let streaming = false;
  const readAhead = (): void => {
    const at = ahead.length
      ? ahead[ahead.length - 1]!.at + ahead[ahead.length - 1]!.bytes.byteLength
      : windowAt + window.byteLength;
    if (!streaming || ahead.length > 0 || flights.length || at >= size || closed) return;
    const bytes = new Uint8Array(Math.min(partSize, size - at));
    ahead.push({ at, bytes, done: fetchRange(at, bytes) });
  };

  const fromWindow = (into: Uint8Array): number => {
    const n = Math.min(into.byteLength, windowAt + window.byteLength - pos);
    into.set(window.subarray(pos - windowAt, pos - windowAt + n));
    pos += n;
    return n;
  };

  const reader: ObjectReader = {
    ...described(url, { version, size }, head, stats, options.allocate, () => {
      fail(new Error(`Cannot read ${url}: the reader was closed`));
    }),
    target(into: Uint8Array): void {
      // The window (and windows fetched ahead) may already hold the body's first bytes: the
      // decoder takes those by `read`; the rest is fetched straight into place.
      streaming = false;
      let covered = windowAt + window.byteLength;
      for (const w of ahead) if (w.at === covered) covered += w.bytes.byteLength;
      const have = Math.max(0, Math.min(into.byteLength, covered - pos));
      const start = pos + have;
      const length = Math.min(into.byteLength - have, size - start);
      if (length <= 0 || closed) return;
      // Ranges of partSize (fewer requests cost less CPU: each one is signed and set up), split
      // evenly, so the last is not a sliver.
      const step = Math.ceil(length / Math.ceil(length / partSize));
      flights = [];
      for (let at = 0; at < length; at += step) {
        const n = Math.min(step, length - at);
        const part = into.subarray(have + at, have + at + n);
        const flight: Flight = { start: start + at, into: part, filled: 0 };
        fetchRange(start + at, part, flight); // a failure reaches the reads by `fail`
        flights.push(flight);
      }
      // The window after the body, fetched meanwhile: the next record's header.
      const after = start + length;
      ahead = ahead.filter((w) => w.at < start);
      if (after < size) {
        const bytes = new Uint8Array(Math.min(OBJECT_READER_WINDOW, size - after));
        ahead.push({ at: after, bytes, done: fetchRange(after, bytes) });
      }
    },
    async read(into: Uint8Array): Promise<number | null> {
      throwIfStopped();
      if (into.byteLength === 0) return 0;
      if (pos >= size) return null;
      if (pos < windowAt + window.byteLength && pos >= windowAt) return fromWindow(into);
      // Inside the announced body: wait for the range that holds `pos`.
      const f = flights.find((f) => pos >= f.start && pos < f.start + f.into.byteLength);
      if (f) {
        const off = pos - f.start;
        const n = Math.min(into.byteLength, f.into.byteLength - off);
        if (f.filled < off + n) {
          // Wait for these bytes, or for any range's failure (`fail` wakes this read).
          await new Promise<void>((wake) => f.waiter = { need: off + n, wake });
          f.waiter = undefined;
          throwIfStopped();
        }
        const same = into.buffer === f.into.buffer && into.byteOffset === f.into.byteOffset + off;
        if (same) stats.bytesDirect += n;
        else into.set(f.into.subarray(off, off + n));
        pos += n;
        if (pos >= flights[flights.length - 1]!.start + flights[flights.length - 1]!.into.byteLength) flights = [];
        return n;
      }
      flights = [];
      const i = ahead.findIndex((w) => pos >= w.at && pos < w.at + w.bytes.byteLength);
      if (i >= 0) {
        const w = ahead[i]!;
        ahead = ahead.slice(i + 1);
        await settled(w.done);
        window = w.bytes;
        windowAt = w.at;
        readAhead();
        return fromWindow(into);
      }
      // Anywhere else (no announcement): one window from here, and the next part fetched ahead.
      ahead = [];
      streaming = true;
      const bytes = new Uint8Array(Math.min(Math.max(OBJECT_READER_WINDOW, into.byteLength), size - pos));
      await settled(fetchRange(pos, bytes));
      window = bytes;
      windowAt = pos;
      readAhead();
      return fromWindow(into);
    },
  };
  return reader;
}

/**
 * The same front-to-back reader over one GET of the whole object, for stores where a request
 * costs more than it overlaps (a store on the same machine, sharing its cores): each `read`
 * copies the response's chunks straight into the caller's buffer (a tensor's own, for a body),
 * so bodies still land in place with no intermediate buffer; `target` is not needed. The body is
 * the store's own (`S3Store` resumes it from the byte where it broke, with `If-Match`); a body
 * that ends before the size the store gave is a `SyntaxError`.
 *
 * @example
 * ```ts
 * import { openObjectStream } from "./object_reader.ts";
 * import { MemoryStore } from "./memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore();
 * await store.put("x.bin", new Uint8Array([1, 2, 3, 4, 5]));
 * const r = await openObjectStream(store, "x.bin");
 * const into = new Uint8Array(5);
 * assert.equal(await r.read(into.subarray(0, 2)), 2);
 * assert.equal(await r.read(into.subarray(2)), 3);
 * assert.deepEqual([...into], [1, 2, 3, 4, 5]);
 * assert.equal(await r.read(into), null);
 * assert.equal(r.stats.requests, 1);
 * ```
 */
export async function openObjectStream(
  store: ObjectStore,
  key: string,
  options: Pick<ObjectReaderOptions, "allocate" | "signal"> = {},
): Promise<ObjectReader> {
  const url = store.url + key;
  const abort = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, abort.signal]) : abort.signal;
  const got = await store.get(key, { signal });
  const size = got.info.size;
  const stats: ObjectReaderStats = { requests: 1, bytesFetched: 0, bytesDirect: 0, peakInFlight: 1 };
  const body = got.body.getReader();
  let pending: Uint8Array = new Uint8Array(0); // a chunk's bytes not yet read
  let pos = 0; // of the next byte read
  let closed = false;
  const more = async (): Promise<boolean> => {
    const { done, value } = await body.read();
    if (done) {
      // `close` cancels the body: a read it ended early says so, not that the body was short.
      if (closed) throw new Error(`Cannot read ${url}: the reader was closed`);
      if (stats.bytesFetched < size) {
        throw new SyntaxError(`Cannot read ${url}: the body ended at byte ${stats.bytesFetched} of ${size}`);
      }
      return false;
    }
    stats.bytesFetched += value.byteLength;
    if (stats.bytesFetched > size) {
      throw new SyntaxError(`Cannot read ${url}: the body runs past the ${size} bytes the store gave`);
    }
    pending = value;
    return true;
  };
  // The first bytes, for a format's magic.
  while (pending.byteLength < Math.min(64, size) && await more()) { /* a tiny first chunk */ }
  const head = pending;
  return {
    ...described(url, got.info, head, stats, options.allocate, () => {
      closed = true;
      abort.abort(new Error(`Cannot read ${url}: the reader was closed`));
      body.cancel().catch(() => {});
    }),
    async read(into: Uint8Array): Promise<number | null> {
      if (closed) throw new Error(`Cannot read ${url}: the reader was closed`);
      if (into.byteLength === 0) return 0;
      if (pos >= size) return null;
      // Fill as much of `into` as the chunks at hand and those that follow give, up to its end.
      let n = 0;
      while (n < into.byteLength) {
        if (pending.byteLength === 0 && !(await more())) break;
        const k = Math.min(pending.byteLength, into.byteLength - n);
        into.set(pending.subarray(0, k), n);
        pending = pending.subarray(k);
        n += k;
      }
      pos += n;
      return n;
    },
  };
}
