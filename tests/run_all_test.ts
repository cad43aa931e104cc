// The test task's closing line (tests/run_all.ts): what it counts from each runner's literal
// output, and what CI makes of a skipped test (tests/_ci.ts, tests/_ci_exceptions.ts).
import assert from "node:assert/strict";
import { ciSkips, denoCounts, summarise } from "./run_all.ts";
import { tapCounts } from "./node/harness.ts";
import { ciIsSet } from "./_ci.ts";
import { CI_EXCEPTIONS } from "./_ci_exceptions.ts";

/** What `deno test` 2.9 prints for a file with a passing, an ignored, a failing test and steps. */
const DENO_OUTPUT = `Check file:///tmp/a_test.ts
running 5 tests from ./a_test.ts
p ...
------- output -------
q ... ignored (0ms)
----- output end -----
p ... ok (558µs)
ig ... ignored (0ms)
steps ...
  s1 ... ok (0ms)
  s2 ... ignored (0ms)
  s3 ...
    deep ... ignored (0ms)
  s3 ... ok (0ms)
steps ... ok (785µs)
f ... FAILED (548µs)
a test ... with dots ... ignored (0ms)

 ERRORS 

f => ./a_test.ts:4:6
error: Error: x

 FAILURES 

f => ./a_test.ts:4:6

FAILED | 2 passed (2 steps) | 1 failed | 2 ignored (2 steps) (8ms)

error: Test failed
`;

/** What Node 20's TAP reporter writes for skipped, todo, failed, timed-out and nested tests. */
const NODE_TAP = `TAP version 13
# Subtest: p
ok 1 - p
  ---
  duration_ms: 0.5
  ...
# Subtest: sk
ok 2 - sk # SKIP because
  ---
  duration_ms: 0.1
  ...
# Subtest: td
ok 3 - td # TODO later
  ---
  duration_ms: 0.2
  ...
# Subtest: parent
    # Subtest: c1
    ok 1 - c1
      ---
      duration_ms: 0.28
      ...
    # Subtest: c2 \\# two
    ok 2 - c2 \\# two # SKIP
      ---
      duration_ms: 0.12
      ...
    1..2
ok 4 - parent
  ---
  duration_ms: 5.0
  ...
# Subtest: f
not ok 5 - f
  ---
  duration_ms: 0.33
  failureType: 'testCodeFailure'
  error: 'x'
  ...
# Subtest: to
    # Subtest: never
    not ok 1 - never
      ---
      failureType: 'cancelledByParent'
      ...
    1..1
not ok 6 - to
  ---
  failureType: 'testTimeoutFailure'
  error: 'test timed out after 50ms'
  ...
1..6
# tests 9
# suites 0
# pass 3
# fail 1
# cancelled 2
# skipped 2
# todo 1
# duration_ms 1165.08
`;

Deno.test("Deno's ignored tests and steps count as skipped, by name, output between markers aside", () => {
  assert.deepEqual(denoCounts(DENO_OUTPUT), {
    passed: 2,
    failed: 1,
    skipped: 4,
    skippedNames: ["ig", "steps > s2", "steps > s3 > deep", "a test ... with dots"],
  });
  // Colour, and a run with nothing ignored.
  assert.deepEqual(denoCounts("\x1b[0m\x1b[32mok\x1b[0m | 3 passed | 0 failed \x1b[0m\x1b[38;5;245m(1s)\x1b[0m\n"), {
    passed: 3,
    failed: 0,
    skipped: 0,
    skippedNames: [],
  });
  assert.equal(denoCounts("error: Module not found\n"), undefined);
});

Deno.test("Node's skipped and todo tests count as skipped, by name; cancelled ones (timeouts) as failed", () => {
  assert.deepEqual(tapCounts(NODE_TAP), {
    passed: 3,
    failed: 3,
    skipped: 3,
    skippedNames: ["sk", "td", "parent > c2 # two"],
  });
  // Node 20 leaves out no line, but a summary without the optional ones still counts.
  assert.deepEqual(tapCounts("# pass 4\n# fail 0\n"), { passed: 4, failed: 0, skipped: 0, skippedNames: [] });
  assert.equal(tapCounts(""), undefined);
});

