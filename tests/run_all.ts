/**
 * `deno task test`: the Deno suite (`deno task test:deno`), then the Node suite
 * (tests/node/harness.ts), ending with one line that counts both: `N passed, N failed`.
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

/** Deno's closing line: `ok | 12 passed (30 steps) | 0 failed (3s)`; undefined without one. */
export function denoCounts(output: string): { passed: number; failed: number } | undefined {
  // deno-lint-ignore no-control-regex -- colour codes, when the terminal has colour
  const plain = output.replace(/\x1b\[[0-9;]*m/g, "");
  const line = [...plain.matchAll(/^(?:ok|FAILED) \| (\d+) passed.*?\| (\d+) failed/gm)].at(-1);
  return line ? { passed: Number(line[1]), failed: Number(line[2]) } : undefined;
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
async function runDenoTests(args: readonly string[]): Promise<{ passed: number; failed: number; success: boolean }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", "test:deno", ...args],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out: string[] = [];
  await Promise.all([tee(child.stdout, Deno.stdout.writable, out), tee(child.stderr, Deno.stderr.writable, [])]);
  const { success } = await child.status;
  const counts = denoCounts(out.join("")) ?? { passed: 0, failed: 1 };
  return { ...counts, failed: counts.failed + (!success && counts.failed === 0 ? 1 : 0), success };
}

if (import.meta.main) {
  const isNode = (a: string) => /(^|\/)tests\/node\/[^/]+\.mjs$/.test(a);
  const nodeFiles = Deno.args.filter(isNode);
  const denoArgs = Deno.args.filter((a) => !isNode(a));
  const denoFiles = denoArgs.filter((a) => !a.startsWith("-"));
  const runDeno = nodeFiles.length === 0 || denoFiles.length > 0;
  const runNode = nodeFiles.length > 0 || denoFiles.length === 0;
  let passed = 0;
  let failed = 0;
  let success = true;
  if (runDeno) {
    const r = await runDenoTests(denoArgs);
    passed += r.passed;
    failed += r.failed;
    success &&= r.success;
  }
  if (runNode) {
    console.log("\n::: Node tests (tests/node, under Node with no Deno on PATH)");
    const r = await runNodeTests(nodeFiles).catch((e) => {
      console.error(`The Node suite could not run: ${e instanceof Error ? e.stack : e}`);
      return { passed: 0, failed: 1, success: false };
    });
    passed += r.passed;
    failed += r.failed;
    success &&= r.success;
  }
  console.log(`${passed} passed, ${failed} failed`);
  Deno.exit(success && failed === 0 ? 0 : 1);
}
