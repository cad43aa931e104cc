// .ci/run's closing line (closing_line in .ci/summary.sh), from literal logs of `deno task test`:
// passed, failed and skipped carried over, a non-zero exit with nothing failed counted as one
// failure, and a log without the line (or with the old two-count line) as a failed run.
import assert from "node:assert/strict";

const SUMMARY = new URL("../.ci/summary.sh", import.meta.url).pathname;

/** Runs closing_line on `log` with exit code `rc`; its output lines and status. */
async function closingLine(log: string, rc: number): Promise<{ lines: string[]; status: number }> {
  const file = await Deno.makeTempFile();
  try {
    await Deno.writeTextFile(file, log);
    const out = await new Deno.Command("bash", {
      args: ["-c", `source "$1"; closing_line "$2" "$3"`, "bash", SUMMARY, file, String(rc)],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(new TextDecoder().decode(out.stderr), "");
    return { lines: new TextDecoder().decode(out.stdout).trimEnd().split("\n"), status: out.code };
  } finally {
    await Deno.remove(file);
  }
}

const LOG = `ok | 12 passed (3 steps) | 0 failed | 1 ignored (4s)

::: Node tests (tests/node, under Node with no Deno on PATH)
ℹ pass 3

not run in CI (tests/_ci_exceptions.ts): a test: why
15 passed, 0 failed, 1 skipped
`;

Deno.test("the closing line carries the test task's three counts and its exit code", async () => {
  assert.deepEqual(await closingLine(LOG, 0), { lines: ["15 passed, 0 failed, 1 skipped"], status: 0 });
  const failing = LOG.replace("15 passed, 0 failed, 1 skipped", "13 passed, 2 failed, 1 skipped");
  assert.deepEqual(await closingLine(failing, 1), { lines: ["13 passed, 2 failed, 1 skipped"], status: 1 });
});

Deno.test("a run that failed with nothing counted failed has one failure", async () => {
  assert.deepEqual(await closingLine(LOG, 1), { lines: ["15 passed, 1 failed, 1 skipped"], status: 1 });
});

Deno.test("a log without the three-count line is a failed run, the old two-count line too", async () => {
  for (const log of ["error: Module not found\n", "15 passed, 0 failed\n"]) {
    assert.deepEqual(await closingLine(log, 0), {
      lines: ["no test summary found (exit code 0)", "0 passed, 1 failed, 0 skipped"],
      status: 1,
    });
  }
});

Deno.test(".ci/run installs for the tests only Debian packages some test names (what needs it, and why)", async () => {
  const run = await Deno.readTextFile(new URL("../.ci/run", import.meta.url));
  const packages = /^APT_PACKAGES="([^"]+)"/m.exec(run)![1]!.split(" ");
  assert.ok(packages.length > 0);
  for (const p of packages) {
    const grep = await new Deno.Command("grep", {
      args: ["-rlw", "--include=*.ts", "--include=*.mjs", "--exclude=ci_summary_test.ts", "-e", p, "tests"],
      cwd: new URL("..", import.meta.url).pathname,
      stdout: "piped",
    }).output();
    assert.ok(grep.success, `no test names ${p}: drop it from APT_PACKAGES`);
  }
});
