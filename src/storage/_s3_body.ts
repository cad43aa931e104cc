// The body of an S3 GET, made resilient and read with the caller's buffers: a byte stream
// (`type: "bytes"`), so a reader that brings its own buffer (`getReader({ mode: "byob" })`, as
// src/storage/object_reader.ts does) has the transport write into it, as many bytes at once as
// have arrived (hundreds of KiB where a default read gets one 64 KiB chunk), with no chunk
// allocated per read and no copy in between; a default reader gets chunks of 64 KiB as before.
// If no bytes come for `timeout` ms, or the connection fails, the rest is fetched again from
// where it stopped (by the store's `refetch`: a ranged GET with `If-Match`), up to `retries`
// failures in a row.

import { unref } from "../runtime/signals.ts";

/** What a resumable body asks of its store. */
export interface BodyHooks {
  /** Milliseconds a read may wait for its first byte before the connection counts as stalled. */
  timeout: number;
  /** Failures in a row before the body fails for good. */
  retries: number;
  /** Aborts the body (and its refetches). */
  signal: AbortSignal | undefined;
  /** A fresh body of the bytes from `pos` to the span's end, of the same version. */
  refetch(pos: number): Promise<ReadableStream<Uint8Array> | undefined>;
  /** Whether `e` may be retried; anything else fails the body as it is. */
  transient(e: unknown): boolean;
  /** The body's error once `failures` attempts in a row failed at byte `pos`, the last with `e`. */
  exhausted(pos: number, failures: number, e: unknown): Error;
  /** Waits before the next attempt, after `failures` failures in a row. */
  backoff(failures: number): Promise<void>;
}

/** Bytes a default reader gets per read (the transport's own chunk size in Deno). */
const DEFAULT_CHUNK = 64 * 1024;

/** A view of `shape`'s size and place in a fresh buffer: for a read whose buffer a failed transfer took. */
function replacement(shape: { capacity: number; offset: number; length: number }, length = shape.length): Uint8Array {
  return new Uint8Array(new ArrayBuffer(shape.capacity), shape.offset, length);
}

/** A byte reader of one connection's body, or a default one where the runtime's body is not a byte stream. */
type Reader =
  | { byob: true; reader: ReadableStreamBYOBReader }
  | { byob: false; reader: ReadableStreamDefaultReader<Uint8Array>; pending: Uint8Array };

function readerOf(body: ReadableStream<Uint8Array>): Reader {
  try {
    return { byob: true, reader: body.getReader({ mode: "byob" }) };
  } catch {
    return { byob: false, reader: body.getReader(), pending: new Uint8Array(0) };
  }
}

/**
 * The bytes `[offset, offset + length)` of an object, from `first` (the response to the GET) on,
 * resumed by `hooks` where a connection fails or stalls.
 */
export class ResumableBody {
  readonly #hooks: BodyHooks;
  readonly #end: number;
  #pos: number;
  #failures = 0;
  #source: Reader | undefined;
  #first: ReadableStream<Uint8Array> | undefined;
  /** Set once the consumer cancelled: no request is made after that. */
  #cancelled = false;
  /**
   * The stall watch: one timer for the whole body, not one per read (a timer costs more than a
   * read of a few hundred KiB). While a read waits, the timer looks, every `timeout` ms at most,
   * whether that read started `timeout` ms ago; it stops once no read waits.
   */
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the read that waits now started; undefined when none waits. */
  #since: number | undefined;
  /** The error of a read the watch cancelled. */
  #stalled: Error | undefined;

  constructor(first: ReadableStream<Uint8Array> | null, span: { offset: number; length: number }, hooks: BodyHooks) {
    this.#hooks = hooks;
    this.#pos = span.offset;
    this.#end = span.offset + span.length;
    this.#first = first ?? undefined;
  }

