// Helpers for the Node tests (tests/node/harness.ts says how they run).
import { test } from "node:test";
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

/**
 * Starts `node script ...args`, calling `onLine(line, child)` for each line it prints (its
 * standard error goes to this process's).
 *
 * @param {string} script
 * @param {string[]} args
 * @param {(line: string, child: import("node:child_process").ChildProcess) => void} onLine
 */
export function nodeChild(script, args, onLine) {
  const child = spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  let buf = "";
  child.stdout.on("data", (c) => {
    buf += c;
    for (let i; (i = buf.indexOf("\n")) >= 0;) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      onLine(line, child);
    }
  });
  return child;
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
