/**
 * The error the `./testing` assertions throw.
 *
 * @module
 */

/**
 * A failed checkpoint assertion. Its message says what differs and where.
 *
 * @example
 * ```ts
 * import { AssertionError } from "./assertion_error.ts";
 * import assert from "node:assert/strict";
 * const e = new AssertionError("checkpoints differ: 1 tensor only in actual");
 * assert.equal(e.name, "AssertionError");
 * ```
 */
export class AssertionError extends Error {
  /**
   * Makes the error.
   *
   * @param message what failed
   * @param options the cause, if any
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "AssertionError";
  }
}
