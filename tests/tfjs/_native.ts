/**
 * The native backend for the tests: `@tensorflow/tfjs-node` with the `node:util` shim.
 *
 * The suites on backend `tensorflow` run in a child `deno test` with `--allow-ffi` (the binding
 * is a native addon; the test task does not grant FFI, which would also switch on FileStore's
 * FFI paths for every other test) and `--no-lock` (so loading `npm:@tensorflow/tfjs-node` leaves
 * the repository's lockfile alone). Where `deno task setup:native` has not built the binding
 * they skip with one line, except in CI (CI set), where they run and fail with the reason.
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs";
import { fileURLToPath } from "node:url";
import { loadTfjsNode } from "../../src/tfjs/_tfjs_node.ts";
import { IN_CI } from "../_ci.ts";

const PROBE = fileURLToPath(new URL("../../src/tfjs/_tfjs_node.ts", import.meta.url));

/**
 * Permissions a child Deno needs to load the native backend, no lockfile writes, and the tools'
 * import map (the cross-backend suite imports the wasm and webgpu backends, which deno.json leaves
 * out: docs/development.md, "Dependencies").
 */
export const NATIVE_DENO_FLAGS = [
  "--no-lock",
  `--import-map=${fileURLToPath(new URL("../../tools.imports.json", import.meta.url))}`,
  "--allow-read",
  "--allow-write",
  "--allow-env",
  "--allow-ffi",
];

/** Whether a child Deno can load tfjs-node here, and if not, why (its first lines of stderr). */
async function probe(): Promise<string | undefined> {
  const code = `import { loadTfjsNode } from ${JSON.stringify(PROBE)}; await loadTfjsNode();`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-lock", code],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  if (out.success) return undefined;
  const lines = new TextDecoder().decode(out.stderr).split("\n").filter((l) => !/^(I0000|WARNING|To enable)/.test(l));
  return lines.find((l) => /Cannot load|error/i.test(l))?.trim() ?? lines.slice(0, 3).join(" ");
}

const failure = await probe();
if (failure) console.log(`native backend tests ${IN_CI ? "run and FAIL (CI set)" : "skipped"}: ${failure}`);

/** True when the native tests should be left out: no binding here, and not in CI. */
export const SKIP_NATIVE: boolean = failure !== undefined && !IN_CI;

let loaded: Promise<unknown> | undefined;
/** In a suite's own process: loads tfjs-node once and switches to the `tensorflow` backend. */
export async function useNative(): Promise<void> {
  await (loaded ??= loadTfjsNode());
  tf.env().set("PROD", true); // no "install tfjs-node" banner when a test switches to cpu
  if (!(await tf.setBackend("tensorflow"))) throw new Error("the tensorflow backend did not initialise");
}

/** The TensorFlow version the binding runs on (`TF_Version()` of the library it loaded). */
export function nativeTensorFlowVersion(): string {
  return (tf.backend() as unknown as { binding: { TF_Version: string } }).binding.TF_Version;
}

/**
 * Runs suites of Deno tests in a child with {@linkcode NATIVE_DENO_FLAGS} and reports each of
 * its tests as a step of `t`, failing with the child's account of a failure.
 */
export async function runNativeSuites(t: Deno.TestContext, suites: string[]): Promise<void> {
  const files = suites.map((s) => fileURLToPath(new URL(s, import.meta.url)));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["test", ...NATIVE_DENO_FLAGS, "--allow-run", "--allow-sys", "--reporter=tap", ...files],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  const lines = text.split("\n");
  let ran = 0;
  for (let i = 0; i < lines.length; i++) {
    const m = /^(not )?ok \d+ - (.*?)( # SKIP.*)?$/.exec(lines[i]!);
    if (!m) continue;
    ran++;
    const details: string[] = [];
    for (let j = i + 1; j < lines.length && !/^(not )?ok \d+ - /.test(lines[j]!); j++) details.push(lines[j]!);
    await t.step({
      name: m[2]!,
      ignore: m[3] !== undefined,
      fn() {
        if (m[1]) throw new Error(`failed in the child:\n${details.join("\n")}`);
      },
    });
  }
  if (!out.success || ran === 0) {
    const err = new TextDecoder().decode(out.stderr).split("\n").filter((l) => !/^(I0000|WARNING|To enable)/.test(l));
    throw new Error(`the native suites failed (exit ${out.code}, ${ran} tests reported):\n${text}\n${err.join("\n")}`);
  }
}
