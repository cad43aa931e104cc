/**
 * The tests that may skip in CI, each named with the reason. Every other test that a CI run skips
 * fails it: tests/run_all.ts compares the names its suites report as skipped (Deno's `ignored`,
 * Node's `skipped` and `todo`) with this list, and prints the exceptions that did skip, with
 * their reasons, above its closing line. A test that needs a component uses `componentTest`
 * (tests/_ci.ts; tests/node/_util.mjs for Node), which fails in CI without it unless it is here.
 *
 * Keep it short: an entry is for what no CI machine can do, not for what one failed to install.
 *
 * @module
 */

/** A test that may skip in CI, and why. */
export interface CiException {
  /** The test's name as the runner reports it (a step: `test > step`). */
  readonly test: string;
  /** Why it cannot run in CI. */
  readonly reason: string;
}

/** The tests that may skip in CI. */
export const CI_EXCEPTIONS: readonly CiException[] = Object.freeze([
  {
    test: "OpfsStore [webkit] concurrent { ifMatch } puts of one version: exactly one wins",
    reason:
      "WebKit's File.lastModified has 1 s resolution, so an OPFS version (size and time) can repeat within a second",
  },
  {
    test: "with FFI granted, tensor buffers are backed by huge pages",
    reason:
      "the kernel's transparent huge pages are off (`never`); a container cannot switch them on, and madvise then has no effect",
  },
]);

/** The reason `test` may skip in CI, or undefined when it may not. */
export function ciException(test: string): string | undefined {
  return CI_EXCEPTIONS.find((e) => e.test === test)?.reason;
}
