// Runs the real ckpt program in a subprocess, as a user's shell would, with the permissions of
// `deno task ckpt`, and builds the checkpoints the CLI tests read.

import assert from "node:assert/strict";
import { saveCheckpoint, type TensorInput } from "../../mod.ts";

export const MAIN = new URL("../../src/cli/main.ts", import.meta.url).pathname;

/** The command line `deno task ckpt` runs, without the arguments. */
export const CKPT = [
  Deno.execPath(),
  "run",
  "--quiet",
  "--allow-read",
  "--allow-write",
  "--allow-env",
  MAIN,
];

/** What a finished run printed. */
export interface Ran {
  code: number;
  stdout: Uint8Array;
  out: string;
  err: string;
}

const text = new TextDecoder();

/**
 * Runs `ckpt args...` in `cwd`, feeding `stdin` (bytes, or nothing), with `env` added to the
 * environment and, with `net`, network access to 127.0.0.1.
 */
export async function ckpt(
  args: string[],
  options: { stdin?: Uint8Array; cwd?: string; env?: Record<string, string>; net?: boolean } = {},
): Promise<Ran> {
  // Network access (for s3:// and http:// addresses) to 127.0.0.1 only, and only when asked.
  const flags = options.net ? ["run", "--allow-net=127.0.0.1", ...CKPT.slice(2)] : CKPT.slice(1);
  const child = new Deno.Command(CKPT[0]!, {
    args: [...flags, ...args],
    cwd: options.cwd,
    stdin: options.stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", ...options.env },
  }).spawn();
  if (options.stdin) {
    const w = child.stdin.getWriter();
    await w.write(options.stdin).catch(() => {});
    await w.close().catch(() => {});
  }
  const { code, stdout, stderr } = await child.output();
  return { code, stdout, out: text.decode(stdout), err: text.decode(stderr) };
}

/** Runs `ckpt a...` piped into `ckpt b...`, as `ckpt a | ckpt b` in a shell. */
export async function pipeline(
  a: string[],
  b: string[],
  options: { stdin?: Uint8Array; cwd?: string } = {},
): Promise<{ first: Ran; second: Ran }> {
  const spawn = (args: string[], stdin: "piped" | "null") =>
    new Deno.Command(CKPT[0]!, {
      args: [...CKPT.slice(1), ...args],
      cwd: options.cwd,
      stdin,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
  const p1 = spawn(a, options.stdin ? "piped" : "null");
  const p2 = spawn(b, "piped");
  if (options.stdin) {
    const w = p1.stdin.getWriter();
    w.write(options.stdin).then(() => w.close()).catch(() => {});
  }
  const err1 = new Response(p1.stderr).text();
  const piped = p1.stdout.pipeTo(p2.stdin).catch(() => {});
  const [s1, o2] = await Promise.all([p1.status, p2.output(), piped]);
  return {
    first: { code: s1.code, stdout: new Uint8Array(), out: "", err: await err1 },
    second: { code: o2.code, stdout: o2.stdout, out: text.decode(o2.stdout), err: text.decode(o2.stderr) },
  };
}

/** Asserts a failed run: the exit code, nothing on stdout, and exactly one line on stderr without a stack trace. */
export function assertOneLineError(r: Ran, code: number, pattern: RegExp): void {
  assert.equal(r.code, code, `exit code ${r.code}, stderr: ${r.err}`);
  assert.equal(r.out, "", "stdout must stay empty on an error");
  assert.match(r.err, /^ckpt[^\n]*\n$/, `stderr must be one line: ${JSON.stringify(r.err)}`);
  assert.doesNotMatch(r.err, /\n\s+at |\.ts:\d+:\d+/, "no stack trace without --debug");
  assert.match(r.err, pattern);
}

/** The tensors of the sample checkpoint: three groups, four dtypes, NaN, a scalar. */
export function sampleTensors(): TensorInput[] {
  return [
    { name: "dense/kernel", dtype: "float32", shape: [2, 3], data: new Float32Array([1, 2, 3, 4, NaN, -6]) },
    { name: "dense/bias", dtype: "float16", shape: [3], data: new Uint16Array([0x3c00, 0x4000, 0xbc00]) },
    { name: "bn/mean", dtype: "float64", shape: [2], data: new Float64Array([0.5, -0.25]), group: "buffers" },
    { name: "optimizer/iter", dtype: "int64", shape: [], data: new BigInt64Array([100n]), group: "optimizer" },
  ];
}

/** Writes the sample checkpoint to `path`. */
export async function writeSample(
  path: string,
  options: { codec?: "binary" | "json"; compression?: "none" | "gzip" } = {},
): Promise<{ bytes: number; sha256: string; digest: string }> {
  const { bytes, sha256, digest } = await saveCheckpoint(path, {
    metadata: { step: 100, epoch: 2, metrics: { loss: 0.5, acc: NaN }, custom: { lr: 0.001 } },
    tensors: sampleTensors(),
  }, { ...options, sha256sum: true });
  return { bytes, sha256: sha256!, digest };
}

/** A temporary directory removed by the returned function. */
export async function tempDir(): Promise<{ dir: string; [Symbol.asyncDispose](): Promise<void> }> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-cli-" });
  return { dir, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

/** The offset of `needle` (UTF-8) in `bytes`. */
export function indexOfText(bytes: Uint8Array, needle: string): number {
  const n = new TextEncoder().encode(needle);
  outer: for (let i = 0; i + n.length <= bytes.length; i++) {
    for (let j = 0; j < n.length; j++) if (bytes[i + j] !== n[j]) continue outer;
    return i;
  }
  return -1;
}
