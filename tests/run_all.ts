/**
 * `deno task test`: the Deno suite (`deno task test:deno`), then the Node suite
 * (tests/node/harness.ts), ending with one line that counts both: `N passed, N failed, N skipped`.
 * Above it, the names of the skipped tests; in CI (`CI` set, tests/_ci.ts), a skipped test fails
 * the run unless tests/_ci_exceptions.ts names it, and the run prints the reasons of those it names.
 *
 * ```sh
 * deno task test                                   # everything
 * deno task test tests/io/save_test.ts             # Deno test files only
 * deno task test tests/node/io_test.mjs            # Node test files only
 * ```
 *
 * Arguments are Deno's (`deno test` flags and files), except `tests/node/*.mjs` files, which
 * pick Node tests; naming only one kind runs only that suite.
 *
 * @module
 */
import { runNodeTests } from "./node/harness.ts";
import { type CiException, ciException } from "./_ci_exceptions.ts";
import { IN_CI } from "./_ci.ts";

/** How a suite went: its counts, and the names of the tests it skipped. */
export interface SuiteCounts {
  passed: number;
  failed: number;
  /** Tests and steps that did not run: Deno's `ignored`; Node's `skipped` and `todo`. */
  skipped: number;
  /** The skipped tests' names (a step's: `test > step`). */
  skippedNames: string[];
}

// deno-lint-ignore no-control-regex -- colour codes, when the terminal has colour
const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, "");

/**
 * Deno's counts from its output: the closing line (`ok | 12 passed (30 steps) | 0 failed |
 * 2 ignored (1 step) (3s)`) and the names on its `... ignored` lines; undefined without a
 * closing line. Ignored steps count as skipped, as ignored tests do.
 */
export function denoCounts(output: string): SuiteCounts | undefined {
  const text = plain(output);
  const line = [...text.matchAll(/^(?:ok|FAILED) \| (\d+) passed.*?\| (\d+) failed(.*)$/gm)].at(-1);
  if (!line) return undefined;
  const ignored = /\| (\d+) ignored(?: \((\d+) steps?\))?/.exec(line[3]!);
  const skipped = ignored ? Number(ignored[1]) + Number(ignored[2] ?? 0) : 0;
  return { passed: Number(line[1]), failed: Number(line[2]), skipped, skippedNames: denoIgnoredNames(text) };
}

/** The names of the tests and steps Deno's pretty reporter marks `ignored` (steps: `test > step`). */
function denoIgnoredNames(text: string): string[] {
  const names: string[] = [];
  const open: string[] = []; // the test, then its steps, of the line being read
  let inOutput = false;
  for (const line of text.split("\n")) {
    // A test's own output, between these markers, could hold anything.
    if (/^-+ (?:pre-test |post-test )?output -+$/.test(line)) inOutput = true;
    else if (/^-+ (?:pre-test |post-test )?output end -+$/.test(line)) inOutput = false;
    if (inOutput) continue;
    const m = /^((?: {2})*)(\S.*?) \.\.\.(?: (ok|FAILED|ignored)\b.*)?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 2;
    open.length = depth;
    open.push(m[2]!);
    if (m[3] === "ignored") names.push(open.join(" > "));
  }
  return names;
}

/** How CI takes the skipped tests: those tests/_ci_exceptions.ts names, with reasons, and the others. */
export function ciSkips(skippedNames: readonly string[]): { excused: CiException[]; unexcused: string[] } {
  const excused: CiException[] = [];
  const unexcused: string[] = [];
  for (const name of skippedNames) {
    const reason = ciException(name);
    if (reason === undefined) unexcused.push(name);
    else excused.push({ test: name, reason });
  }
  return { excused, unexcused };
}

/**
 * Adds up the suites and says what did not run, in lines to print above the closing line. In CI
 * (`inCI`), a skipped test that tests/_ci_exceptions.ts does not name counts as failed.
 */
export function summarise(
  suites: readonly SuiteCounts[],
  inCI: boolean,
): { lines: string[]; closing: string; failed: number } {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  const names: string[] = [];
  for (const s of suites) {
    passed += s.passed;
    failed += s.failed;
    skipped += s.skipped;
    names.push(...s.skippedNames);
  }
  const lines: string[] = [];
  if (inCI) {
    const { excused, unexcused } = ciSkips(names);
    for (const e of excused) lines.push(`not run in CI (tests/_ci_exceptions.ts): ${e.test}: ${e.reason}`);
    for (const n of unexcused) lines.push(`FAILED: skipped in CI, and tests/_ci_exceptions.ts does not name it: ${n}`);
    failed += unexcused.length;
    skipped -= unexcused.length;
  } else {
    for (const n of names) lines.push(`skipped: ${n}`);
  }
  return { lines, closing: `${passed} passed, ${failed} failed, ${skipped} skipped`, failed };
}

/** Copies a child's stream to ours, keeping its text for the summary. */
async function tee(from: ReadableStream<Uint8Array>, to: WritableStream<Uint8Array>, keep: string[]): Promise<void> {
  const decoder = new TextDecoder();
  const writer = to.getWriter();
  try {
    for await (const chunk of from) {
      await writer.write(chunk);
      keep.push(decoder.decode(chunk, { stream: true }));
    }
  } finally {
    writer.releaseLock();
  }
}

/** Runs the Deno suite with `args`; returns its counts (one failure when it printed none). */
async function runDenoTests(args: readonly string[]): Promise<SuiteCounts & { success: boolean }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", "test:deno", ...args],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out: string[] = [];
  await Promise.all([tee(child.stdout, Deno.stdout.writable, out), tee(child.stderr, Deno.stderr.writable, [])]);
  const { success } = await child.status;
  const counts = denoCounts(out.join("")) ?? { passed: 0, failed: 1, skipped: 0, skippedNames: [] };
  return { ...counts, failed: counts.failed + (!success && counts.failed === 0 ? 1 : 0), success };
}

if (import.meta.main) {
  const isNode = (a: string) => /(^|\/)tests\/node\/[^/]+\.mjs$/.test(a);
  const nodeFiles = Deno.args.filter(isNode);
  const denoArgs = Deno.args.filter((a) => !isNode(a));
  const denoFiles = denoArgs.filter((a) => !a.startsWith("-"));
  const runDeno = nodeFiles.length === 0 || denoFiles.length > 0;
  const runNode = nodeFiles.length > 0 || denoFiles.length === 0;
  const suites: (SuiteCounts & { success: boolean })[] = [];
  if (runDeno) suites.push(await runDenoTests(denoArgs));
  if (runNode) {
    console.log("\n::: Node tests (tests/node, under Node with no Deno on PATH)");
    suites.push(
      await runNodeTests(nodeFiles).catch((e) => {
        console.error(`The Node suite could not run: ${e instanceof Error ? e.stack : e}`);
        return { passed: 0, failed: 1, skipped: 0, skippedNames: [], success: false };
      }),
    );
  }
  const { lines, closing, failed } = summarise(suites, IN_CI);
  if (lines.length > 0) console.log(`\n${lines.join("\n")}`);
  console.log(closing);
  Deno.exit(suites.every((s) => s.success) && failed === 0 ? 0 : 1);
}
