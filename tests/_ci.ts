/**
 * CI for the Deno tests: whether this run is CI ({@linkcode IN_CI}: any truthy `CI`, as
 * tests/node/_ci.mjs reads it for both suites), and {@linkcode componentTest} for a test that
 * needs a component (a program, a device, a privilege): it skips where the component is missing,
 * except in CI, where it fails with the reason unless tests/_ci_exceptions.ts names it.
 *
 * @module
 */
import { ciIsSet } from "./node/_ci.mjs";
import { ciException } from "./_ci_exceptions.ts";

export { ciIsSet };

/** Whether this run is CI (`CI` set to `true`, `1`, `yes`, ...): a missing component then fails. */
export const IN_CI: boolean = ciIsSet(Deno.env.get("CI"));

/**
 * Registers `test`, which needs a component; `missing` says why it is unusable here (undefined when
 * it is there). Without it the test skips with a line, or, in CI, fails with that line, unless
 * tests/_ci_exceptions.ts names the test (then it skips and the run prints the reason).
 */
export function componentTest(test: Deno.TestDefinition, missing: string | undefined): void {
  if (missing === undefined) return Deno.test(test);
  const excused = ciException(test.name);
  if (!IN_CI || excused !== undefined) {
    console.log(`skipped: ${test.name}: ${missing}`);
    return Deno.test({ ...test, ignore: true });
  }
  Deno.test({
    ...test,
    fn() {
      throw new Error(`${test.name}: ${missing} (CI is set, so this fails rather than skips: tests/_ci_exceptions.ts)`);
    },
  });
}
