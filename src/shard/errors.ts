/**
 * The errors a sharded save can end with that a caller is expected to catch.
 *
 * @module
 */
import { PreconditionFailedError } from "../storage/types.ts";

/**
 * A sharded save's committer gave up waiting: some writers wrote no done record before the
 * deadline. Nothing was committed; {@linkcode ShardDeadlineError.missing} lists the writers
 * (0-based) that did not finish.
 *
 * @example
 * ```ts
 * import { ShardDeadlineError } from "./errors.ts";
 * import assert from "node:assert/strict";
 * const e = new ShardDeadlineError("file:///runs/a.ckpt", [2], 4, 1000);
 * assert.equal(e.message, "Cannot commit sharded checkpoint file:///runs/a.ckpt: writer 2 of 4 (part-00003-of-00004.ckpt) wrote no done record within 1000 ms; nothing was committed");
 * assert.deepEqual(e.missing, [2]);
 * ```
 */
export class ShardDeadlineError extends Error {
  /** The checkpoint's address. */
  readonly url: string;
  /** The writers (0-based) that wrote no done record in time. */
  readonly missing: readonly number[];
  /**
   * Names the writers that did not finish.
   *
   * @param url the checkpoint's address
   * @param missing the writers (0-based) without a done record
   * @param writers how many writers the save has
   * @param waited how long the committer waited, in milliseconds
   */
  constructor(url: string, missing: readonly number[], writers: number, waited: number, options?: ErrorOptions) {
    const named = missing.slice(0, 8).map((w) => `${w} of ${writers} (${partName(w, writers)})`);
    const more = missing.length > 8 ? ` and ${missing.length - 8} more` : "";
    super(
      `Cannot commit sharded checkpoint ${url}: writer${missing.length === 1 ? "" : "s"} ${named.join(", ")}${more} ` +
        `wrote no done record within ${waited} ms; nothing was committed`,
      options,
    );
    this.name = "ShardDeadlineError";
    this.url = url;
    this.missing = [...missing];
  }
}

/**
 * Two committers raced for the same address and this one lost: the other's manifest is
 * committed, this one wrote nothing. A `PreconditionFailedError`, so code that handles a lost
 * conditional write handles this too.
 *
 * @example
 * ```ts
 * import { ShardConflictError } from "./errors.ts";
 * import { PreconditionFailedError } from "../storage/types.ts";
 * import assert from "node:assert/strict";
 * const e = new ShardConflictError("s3://b/run/a.ckpt", "save-1");
 * assert.ok(e instanceof PreconditionFailedError);
 * assert.match(e.message, /another committer's manifest is already there/);
 * ```
 */
export class ShardConflictError extends PreconditionFailedError {
  /** The save attempt whose commit lost. */
  readonly saveId: string;
  /**
   * Names the address and the save that lost.
   *
   * @param url the checkpoint's address
   * @param saveId the save attempt whose commit lost
   */
  constructor(url: string, saveId: string, options?: ErrorOptions) {
    super(url, `another committer's manifest is already there (save ${JSON.stringify(saveId)} not committed)`, options);
    this.name = "ShardConflictError";
    this.saveId = saveId;
  }
}

/**
 * A writer of a sharded save failed and said so (its error travels in its done record): the
 * committer stops waiting and commits nothing. {@linkcode ShardWriterError.writer} is the writer.
 *
 * @example
 * ```ts
 * import { ShardWriterError } from "./errors.ts";
 * import assert from "node:assert/strict";
 * const e = new ShardWriterError(1, "writer 1 of 2 failed (RangeError: ...); nothing was committed");
 * assert.equal(e.writer, 1);
 * ```
 */
export class ShardWriterError extends Error {
  /** The writer (0-based) that failed. */
  readonly writer: number;
  /**
   * Names the writer and what it reported.
   *
   * @param writer the writer (0-based) that failed
   * @param message what failed, and that nothing was committed
   */
  constructor(writer: number, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ShardWriterError";
    this.writer = writer;
  }
}

/** The file name of part `writer` (0-based) of `writers`: `part-00001-of-00002.ckpt` for writer 0 of 2. */
export function partName(writer: number, writers: number): string {
  return `part-${String(writer + 1).padStart(5, "0")}-of-${String(writers).padStart(5, "0")}.ckpt`;
}

/** The file name of writer `writer`'s (0-based) done record: `done-00001-of-00002.json` for writer 0 of 2. */
export function doneName(writer: number, writers: number): string {
  return `done-${String(writer + 1).padStart(5, "0")}-of-${String(writers).padStart(5, "0")}.json`;
}
