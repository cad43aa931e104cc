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
 *   versions. A range that ends short, or runs long, is a `SyntaxError`.
 * - **Retries** are the store's, per request: `S3Store` retries a failed request and resumes a
 *   broken body from the byte where it stopped, with `If-Match`.
 *
 * @module
 */
import type { ByteReader } from "../format/_byte_reader.ts";
import type { ObjectStore } from "./types.ts";
import { concatBytes } from "../format/dtype.ts";
import { bodySource } from "./_s3_body.ts";

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
  /**
   * Of those, bytes that went straight into the buffer they were read for: a body a decoder
   * announced (ranged reads), or, where FFI is granted, the caller's buffer itself (written by
   * the transport, no copy in JavaScript).
   */
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
  done: Promise<void>;
}

/**
 * Bytes a body is read into at once where it is a byte stream (an `S3Store` body is): the
 * transport writes as many bytes as have arrived into one reused buffer, which are then copied
 * into place. Reading into the caller's buffer itself is not possible: a byte stream takes the
 * buffer it reads into (transfers it), and the caller's is a tensor's, held elsewhere.
 */
export const OBJECT_READER_READ_SIZE = 2 ** 20;

/** Reads from this size on go straight into the caller's buffer where {@linkcode memoryAlias} can. */
const IN_PLACE_MIN = 64 * 1024;

/** Deno's FFI pointer views, where the process was granted FFI (queried, never prompted for). */
const pointers = (() => {
  try {
    const deno = (globalThis as { Deno?: typeof Deno }).Deno;
    if (typeof deno?.UnsafePointerView?.getArrayBuffer !== "function") return undefined;
    return deno.permissions.querySync({ name: "ffi" }).state === "granted" ? deno : undefined;
  } catch {
    return undefined;
  }
})();

/**
 * A second `ArrayBuffer` over `bytes`' own memory (by FFI: a pointer view), or `undefined` where
 * FFI is not granted. A byte stream that reads into it takes (transfers) this alias, not the
 * caller's buffer, so the transport writes a body straight into its tensor and the tensor's
 * buffer stays the caller's. The caller keeps `bytes` referenced until the read settles.
 */
function memoryAlias(bytes: Uint8Array): ArrayBuffer | undefined {
  if (!pointers || bytes.byteLength < IN_PLACE_MIN) return undefined;
  const at = pointers.UnsafePointer.of(bytes);
  return at === null ? undefined : pointers.UnsafePointerView.getArrayBuffer(at, bytes.byteLength);
}

/** The address of `bytes`' first byte (FFI granted). */
function addressOf(bytes: Uint8Array): number {
  return Number(pointers!.UnsafePointer.value(pointers!.UnsafePointer.of(bytes)));
}

/** What {@linkcode BodyBytes} needs of a BYOB reader. */
interface OwnBufferReader {
  read(view: Uint8Array): Promise<{ done: boolean; value?: Uint8Array | undefined }>;
  cancel(reason?: unknown): Promise<void>;
}

/**
 * A reader of `body` into the caller's buffers (a BYOB reader's `read` and `cancel`): an S3 body's
 * own source where it is one (no stream between), else the stream's BYOB reader; throws a
 * `TypeError` where the body is no byte stream.
 */
function ownBufferReader(body: ReadableStream<Uint8Array>): OwnBufferReader {
  const source = bodySource(body);
  if (!source) return body.getReader({ mode: "byob" }) as OwnBufferReader;
  return {
    read: async (view) => {
      const value = await source.read(view);
      return { done: value.byteLength === 0, value };
    },
    cancel: (reason) => source.cancel(reason),
  };
}

/**
 * A response body's bytes in order, each view valid until the next `next`: read into one reused
 * buffer where the body is a byte stream (no chunk allocated per read), else the stream's chunks;
 * or, where FFI is granted, read straight into the caller's buffer (`readInPlace`).
 */
