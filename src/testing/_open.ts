// Either side of a checkpoint comparison, opened as the diff engine reads it: an in-memory
// checkpoint as it is, anything loadCheckpoint reads as a verified stream of records, with a way
// to read named tensors again where the source allows it.

import type { DiffSource } from "../compare/checkpoint_diff.ts";
import type { DecodeOptions } from "../format/decode.ts";
import { type CheckpointSource, decodeCheckpoint } from "../io/read.ts";
import type { Checkpoint, CheckpointInput, Metadata, Tensor, TensorInput } from "../format/types.ts";
import { validateTensor } from "../format/dtype.ts";
import { validateMetadata } from "../format/metadata.ts";
import { loadCheckpoint } from "../io/load.ts";
import { iterate, streamIterator } from "../format/_streams.ts";

/** A checkpoint to compare: in memory, or anything `loadCheckpoint` reads (a path, a URL, bytes, a stream). */
export type CheckpointLike = Checkpoint | CheckpointInput | CheckpointSource;

/** Whether `x` is an in-memory checkpoint rather than a source of bytes. */
function inMemory(x: CheckpointLike): x is Checkpoint | CheckpointInput {
  return typeof x === "object" && x !== null && !(x instanceof Uint8Array) && !(x instanceof URL) &&
    !(x instanceof ReadableStream) && "metadata" in x && "tensors" in x;
}

function full(t: TensorInput, where: string): Tensor {
  try {
    validateTensor(t);
  } catch (e) {
    throw new TypeError(`Cannot compare checkpoints: ${where}: ${(e as Error).message}`, { cause: e });
  }
  return { ...t, shape: [...t.shape], group: t.group ?? "params" } as Tensor;
}

async function* each(tensors: CheckpointInput["tensors"], where: string): AsyncGenerator<Tensor> {
  for await (const t of iterate(tensors as AsyncIterable<TensorInput>)) yield full(t, where);
}

/** Whether a source can be read twice (so tensors can be read again by name). */
function rereadable(x: CheckpointSource): boolean {
  return typeof x === "string" || x instanceof URL || x instanceof Uint8Array;
}

/** Opens one side for the diff engine; `where` names it in errors ("actual", "expected"). */
export async function openSide(
  x: CheckpointLike,
  where: string,
  options: DecodeOptions = {},
): Promise<DiffSource & { close(): Promise<void> }> {
  if (inMemory(x)) {
    const metadata: Metadata = x.metadata;
    validateMetadata(metadata);
    const array = Array.isArray(x.tensors) ? (x.tensors as TensorInput[]) : undefined;
    return {
      metadata,
      close: async () => {},
      tensors: () => each(x.tensors, where),
      byName: array
        ? async function* (names) {
          const wanted = new Set(names);
          for (const t of array) if (wanted.has(t.name)) yield full(t, where);
        }
        : undefined,
    };
  }
  if (x === null || x === undefined) throw new TypeError(`Cannot compare checkpoints: ${where} is ${x}`);
  // One reused tensor buffer: the engine copies only what it must hold.
  const records = streamIterator(decodeCheckpoint(x, { ...options, reuseBuffers: true }));
  const first = await records.next();
  if (first.done || first.value.type !== "metadata") {
    throw new SyntaxError(`Cannot compare checkpoints: ${where} has no metadata record`);
  }
  const metadata = first.value.metadata;
  let used = false;
  return {
    metadata,
    transient: true,
    // Cancelling the records cancels the source: a file closes at once.
    close: async () => void await records.return?.(),
    tensors: () => {
      if (used) throw new Error(`Cannot compare checkpoints: ${where} was already read`);
      used = true;
      return (async function* () {
        for (let r = await records.next(); !r.done; r = await records.next()) {
          if (r.value.type === "tensor") yield r.value.tensor;
        }
      })();
    },
    byName: rereadable(x)
      ? async function* (names) {
        const { tensors } = await loadCheckpoint(x, { ...options, only: [...names] });
        yield* tensors;
      }
      : undefined,
  };
}
