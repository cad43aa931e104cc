// Builds a stream pair whose readable side is an async generator over what is written to the
// writable side: output is produced only when the reader pulls, so backpressure comes free.
import { readableFrom } from "./_streams.ts";

export function generatorPair<I, O>(
  body: (input: AsyncIterable<I>) => AsyncGenerator<O>,
): { writable: WritableStream<I>; readable: ReadableStream<O> } {
  // A record is taken from upstream only when the generator asks for it, so at most one record
  // waits here at a time. The writable side holds that one (highWaterMark 1): with 0, Chromium
  // never lets a pipe write into the stream and every pipeTo/pipeThrough hangs.
  const pass = new TransformStream<I, I>({}, { highWaterMark: 1 }, { highWaterMark: 0 });
  const it = pass.readable[Symbol.asyncIterator]();
  async function* run(): AsyncGenerator<O> {
    try {
      yield* body({ [Symbol.asyncIterator]: () => it });
    } finally {
      // Ended early (an error, or the reader cancelled): cancel upstream too, so its source
      // (an open file, a socket) is released now rather than left waiting.
      await it.return?.();
    }
  }
  return { writable: pass.writable, readable: readableFrom(run()) };
}

/** The two ends of a promise. */
export interface Settle<T> {
  resolve(value: T): void;
  reject(reason: unknown): void;
}

/**
 * An encoder pair from a generator that also settles the SHA-256 (hex) of all it produced.
 * The digest promise never causes an unhandled rejection: errors surface through the stream.
 */
export function digestingEncoder<I>(
  body: (input: AsyncIterable<I>, settle: Settle<string>) => AsyncGenerator<Uint8Array>,
): { writable: WritableStream<I>; readable: ReadableStream<Uint8Array>; sha256: Promise<string> } {
  let settle!: Settle<string>;
  const sha256 = new Promise<string>((resolve, reject) => (settle = { resolve, reject }));
  sha256.catch(() => {});
  return { ...generatorPair((input: AsyncIterable<I>) => body(input, settle)), sha256 };
}
