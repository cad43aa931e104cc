// What every encoder checks of the records it is given: metadata first and once, then valid
// tensors with unique names. One place, so every codec refuses the same things the same way.
import { validateTensor } from "./dtype.ts";
import type { CheckpointRecord, TensorInput } from "./types.ts";

export class EncodeGuard {
  #what: string;
  #sawMetadata = false;
  #names = new Set<string>();

  /** `what` ends up in messages: `Cannot encode ${what}: ...`. */
  constructor(what = "checkpoint") {
    this.#what = what;
  }

  #fail(why: string): never {
    throw new TypeError(`Cannot encode ${this.#what}: ${why}`);
  }

  /** Checks a record in sequence; returns its type. */
  check(record: CheckpointRecord): "metadata" | "tensor" {
    if (record?.type === "metadata") {
      if (this.#sawMetadata) this.#fail("metadata given twice");
      this.#sawMetadata = true;
      return "metadata";
    }
    if (record?.type !== "tensor") this.#fail(`unknown record type ${(record as { type?: unknown })?.type}`);
    if (!this.#sawMetadata) this.#fail("a tensor came before the metadata");
    this.tensor(record.tensor);
    return "tensor";
  }

  /** Checks one tensor: valid, and a name not seen before. */
  tensor(t: TensorInput): void {
    validateTensor(t);
    if (this.#names.has(t.name)) this.#fail(`duplicate tensor name ${JSON.stringify(t.name)}`);
    this.#names.add(t.name);
  }

  /** At the end of the records: there was metadata. Returns how many tensors there were. */
  end(): number {
    if (!this.#sawMetadata) this.#fail("no metadata record");
    return this.#names.size;
  }
}
