// Shared by the sharded kill test and its child: where the checkpoints are, and what is saved.
import { FileStore } from "../../src/storage/file.ts";
import { S3Store, type S3StoreOptions } from "../../src/storage/s3.ts";
import type { ObjectStore } from "../../src/storage/types.ts";

/** A local directory, or an S3 bucket and prefix. */
export type Target = { kind: "file"; root: string } | { kind: "s3"; options: S3StoreOptions };

/** The store a target names. */
export function storeOf(target: Target): ObjectStore {
  return target.kind === "file" ? new FileStore(target.root) : new S3Store(target.options);
}

/** The save attempt both children write. */
export const SAVE_ID = "step-2-attempt-1";

/** Elements of the trained tensor: big enough that each part is a real write. */
export const TRAINED = 50_000;
