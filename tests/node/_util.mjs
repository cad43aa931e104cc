// Helpers for the Node tests (tests/node/harness.ts says how they run).
import { test } from "node:test";
import { Buffer } from "node:buffer";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { ciIsSet } from "./_ci.mjs";

/** This repository (fixtures written by Deno live here). */
export const REPO = process.env.CKPT_REPO ?? "";
/** The scratch npm project the package is installed in (`npx ckpt` works there). */
export const SCRATCH = process.env.CKPT_SCRATCH ?? process.cwd();
/** Whether this is CI (any truthy `CI`: `true`, `1`, `yes`), where a missing component fails the test instead of skipping it. */
export const IN_CI = ciIsSet(process.env.CI);

/**
 * A test that needs a component (a service, a program): skipped with `missing` as the reason
 * when that is set, except in CI (`CI` set), where it fails with that reason.
 *
 * @param {string} name
 * @param {string | undefined} missing why the component is unusable; undefined when it is there
 * @param {(t: import("node:test").TestContext) => Promise<void>} fn
 * @param {import("node:test").TestOptions} [options] such as a `timeout`
 */
export function componentTest(name, missing, fn, options = {}) {
  if (!missing) return test(name, options, fn);
  if (IN_CI) return test(name, options, () => Promise.reject(new Error(`${name}: ${missing}`)));
  return test(name, { ...options, skip: missing }, fn);
}

/** How long a test's child process may run unless the test says otherwise: 5 minutes. */
export const CHILD_DEADLINE_MS = 300_000;

/** A child process still running at its deadline: killed, and reported with what it printed. */
export class ChildDeadlineError extends Error {
  /**
   * @param {string} command the command line
   * @param {number} deadlineMs its deadline
   * @param {string} output the end of what it printed
   */
  constructor(command, deadlineMs, output) {
    super(`Child process hung: ${command} had not exited after ${deadlineMs} ms, killed it (SIGKILL)\n${output}`);
    this.name = "ChildDeadlineError";
    this.command = command;
    this.deadlineMs = deadlineMs;
  }
}

/**
 * @typedef {object} ChildResult
 * @property {number | null} code the exit code (null when a signal ended it)
 * @property {NodeJS.Signals | null} signal the signal that ended it
 * @property {Buffer} stdoutBytes its standard output
 * @property {string} stdout its standard output, as text
 * @property {string} stderr its standard error ("" when inherited)
 * @property {string} out standard output then standard error
 */

/**
 * Starts `file ...args` with a deadline, the one way tests/node starts a process: its own process
 * group (so that `npx`'s child goes with it), and one still running after `deadlineMs` is killed
 * with SIGKILL, group and all, and `done` rejects with a {@linkcode ChildDeadlineError} naming the
 * command and ending with what it printed. A hung child can then never hold the suite.
 *
 * @param {string} file
 * @param {string[]} args
 * @param {object} [options] `cwd`, `env`, `uid`, `gid` go to `spawn`
 * @param {number} [options.deadlineMs]
 * @param {Uint8Array | string} [options.input] written to its standard input (else it has none)
 * @param {"pipe" | "inherit"} [options.stderr] "inherit": its standard error goes to this process's
 * @param {(line: string, child: import("node:child_process").ChildProcess) => void} [options.onLine]
 *   called for each line it prints on standard output
 * @returns {{ child: import("node:child_process").ChildProcess, done: Promise<ChildResult> }}
 */
export function startChild(file, args, options = {}) {
  const { deadlineMs = CHILD_DEADLINE_MS, input, stderr = "pipe", onLine, ...spawnOptions } = options;
  const child = spawn(file, args, {
    ...spawnOptions,
    detached: true,
    stdio: [input === undefined ? "ignore" : "pipe", "pipe", stderr],
  });
  const out = [];
  const err = [];
  let line = "";
  child.stdout.on("data", (c) => {
    out.push(c);
    if (!onLine) return;
    line += c;
    for (let i; (i = line.indexOf("\n")) >= 0;) {
      const one = line.slice(0, i);
      line = line.slice(i + 1);
      onLine(one, child);
    }
  });
  child.stderr?.on("data", (c) => err.push(c));
  if (input !== undefined) {
    child.stdin.on("error", () => {}); // a command that does not read standard input
    child.stdin.end(input);
  }
  let hung = false;
  const timer = setTimeout(() => {
    hung = true;
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      child.kill("SIGKILL");
    }
  }, deadlineMs);
  const done = new Promise((resolve, reject) => {
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const stdoutBytes = Buffer.concat(out);
      const result = {
        code,
        signal,
        stdoutBytes,
        stdout: stdoutBytes.toString(),
        stderr: Buffer.concat(err).toString(),
      };
      result.out = result.stdout + result.stderr;
      if (!hung) return resolve(result);
      reject(new ChildDeadlineError([file, ...args].join(" "), deadlineMs, result.out.slice(-4000)));
    });
  });
  return { child, done };
}

/**
 * Runs `file ...args` to its end ({@linkcode startChild}'s options and deadline).
 *
 * @param {string} file
 * @param {string[]} args
 * @param {Parameters<typeof startChild>[2]} [options]
 * @returns {Promise<ChildResult>}
 */
export function runChild(file, args, options = {}) {
  return startChild(file, args, options).done;
}

/**
 * Starts `node script ...args` ({@linkcode startChild}, its standard error to this process's),
 * calling `onLine(line, child)` for each line it prints.
 *
 * @param {string} script
 * @param {string[]} args
 * @param {(line: string, child: import("node:child_process").ChildProcess) => void} onLine
 * @param {number} [deadlineMs]
 */
export function nodeChild(script, args, onLine, deadlineMs = CHILD_DEADLINE_MS) {
  return startChild(process.execPath, [script, ...args], { onLine, stderr: "inherit", deadlineMs });
}

/**
 * Runs `fn` with a fresh temporary directory, removed afterwards.
 *
 * @template T
 * @param {(dir: string) => Promise<T>} fn
 * @returns {Promise<T>}
 */
export async function withTempDir(fn) {
  const dir = await mkdtemp(join(tmpdir(), "ckpt-node-"));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
