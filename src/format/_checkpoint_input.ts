// The first check on a checkpoint handed to a save: an object with metadata and tensors, and
// not a Promise of one (`snapshot()` returns a Promise; `manager.save(snapshot(...))` without
// `await` would otherwise fail later as "Invalid metadata").
import type { CheckpointInput } from "./types.ts";

/** Throws a `TypeError` starting with `context` unless `checkpoint` is an object that is not a Promise. */
export function checkCheckpointObject(checkpoint: unknown, context: string): asserts checkpoint is CheckpointInput {
  if (typeof (checkpoint as PromiseLike<unknown> | null)?.then === "function") {
    throw new TypeError(
      `${context}: got a Promise, not a checkpoint; await it first (snapshot() returns a Promise: save(await snapshot(...)))`,
    );
  }
  if (typeof checkpoint !== "object" || checkpoint === null) {
    throw new TypeError(`${context}: expected { metadata, tensors }`);
  }
}