class BodyBytes {
  readonly #byob: OwnBufferReader | undefined;
  readonly #chunks: ReadableStreamDefaultReader<Uint8Array> | undefined;
  #buffer: ArrayBuffer | undefined;
  /** The buffer being read in place, its alias (as the last read gave it back) and its address. */
  #place: { into: Uint8Array; alias: ArrayBuffer; address: number } | undefined;

  constructor(body: ReadableStream<Uint8Array>, readSize: number) {
    try {
      this.#byob = ownBufferReader(body);
      this.#buffer = new ArrayBuffer(readSize);
    } catch {
      this.#chunks = body.getReader();
    }
  }

  /** The next bytes, or `undefined` at the end. */
  async next(): Promise<Uint8Array | undefined> {
    if (this.#chunks) {
      const { done, value } = await this.#chunks.read();
      return done ? undefined : value;
    }
    const { done, value } = await this.#byob!.read(new Uint8Array(this.#buffer!));
    // The buffer comes back (transferred) with the bytes, or empty at the end.
    if (value) this.#buffer = value.buffer as ArrayBuffer;
    return done ? undefined : value;
  }

  /**
   * Where the body is a byte stream and FFI is granted, reads the next bytes into `into` itself
   * from `at` on (through {@linkcode memoryAlias}: one per `into`, handed from read to read) and
   * says how many: 0 at the end. `undefined` where it cannot (no byte stream, no FFI, less than
   * 64 KiB left): then `next` reads them.
   */
  async readInPlace(into: Uint8Array, at: number): Promise<number | undefined> {
    if (!this.#byob || into.byteLength - at < IN_PLACE_MIN) return undefined;
    let place = this.#place;
    if (place?.into !== into) {
      const alias = memoryAlias(into);
      if (!alias) return undefined;
      place = this.#place = { into, alias, address: addressOf(into) };
    }
    const { done, value } = await this.#byob.read(new Uint8Array(place.alias, at));
    // `into` stayed referenced (by `place`) until here: the transport wrote into live memory.
    if (done) {
      this.#place = undefined;
      return 0;
    }
    if (addressOf(value!) === place.address + at) place.alias = value!.buffer as ArrayBuffer;
    else {
      // A stream that lost the alias (a retried connection) answers in a fresh buffer: copied in.
      into.set(value!, at);
      this.#place = undefined;
    }
    if (at + value!.byteLength === into.byteLength) this.#place = undefined;
    return value!.byteLength;
  }

  cancel(reason?: unknown): Promise<void> {
    return (this.#byob ?? this.#chunks)!.cancel(reason);
  }
}

/** A response body copied into `into`, which it must fill exactly; `flight`, if given, follows its progress. */
async function fill(
  url: string,
  stats: ObjectReaderStats,
  body: ReadableStream<Uint8Array>,
  into: Uint8Array,
  start: number,
  flight?: Flight,
): Promise<void> {
  let at = 0;
  const bytes = new BodyBytes(body, Math.min(OBJECT_READER_READ_SIZE, Math.max(1, into.byteLength)));
  for (;;) {
    // Straight into place where FFI is granted; else through the reader's buffer.
    let n = await bytes.readInPlace(into, at);
    if (n === 0) break;
    if (n === undefined) {
      const chunk = await bytes.next();
      if (chunk === undefined) break;
      if (at + chunk.byteLength > into.byteLength) {
        await bytes.cancel().catch(() => {});
        throw new SyntaxError(
          `Cannot read ${url}: the store sent more than the ${into.byteLength} bytes asked for at offset ${start}`,
        );
      }
      into.set(chunk, at);
      n = chunk.byteLength;
    }
    at += n;
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
}

/** What both readers share: the object's description, their counts, `stat` and `close`. */
abstract class Described implements ObjectReader {
  readonly url: string;
  readonly version: string;
  readonly size: number;
  readonly head: Uint8Array;
  readonly stats: ObjectReaderStats;
  declare readonly allocate?: (n: number) => Uint8Array;
  /** Aborts the requests in flight on `close`. */
  protected readonly abort: AbortController;
  protected closed = false;

  constructor(
    url: string,
    info: { version: string; size: number },
    head: Uint8Array,
    stats: ObjectReaderStats,
    options: { allocate?: ((n: number) => Uint8Array) | undefined },
    abort: AbortController,
  ) {
    this.url = url;
    this.version = info.version;
    this.size = info.size;
    this.head = head;
    this.stats = stats;
    this.abort = abort;
    // An own property only when given: a decoder falls back to `new Uint8Array(n)` without it.
    if (options.allocate) Object.defineProperty(this, "allocate", { value: options.allocate, enumerable: true });
  }

  stat(): Promise<{ size: number }> {
    return Promise.resolve({ size: this.size });
  }

  close(): void {
    this.closed = true;
    this.abort.abort(new Error(`Cannot read ${this.url}: the reader was closed`));
  }

  /** A read after `close` is an error. */
  protected checkOpen(): void {
    if (this.closed) throw new Error(`Cannot read ${this.url}: the reader was closed`);
  }

  abstract read(into: Uint8Array): Promise<number | null>;
}

/** The signal of a reader's requests: its own `abort`, and the caller's `signal` if given. */
function readerSignal(abort: AbortController, signal: AbortSignal | undefined): AbortSignal {
  return signal ? AbortSignal.any([signal, abort.signal]) : abort.signal;
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
  const signal = readerSignal(abort, options.signal);
  const stats: ObjectReaderStats = { requests: 0, bytesFetched: 0, bytesDirect: 0, peakInFlight: 0 };
  // The first window: the object's size and version.
  stats.requests++;
  const first = await store.get(key, { range: { offset: 0, length: OBJECT_READER_WINDOW }, signal });
  const head = new Uint8Array(first.length);
  await fill(url, stats, first.body, head, 0);
  const ranges = { store, key, signal, partSize, slots: new Slots(concurrency) };
  return new RangedReader(url, first.info, head, stats, options, abort, ranges);
}

/** A window of the object: `bytes` from offset `at`, there once `done` settles. */
interface Window {
  at: number;
  bytes: Uint8Array;
  done: Promise<void>;
}

/**
 * {@linkcode openObjectReader}'s reader. A read takes its bytes from the one place that holds
 * them: the current window, a range of the announced body, a window fetched ahead, or a new
 * window fetched from where the read is.
 */
class RangedReader extends Described {
  readonly #store: ObjectStore;
  readonly #key: string;
  readonly #signal: AbortSignal;
  readonly #partSize: number;
  readonly #slots: Slots;
  #inFlight = 0;
  /** Of the next byte read. */
  #pos = 0;
  /** The bytes at hand, from `#windowAt`. */
  #window: Uint8Array;
  #windowAt = 0;
  /** The ranges of the body a decoder announced, in order; empty when none is being read. */
  #flights: Flight[] = [];
  /**
   * Windows fetched ahead, in order: the one after an announced body (fetched with it), or, while
   * nothing is announced, the next part (a verify reads front to back and announces nothing).
   */
  #ahead: Window[] = [];
  /** True while the object is read with no announcement: then one part is fetched ahead. */
  #streaming = false;
  /** Why the reader stopped: the first range that failed, or `close`. Every read after it throws it. */
  #failure: { error: unknown } | undefined;

  constructor(
    url: string,
    info: { version: string; size: number },
    head: Uint8Array,
    stats: ObjectReaderStats,
    options: ObjectReaderOptions,
    abort: AbortController,
    ranges: { store: ObjectStore; key: string; signal: AbortSignal; partSize: number; slots: Slots },
  ) {
    super(url, info, head, stats, options, abort);
    this.#store = ranges.store;
    this.#key = ranges.key;
    this.#signal = ranges.signal;
    this.#partSize = ranges.partSize;
    this.#slots = ranges.slots;
    this.#window = head;
  }

  /**
   * Says where the next `into.byteLength` bytes go: the window (and windows fetched ahead) may
   * already hold the body's first bytes, which the decoder takes by `read`; the rest is fetched
   * straight into place, and the window after the body with it.
   */
  target(into: Uint8Array): void {
    this.#streaming = false;
    let covered = this.#windowAt + this.#window.byteLength;
    for (const w of this.#ahead) if (w.at === covered) covered += w.bytes.byteLength;
    const have = Math.max(0, Math.min(into.byteLength, covered - this.#pos));
    const start = this.#pos + have;
    const length = Math.min(into.byteLength - have, this.size - start);
    if (length <= 0 || this.closed) return;
    this.#flights = this.#fetchBody(into.subarray(have, have + length), start);
    // The window after the body, fetched meanwhile: the next record's header.
    const after = start + length;
    this.#ahead = this.#ahead.filter((w) => w.at < start);
    if (after < this.size) this.#ahead.push(this.#fetchWindow(after, OBJECT_READER_WINDOW));
  }

  override close(): void {
    this.#fail(new Error(`Cannot read ${this.url}: the reader was closed`));
  }

  async read(into: Uint8Array): Promise<number | null> {
    this.#throwIfStopped();
    if (into.byteLength === 0) return 0;
    const pos = this.#pos;
    if (pos >= this.size) return null;
    if (pos < this.#windowAt + this.#window.byteLength && pos >= this.#windowAt) return this.#fromWindow(into);
    const f = this.#flights.find((f) => pos >= f.start && pos < f.start + f.into.byteLength);
    if (f) return await this.#fromFlight(f, into);
    this.#flights = [];
    const i = this.#ahead.findIndex((w) => pos >= w.at && pos < w.at + w.bytes.byteLength);
    if (i >= 0) {
      const w = this.#ahead[i]!;
      this.#ahead = this.#ahead.slice(i + 1);
      return await this.#fromNextWindow(w, into);
    }
    // Anywhere else (no announcement): one window from here, and the next part fetched ahead.
    this.#ahead = [];
    this.#streaming = true;
    const w = this.#fetchWindow(pos, Math.max(OBJECT_READER_WINDOW, into.byteLength));
    return await this.#fromNextWindow(w, into);
  }

  /** Bytes of the current window. */
  #fromWindow(into: Uint8Array): number {
    const n = Math.min(into.byteLength, this.#windowAt + this.#window.byteLength - this.#pos);
    const from = this.#pos - this.#windowAt;
    into.set(this.#window.subarray(from, from + n));
    this.#pos += n;
    return n;
  }

  /** Bytes of `w` once it arrived; it becomes the current window, and the next part is fetched ahead. */
  async #fromNextWindow(w: Window, into: Uint8Array): Promise<number> {
    await this.#settled(w.done);
    this.#window = w.bytes;
    this.#windowAt = w.at;
    this.#readAhead();
    return this.#fromWindow(into);
  }

  /** Bytes of an announced body's range, once they arrived (in place when `into` is where they went). */
  async #fromFlight(f: Flight, into: Uint8Array): Promise<number> {
    const off = this.#pos - f.start;
    const n = Math.min(into.byteLength, f.into.byteLength - off);
    if (f.filled < off + n) {
      // Wait for these bytes, or the range's end, or any range's failure (`#fail` wakes this read;
      // one that came before it set `#failure`, checked first).
      this.#throwIfStopped();
      await Promise.race([new Promise<void>((wake) => f.waiter = { need: off + n, wake }), this.#settled(f.done)]);
      f.waiter = undefined;
      this.#throwIfStopped();
      if (f.filled < off + n) await this.#settled(f.done);
    }
    const same = into.buffer === f.into.buffer && into.byteOffset === f.into.byteOffset + off;
    if (same) this.stats.bytesDirect += n;
    else into.set(f.into.subarray(off, off + n));
    this.#pos += n;
    const last = this.#flights[this.#flights.length - 1]!;
    if (this.#pos >= last.start + last.into.byteLength) this.#flights = [];
    return n;
  }

  /**
   * `into`, the bytes from `start`, fetched in ranges of partSize (fewer requests cost less CPU:
   * each one is signed and set up), split evenly, so the last is not a sliver.
   */
  #fetchBody(into: Uint8Array, start: number): Flight[] {
    const length = into.byteLength;
    const step = Math.ceil(length / Math.ceil(length / this.#partSize));
    const flights: Flight[] = [];
    for (let at = 0; at < length; at += step) {
      const part = into.subarray(at, Math.min(length, at + step));
      const flight: Flight = { start: start + at, into: part, filled: 0, done: Promise.resolve() };
      flight.done = this.#fetchRange(start + at, part, flight);
      flight.done.then(() => flight.waiter?.wake(), () => flight.waiter?.wake());
      flights.push(flight);
    }
    return flights;
  }

  /** While the object is read with no announcement, the next part, fetched ahead (one at most). */
  #readAhead(): void {
    const last = this.#ahead.at(-1);
    const at = last ? last.at + last.bytes.byteLength : this.#windowAt + this.#window.byteLength;
    if (!this.#streaming || this.#ahead.length > 0 || this.#flights.length || at >= this.size || this.closed) return;
    this.#ahead.push(this.#fetchWindow(at, this.#partSize));
  }

  /** Up to `n` bytes from `at` (fewer at the object's end), into a buffer of their own. */
  #fetchWindow(at: number, n: number): Window {
    const bytes = new Uint8Array(Math.min(n, this.size - at));
    return { at, bytes, done: this.#fetchRange(at, bytes) };
  }

  /** Fetches `into.byteLength` bytes from `start` into `into`, in one ranged GET, once a slot is free. */
  #fetchRange(start: number, into: Uint8Array, flight?: Flight): Promise<void> {
    const p = this.#get(start, into, flight);
    p.catch(() => {}); // awaited by the read that needs it
    return p;
  }

  /**
   * Stops the reader: the requests in flight are aborted, and a read waiting on a range wakes to
   * throw `error` (a range no read waits on yet stops it too: nothing can then wait on it forever).
   */
  #fail(error: unknown): void {
    if (this.#failure) return;
    this.#failure = { error };
    this.closed = true;
    this.abort.abort(error);
    for (const f of this.#flights) f.waiter?.wake();
  }

  #throwIfStopped(): void {
    if (this.#failure) throw this.#failure.error;
    this.checkOpen();
  }

  /** `p`, failing with the reader's failure (not the abort it caused in the other requests). */
  #settled(p: Promise<void>): Promise<void> {
    return p.catch((e) => Promise.reject(this.#failure ? this.#failure.error : e));
  }

  async #get(start: number, into: Uint8Array, flight?: Flight): Promise<void> {
    const { url, stats, version } = this;
    await this.#slots.take();
    try {
      if (this.closed) throw new Error(`Cannot read ${url}: the reader was closed`);
      stats.peakInFlight = Math.max(stats.peakInFlight, ++this.#inFlight);
      stats.requests++;
      const range = { offset: start, length: into.byteLength };
      const r = await this.#store.get(this.#key, { range, signal: this.#signal });
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
      await fill(url, stats, r.body, into, start, flight);
    } catch (e) {
      this.#fail(e);
      throw e;
    } finally {
      this.#inFlight--;
      this.#slots.give();
    }
  }
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
  const got = await store.get(key, { signal: readerSignal(abort, options.signal) });
  const stats: ObjectReaderStats = { requests: 1, bytesFetched: 0, bytesDirect: 0, peakInFlight: 1 };
  const chunks = new BodyChunks(url, got.info.size, stats, got.body);
  // The first bytes, for a format's magic: a copy (the next read reuses the buffer they came in),
  // read first.
  let head: Uint8Array = new Uint8Array(0);
  while (head.byteLength < Math.min(64, got.info.size) && await chunks.more()) {
    head = concatBytes([head, chunks.pending]);
  }
  chunks.pending = head;
  return new StreamReader(url, got.info, head, stats, options, abort, chunks);
}

/** A response body's bytes, one read at hand at a time, counted against the size the store gave. */
class BodyChunks {
  readonly #url: string;
  readonly #size: number;
  readonly #stats: ObjectReaderStats;
  readonly #body: BodyBytes;
  /** A read's bytes not yet taken (valid until the next `more`). */
  pending: Uint8Array = new Uint8Array(0);

  constructor(url: string, size: number, stats: ObjectReaderStats, body: ReadableStream<Uint8Array>) {
    this.#url = url;
    this.#size = size;
    this.#stats = stats;
    this.#body = new BodyBytes(body, OBJECT_READER_READ_SIZE);
  }

  /** The next bytes into `pending`; false at the end (a body that ends short, or runs long, is a `SyntaxError`). */
  async more(): Promise<boolean> {
    const value = await this.#body.next();
    if (value === undefined) return this.#counted(0);
    this.#counted(value.byteLength);
    this.pending = value;
    return true;
  }

  /**
   * The next bytes read straight into `into` from `at` (no `pending` left to take first): how
   * many, 0 at the end; `undefined` where the body cannot (then `more`).
   */
  async inPlace(into: Uint8Array, at: number): Promise<number | undefined> {
    const n = await this.#body.readInPlace(into, at);
    if (n === undefined) return undefined;
    this.#counted(n);
    if (n > 0) this.#stats.bytesDirect += n;
    return n;
  }

  /** Counts `n` bytes that arrived (0: the end) against the size; false at the end. */
  #counted(n: number): boolean {
    const stats = this.#stats;
    if (n === 0) {
      if (stats.bytesFetched < this.#size) {
        throw new SyntaxError(
          `Cannot read ${this.#url}: the body ended at byte ${stats.bytesFetched} of ${this.#size}`,
        );
      }
      return false;
    }
    stats.bytesFetched += n;
    if (stats.bytesFetched > this.#size) {
      throw new SyntaxError(`Cannot read ${this.#url}: the body runs past the ${this.#size} bytes the store gave`);
    }
    return true;
  }

  cancel(): void {
    this.#body.cancel().catch(() => {});
  }
}

/** {@linkcode openObjectStream}'s reader: each read fills the caller's buffer from the body's chunks. */
class StreamReader extends Described {
  readonly #chunks: BodyChunks;
  /** Of the next byte read. */
  #pos = 0;

  constructor(
    url: string,
    info: { version: string; size: number },
    head: Uint8Array,
    stats: ObjectReaderStats,
    options: Pick<ObjectReaderOptions, "allocate">,
    abort: AbortController,
    chunks: BodyChunks,
  ) {
    super(url, info, head, stats, options, abort);
    this.#chunks = chunks;
  }

  /**
   * Fills as much of `into` as the bytes at hand and those that follow give, up to its end: where
   * FFI is granted, the transport writes them into `into` itself; else they are copied in from the
   * reader's buffer.
   */
  async read(into: Uint8Array): Promise<number | null> {
    this.checkOpen();
    if (into.byteLength === 0) return 0;
    if (this.#pos >= this.size) return null;
    const chunks = this.#chunks;
    let n = 0;
    while (n < into.byteLength) {
      if (chunks.pending.byteLength === 0) {
        const direct = await this.#fetch(() => chunks.inPlace(into, n));
        if (direct === 0) break;
        if (direct !== undefined) {
          n += direct;
          continue;
        }
        if (!(await this.#fetch(() => chunks.more()))) break;
      }
      const k = Math.min(chunks.pending.byteLength, into.byteLength - n);
      into.set(chunks.pending.subarray(0, k), n);
      chunks.pending = chunks.pending.subarray(k);
      n += k;
    }
    this.#pos += n;
    return n;
  }

  /** A read of the body; `close` cancels the body, and a read it ended early says so, not that the body was short. */
  async #fetch<T>(read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (e) {
      this.checkOpen();
      throw e;
    }
  }

  override close(): void {
    super.close();
    this.#chunks.cancel();
  }
}
