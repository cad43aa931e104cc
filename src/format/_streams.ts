// ReadableStream.from where the runtime has it (Deno, Node 20.6+), and the same pull-driven
// stream built by hand where it does not (Chromium 156 has no ReadableStream.from).

type Source<T> = Iterable<T> | AsyncIterable<T>;

/** A stream over an iterable that pulls one value per read and returns the iterator on cancel. */
export function pullStream<T>(source: Source<T>): ReadableStream<T> {
  let it: Iterator<T> | AsyncIterator<T> | undefined;
  return new ReadableStream<T>({
    start() {
      it = Symbol.asyncIterator in source
        ? (source as AsyncIterable<T>)[Symbol.asyncIterator]()
        : (source as Iterable<T>)[Symbol.iterator]();
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
