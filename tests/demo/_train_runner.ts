/**
 * Runs `demo/train.ts` as a user does, in a subprocess, for the demo tests: reads its lines as
 * they come, sends a signal when asked, and picks out the final line and step numbers.
 *
 * @module
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { linesOf } from "../_util.ts";
import { UNLOCKED_ENV } from "../../demo/_unlocked.ts";

const SCRIPT = fileURLToPath(new URL("../../demo/train.ts", import.meta.url));
/** The permissions of `deno task train`. */
export const PERMISSIONS = [
  "--allow-read",
  "--allow-write",
  "--allow-env",
  "--allow-net=127.0.0.1",
  "--allow-ffi",
  "--allow-run",
];

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
export function runDemo(
  args: string[],
  stopWhen?: (line: string) => Deno.Signal | undefined,
  denoFlags: string[] = [],
): Promise<Run> {
  // A run started with --no-lock is the one that trains: it need not start one (demo/_unlocked.ts).
  const env: Record<string, string> = denoFlags.includes("--no-lock") ? { [UNLOCKED_ENV]: "1" } : {};
  return runCommand(Deno.execPath(), ["run", ...denoFlags, ...PERMISSIONS, SCRIPT, ...args], stopWhen, { env });
}

/** Where {@linkcode runCommand} runs, and whom it signals. */
export interface RunCommandOptions {
  /** The working directory. */
  cwd?: string;
  /** Variables to set in the child's environment, beside NO_COLOR. */
  env?: Record<string, string>;
  /** The pid to signal instead of the child's (such as `deno task` below `npx`). */
  target?: (child: Deno.ChildProcess) => number;
}

/**
 * Runs any command (the demo through `npx` or `deno task`) as {@linkcode runDemo} does; `ms` is
 * the time from the signal to the exit.
 */
export async function runCommand(
  command: string,
  args: string[],
  stopWhen?: (line: string) => Deno.Signal | undefined,
  options: RunCommandOptions = {},
): Promise<Run & { ms: number }> {
  const child = new Deno.Command(command, {
    args,
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    stdout: "piped",
    stderr: "piped",
    env: { ...options.env, NO_COLOR: "1" },
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const lines: string[] = [];
  let sentAt = 0;
  for await (const line of linesOf(child.stdout)) {
    lines.push(line);
    const signal = !sentAt && stopWhen?.(line);
    if (signal) {
      sentAt = performance.now();
      if (options.target) Deno.kill(options.target(child), signal);
      else child.kill(signal);
    }
  }
  const status = await child.status;
  const err = await stderr;
  if (err.trim()) lines.push(...err.trim().split("\n").map((l) => `stderr: ${l}`));
  return { code: status.code, signal: status.signal, lines, ms: performance.now() - sentAt };
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
