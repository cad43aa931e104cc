/**
 * Runs `demo/train.ts` as a user does, in a subprocess, for the demo tests: reads its lines as
 * they come, sends a signal when asked, and picks out the final line and step numbers.
 *
 * @module
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const SCRIPT = fileURLToPath(new URL("../../demo/train.ts", import.meta.url));
/** The permissions of `deno task train`. */
export const PERMISSIONS = ["--allow-read", "--allow-write", "--allow-env", "--allow-net=127.0.0.1", "--allow-ffi"];

/** How a run of the demo ended, and what it printed (stderr lines prefixed with `stderr: `). */
export interface Run {
  code: number;
  signal: Deno.Signal | null;
  lines: string[];
}

/**
 * Runs the demo; `stopWhen` sees each stdout line as it comes and may return a signal to send,
 * once. Resolves when the process has exited.
 */
export async function runDemo(
  args: string[],
  stopWhen?: (line: string) => Deno.Signal | undefined,
  denoFlags: string[] = [],
): Promise<Run> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...denoFlags, ...PERMISSIONS, SCRIPT, ...args],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const lines: string[] = [];
  let sent = false;
  let pending = "";
  for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
    pending += chunk;
    const parts = pending.split("\n");
    pending = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      const signal = !sent && stopWhen?.(line);
      if (signal) {
        sent = true;
        child.kill(signal);
      }
    }
  }
  if (pending) lines.push(pending);
  const status = await child.status;
  const err = await stderr;
  if (err.trim()) lines.push(...err.trim().split("\n").map((l) => `stderr: ${l}`));
  return { code: status.code, signal: status.signal, lines };
}

/** The run's final line (loss, accuracy, weights SHA-256), checked for its form. */
export function finalLine(run: Run): string {
  const line = run.lines.find((l) => l.startsWith("final loss "));
  assert.ok(line, `a final line in:\n${run.lines.join("\n")}`);
  assert.match(line, /^final loss \d+\.\d{6} {2}accuracy \d\.\d{4} {2}weights sha256 [0-9a-f]{64}$/);
  return line;
}

/** The number `pattern` captures in `line`, if it matches. */
export function stepOf(line: string, pattern: RegExp): number | undefined {
  const m = pattern.exec(line);
  return m ? Number(m[1]) : undefined;
}

/**
 * A `stopWhen` that sends SIGKILL mid-training once this run has committed a checkpoint of at
 * least `minCommitted` and trained `after` steps past it, so a resume always has one to go on
 * (commits come from the worker, and may lag behind the steps on a busy machine).
 */
export function killAfterCommit(minCommitted: () => number | undefined, after: number) {
  let committed = -1;
  return (line: string): Deno.Signal | undefined => {
    committed = Math.max(committed, stepOf(line, /^ {2}checkpoint step (\d+) committed/) ?? -1);
    const step = stepOf(line, /^step +(\d+)\//);
    const min = minCommitted();
    return step !== undefined && min !== undefined && committed >= min && step >= committed + after
      ? "SIGKILL"
      : undefined;
  };
}