  /**
   * The next bytes, written into `view`: a view of them in `view`'s memory (its buffer may have
   * been transferred: read the next bytes into the returned view's buffer), or an empty view at
   * the end (in a buffer of `view`'s size, at its offset). A body that ends short or runs long,
   * or fails more than `retries` times in a row, is an error.
   */
  async read(view: Uint8Array): Promise<Uint8Array> {
    const shape = { capacity: view.buffer.byteLength, offset: view.byteOffset, length: view.byteLength };
    for (;;) {
      const hooks = this.#hooks;
      try {
        this.#source ??= await this.#open();
        const { done, value } = await this.#next(this.#source, view);
        if (done) {
          if (this.#pos < this.#end) throw new Error(`the body ended ${this.#end - this.#pos} bytes early`);
          this.#source = undefined;
          this.#unwatch();
          // A byte stream's last read hands the buffer back, empty; some runtimes keep it.
          if (value !== undefined) return value.subarray(0, 0);
          return view.byteLength === shape.length ? view.subarray(0, 0) : replacement(shape, 0);
        }
        const got = value!;
        if (got.byteLength > this.#end - this.#pos) throw new Error(`the body runs past byte ${this.#end}`);
        this.#pos += got.byteLength;
        this.#failures = 0;
        return got;
      } catch (e) {
        this.#unwatch();
        this.#source?.reader.cancel(e).catch(() => {});
        this.#source = undefined;
        // A read into a transferred buffer that failed took it along: the next goes into a fresh one.
        if (view.byteLength !== shape.length) view = replacement(shape);
        // Cancelled by the consumer: nothing more is wanted (a refetch would loop on a closed stream).
        if (this.#cancelled) return view.subarray(0, 0);
        if (hooks.signal?.aborted) throw hooks.signal.reason;
        // Every byte arrived before the connection failed: the body is whole.
        if (this.#pos === this.#end) return view.subarray(0, 0);
        // An answer that says no (412: the object changed; 403) ends it; a failed transfer is retried.
        if (!hooks.transient(e)) throw e;
        if (++this.#failures > hooks.retries) throw hooks.exhausted(this.#pos, this.#failures, e);
      }
      await hooks.backoff(this.#failures);
      if (this.#cancelled) return view.subarray(0, 0);
    }
  }

  /** Stops the body: the connection is closed, and no request is made after this. */
  cancel(reason?: unknown): Promise<void> {
    this.#cancelled = true;
    this.#unwatch();
    const source = this.#source;
    this.#source = undefined;
    const first = this.#first;
    this.#first = undefined;
    return (source ? source.reader.cancel(reason) : first?.cancel(reason)) ?? Promise.resolve();
  }

  /** The first response's body, or, after a failure, a fresh request's from where it stopped. */
  async #open(): Promise<Reader> {
    let body = this.#first;
    this.#first = undefined;
    body ??= await this.#hooks.refetch(this.#pos);
    if (body === undefined) throw new Error("no body");
    return readerOf(body);
  }

  /**
   * One read from the connection into `view` (done at its end). A read that waits `timeout` ms
   * for bytes cancels the connection and fails.
   */
  async #next(source: Reader, view: Uint8Array): Promise<{ done: boolean; value?: Uint8Array | undefined }> {
    if (!source.byob && source.pending.byteLength > 0) return { done: false, value: this.#fromPending(source, view) };
    this.#since = performance.now();
    if (this.#timer === undefined) this.#watch(source, this.#hooks.timeout);
    let result: ReadableStreamReadResult<Uint8Array>;
    try {
      result = source.byob ? await source.reader.read(view) : await source.reader.read();
    } finally {
      this.#since = undefined;
    }
    const stalled = this.#stalled;
    this.#stalled = undefined;
    if (stalled) throw stalled;
    if (result.done || source.byob) return result;
    source.pending = result.value;
    return { done: false, value: this.#fromPending(source, view) };
  }

  /** Looks in `delay` ms whether the read that waits then has waited `timeout` ms; if so, it fails. */
  #watch(source: Reader, delay: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#since === undefined || this.#source !== source) return;
      const ms = this.#hooks.timeout;
      const waited = performance.now() - this.#since;
      if (waited < ms) return this.#watch(source, ms - waited);
      this.#stalled = new Error(`no bytes for ${ms} ms`);
      source.reader.cancel(this.#stalled).catch(() => {});
    }, delay);
    // A consumer that stops reading without cancelling leaves it to fire once: it holds no process open.
    unref(this.#timer);
  }

  /** Stops the watch (the body ended, failed or was cancelled). */
  #unwatch(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** A default reader's chunk, copied into `view` as far as it fits; the rest waits for the next read. */
  #fromPending(source: Reader & { byob: false }, view: Uint8Array): Uint8Array {
    const n = Math.min(view.byteLength, source.pending.byteLength);
    view.set(source.pending.subarray(0, n));
    source.pending = source.pending.subarray(n);
    return view.subarray(0, n);
  }

  /**
   * The body as a byte stream: a reader's own buffer is filled in place; a default reader gets
   * chunks of up to 64 KiB. It pulls only when read (no read-ahead in JavaScript: the socket's
   * buffer holds what arrives meanwhile), so a reader's buffer is never bypassed by a queue. Where
   * the runtime has no byte streams, a default stream of 64 KiB chunks.
   */
  stream(): ReadableStream<Uint8Array> {
    let stream: ReadableStream<Uint8Array>;
    try {
      stream = new ReadableStream({
        type: "bytes",
        autoAllocateChunkSize: DEFAULT_CHUNK,
        pull: async (controller) => {
          const request = controller.byobRequest!;
          const got = await this.read(request.view as Uint8Array);
          if (this.#cancelled) return;
          if (got.byteLength === 0) controller.close();
          request.respondWithNewView(got);
        },
        cancel: (reason) => this.cancel(reason),
      });
    } catch {
      // A runtime without byte streams: chunks of up to 64 KiB, each in a buffer of its own.
      stream = new ReadableStream({
        pull: async (controller) => {
          const got = await this.read(new Uint8Array(DEFAULT_CHUNK));
          if (this.#cancelled) return;
          if (got.byteLength === 0) controller.close();
          else controller.enqueue(got);
        },
        cancel: (reason) => this.cancel(reason),
      }, { highWaterMark: 0 });
    }
    sources.set(stream, this);
    return stream;
  }
}

/** Each body stream's own source, for {@linkcode bodySource}. */
const sources = new WeakMap<ReadableStream<Uint8Array>, ResumableBody>();

/**
 * The source of an S3 body `stream`, to read with the same own-buffer semantics as a BYOB read
 * but without the stream's machinery between (src/storage/object_reader.ts reads its GET's body
 * so); `undefined` for any other stream, or one already read. The stream is locked (taken) first.
 */
export function bodySource(stream: ReadableStream<Uint8Array>): ResumableBody | undefined {
  const source = sources.get(stream);
  if (!source || stream.locked) return undefined;
  sources.delete(stream);
  stream.getReader(); // taken: nothing else reads it now
  return source;
}
