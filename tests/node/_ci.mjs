// Whether a run is CI, for both suites: the Deno tests import this file through tests/_ci.ts, the
// Node tests through ./_util.mjs (tests/node/harness.ts copies every .mjs file of this directory
// into the scratch project, so it lives here).

/**
 * Whether a `CI` value says "this is CI". CI runners set it to `true`, `1` or `yes`; anything
 * but empty, `0`, `false`, `no` or `off` (in any case, around spaces) counts.
 *
 * @param {string | undefined} value the `CI` environment variable
 * @returns {boolean}
 */
export function ciIsSet(value) {
  if (value === undefined) return false;
  return !["", "0", "false", "no", "off"].includes(value.trim().toLowerCase());
}