Deno.test("the closing line counts both suites' skips; in CI only tests/_ci_exceptions.ts's may skip", () => {
  const excused = CI_EXCEPTIONS[0]!;
  const deno = { passed: 5, failed: 0, skipped: 2, skippedNames: [excused.test, "a missing program"] };
  const node = { passed: 3, failed: 1, skipped: 1, skippedNames: ["todo: later"] };
  const local = summarise([deno, node], false);
  assert.equal(local.closing, "8 passed, 1 failed, 3 skipped");
  assert.deepEqual(local.lines, [`skipped: ${excused.test}`, "skipped: a missing program", "skipped: todo: later"]);
  const ci = summarise([deno, node], true);
  assert.equal(ci.closing, "8 passed, 3 failed, 1 skipped");
  assert.equal(ci.failed, 3);
  assert.deepEqual(ci.lines, [
    `not run in CI (tests/_ci_exceptions.ts): ${excused.test}: ${excused.reason}`,
    "FAILED: skipped in CI, and tests/_ci_exceptions.ts does not name it: a missing program",
    "FAILED: skipped in CI, and tests/_ci_exceptions.ts does not name it: todo: later",
  ]);
  assert.deepEqual(ciSkips([]), { excused: [], unexcused: [] });
});

Deno.test("every exception names a test and gives a reason, once", () => {
  assert.ok(CI_EXCEPTIONS.length > 0 && CI_EXCEPTIONS.length <= 10, "a short list");
  for (const e of CI_EXCEPTIONS) assert.ok(e.test.trim() && e.reason.trim().length > 20, JSON.stringify(e));
  assert.equal(new Set(CI_EXCEPTIONS.map((e) => e.test)).size, CI_EXCEPTIONS.length);
});

Deno.test("any truthy CI is CI: true, 1, yes; not 0, false, no, off or empty", () => {
  for (const v of ["true", "1", "yes", "TRUE", "on", "woodpecker"]) assert.equal(ciIsSet(v), true, v);
  for (const v of [undefined, "", " ", "0", "false", "False", "no", "off"]) assert.equal(ciIsSet(v), false, String(v));
});

/** Runs `deno task test tests/_ci_child.ts` with `env` added; returns its exit code and last lines. */
async function runAll(env: Record<string, string>): Promise<{ code: number; tail: string[] }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", "test", "tests/_ci_child.ts"],
    cwd: new URL("..", import.meta.url).pathname,
    env: { NO_COLOR: "1", CI: "", CKPT_CI_CHILD_MISSING: "", CKPT_CI_CHILD_IGNORE: "", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const lines = new TextDecoder().decode(out.stdout).trimEnd().split("\n");
  return { code: out.code, tail: lines.slice(-3) };
}

Deno.test("deno task test: a missing component skips outside CI and fails in any truthy CI, and says so last", async () => {
  const missing = { CKPT_CI_CHILD_MISSING: "no such program here" };
  const local = await runAll(missing);
  assert.deepEqual(local, {
    code: 0,
    tail: ["", "skipped: ci child: needs a component", "2 passed, 0 failed, 1 skipped"],
  });
  for (const CI of ["1", "yes"]) {
    const ci = await runAll({ ...missing, CI });
    assert.equal(ci.code, 1, `CI=${CI}`);
    assert.equal(ci.tail.at(-1), "2 passed, 1 failed, 0 skipped", `CI=${CI}`);
  }
  // A test that skips on its own account, not through componentTest, fails a CI run too.
  const ignored = await runAll({ CI: "true", CKPT_CI_CHILD_IGNORE: "1" });
  assert.deepEqual(ignored, {
    code: 1,
    tail: [
      "",
      "FAILED: skipped in CI, and tests/_ci_exceptions.ts does not name it: ci child: ignored by its own flag",
      "2 passed, 1 failed, 0 skipped",
    ],
  });
  const notCI = await runAll({ CI: "false" });
  assert.deepEqual([notCI.code, notCI.tail.at(-1)], [0, "3 passed, 0 failed, 0 skipped"]);
});
