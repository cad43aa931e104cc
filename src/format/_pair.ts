// Builds a stream pair whose readable side is an async generator over what is written to the
// writable side: output is produced only when the reader pulls, so backpressure comes free.
import { readableFrom, streamIterator } from "./_streams.ts";

export function generatorPair<I, O>(
  body: (input: AsyncIterable<I>) => AsyncGenerator<O>,
): { writable: WritableStream<I>; readable: ReadableStream<O> } {
  // A record is taken from upstream only when the generator asks for it, so at most one record
  // waits here at a time. The writable side holds that one (highWaterMark 1): with 0, Chromium
  // never lets a pipe write into the stream and every pipeTo/pipeThrough hangs.
  const pass = new TransformStream<I, I>({}, { highWaterMark: 1 }, { highWaterMark: 0 });
  const it = streamIterator(pass.readable);
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
 * A promise and its two ends. It never causes an unhandled rejection: whoever settles it with an
 * error also throws that error somewhere it is seen (a stream).
 */
export function settled<T>(): { promise: Promise<T> } & Settle<T> {
  let settle!: Settle<T>;
  const promise = new Promise<T>((resolve, reject) => (settle = { resolve, reject }));
  promise.catch(() => {});
  return { promise, ...settle };
}

/** What an encoding generator settles: the SHA-256 of all it produced, and the checkpoint's own digest. */
export interface EncoderDigests {
  /** SHA-256 (hex) of every byte produced, when the caller asked for it. */
  sha256: Settle<string> | undefined;
  /** The stream digest the format stores (hex). */
  digest: Settle<string>;
}

/**
 * An encoder pair from a generator that settles the SHA-256 (hex) of all it produced (unless
 * `sha256` is false) and the checkpoint's stream digest.
 */
export function digestingEncoder<I>(
  body: (input: AsyncIterable<I>, settle: EncoderDigests) => AsyncGenerator<Uint8Array>,
  sha256 = true,
): {
  writable: WritableStream<I>;
  readable: ReadableStream<Uint8Array>;
  sha256: Promise<string> | undefined;
  digest: Promise<string>;
} {
  const file = sha256 ? settled<string>() : undefined;
  const digest = settled<string>();
  const pair = generatorPair((input: AsyncIterable<I>) => body(input, { sha256: file, digest }));
  return { ...pair, sha256: file?.promise, digest: digest.promise };
}

/**
 * A decoder pair from a generator that settles the checkpoint's stream digest (hex) once it has
 * verified it; the promise rejects if the stream ends any other way.
 */
export function digestingDecoder<O>(
  body: (input: AsyncIterable<Uint8Array>, digest: Settle<string>) => AsyncGenerator<O>,
): { writable: WritableStream<Uint8Array>; readable: ReadableStream<O>; digest: Promise<string> } {
  const digest = settled<string>();
  const run = async function* (input: AsyncIterable<Uint8Array>): AsyncGenerator<O> {
    try {
      yield* body(input, digest);
    } finally {
      digest.reject(new Error("Cannot give the checkpoint digest: the stream did not end intact"));
    }
  };
  return { ...generatorPair(run), digest: digest.promise };
}
