// Streams in every runtime: ReadableStream.from where the runtime has it (Deno, Node 20.6+), the
// same pull-driven stream built by hand where it does not (Chromium 156 has no ReadableStream.from),
// and a stream's values read with a reader, because WebKit's ReadableStream (Safari's too) is not
// async-iterable: no `for await (… of stream)` anywhere, `iterate(stream)` instead.

type Source<T> = Iterable<T> | AsyncIterable<T>;

/** Whether `x` is a ReadableStream (by its reader, so a stream from another realm counts too). */
export function isReadableStream(x: unknown): x is ReadableStream<unknown> {
  return typeof x === "object" && x !== null && typeof (x as ReadableStream).getReader === "function" &&
    typeof (x as ReadableStream).pipeThrough === "function";
}

/**
 * An async iterator over a stream's values, read with a reader. It behaves as the stream's own
 * async iterator does where an engine has one: `return()` (a `break`, an early end) cancels the
 * stream, and the end or an error releases the lock.
 */
export function streamIterator<T>(stream: ReadableStream<T>): AsyncIterableIterator<T> {
  const reader = stream.getReader();
  let ended = false;
  const release = () => {
    ended = true;
    reader.releaseLock();
  };
  return {
    async next(): Promise<IteratorResult<T>> {
      if (ended) return { done: true, value: undefined };
      let r: ReadableStreamReadResult<T>;
      try {
        r = await reader.read();
      } catch (e) {
        release();
        throw e;
      }
      if (r.done) {
        release();
        return { done: true, value: undefined };
      }
      return { done: false, value: r.value };
    },
    async return(value?: unknown): Promise<IteratorResult<T>> {
      if (!ended) {
        ended = true;
        try {
          await reader.cancel(value);
        } finally {
          reader.releaseLock();
        }
      }
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/**
 * The values of a ReadableStream (read with a reader) or of an (async) iterable, for `for await`.
 *
 * @example
 * ```ts
 * import { iterate } from "./_streams.ts";
 * import assert from "node:assert/strict";
 * const stream = new Blob([new Uint8Array([1, 2, 3])]).stream();
 * let n = 0;
 * for await (const chunk of iterate(stream)) n += chunk.byteLength;
 * assert.equal(n, 3);
 * ```
 */
export function iterate<T>(source: ReadableStream<T> | Source<T>): AsyncIterable<T> | Iterable<T> {
  if (!isReadableStream(source)) return source as Source<T>;
  return { [Symbol.asyncIterator]: () => streamIterator(source as ReadableStream<T>) };
}

/** An async iterator over a stream's or an (async) iterable's values. */
export function iteratorOf<T>(source: ReadableStream<T> | Source<T>): AsyncIterator<T> | Iterator<T> {
  if (isReadableStream(source)) return streamIterator(source as ReadableStream<T>);
  return Symbol.asyncIterator in source
    ? (source as AsyncIterable<T>)[Symbol.asyncIterator]()
    : (source as Iterable<T>)[Symbol.iterator]();
}

/** A stream over an iterable that pulls one value per read and returns the iterator on cancel. */
export function pullStream<T>(source: Source<T> | ReadableStream<T>): ReadableStream<T> {
  let it: Iterator<T> | AsyncIterator<T> | undefined;
  return new ReadableStream<T>({
    start() {
      it = iteratorOf(source);
    },
    async pull(controller) {
      const r = await it!.next();
      if (r.done) controller.close();
      else controller.enqueue(await r.value);
    },
    async cancel(reason) {
      await it!.return?.(reason);
    },
  }, { highWaterMark: 0 });
}

const native = (ReadableStream as { from?: <T>(source: Source<T>) => ReadableStream<T> }).from;

/** `ReadableStream.from(source)`, in every runtime. */
export const readableFrom: <T>(source: Source<T>) => ReadableStream<T> = native
  ? <T>(source: Source<T>) => native.call(ReadableStream, source) as ReadableStream<T>
  : pullStream;
