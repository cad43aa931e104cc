/**
 * The native backend for the tests: `@tensorflow/tfjs-node` loaded once, with the `node:util`
 * shim. Where `deno task setup:native` has not built the binding the native tests skip with one
 * line, except in CI (CI=true), where they run and fail with the reason.
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs";
import { loadTfjsNode, NativeBackendUnavailableError } from "../../src/tfjs/_tfjs_node.ts";

const IN_CI = Deno.env.get("CI") === "true";

let failure: Error | undefined;
try {
  await loadTfjsNode();
} catch (e) {
  if (!(e instanceof NativeBackendUnavailableError)) throw e;
  failure = e;
}
tf.env().set("PROD", true); // no "install tfjs-node" banner when a test switches to cpu

/** True when the native tests should be left out: no binding here, and not in CI. */
export const SKIP_NATIVE: boolean = failure !== undefined && !IN_CI;
if (failure) console.log(`native backend tests ${IN_CI ? "FAIL (CI=true)" : "skipped"}: ${failure.message}`);

/** Switches to the `tensorflow` backend, or throws why it is not there. */
export async function useNative(): Promise<void> {
  if (failure) throw failure;
  if (!(await tf.setBackend("tensorflow"))) throw new Error("the tensorflow backend did not initialise");
}

/** The TensorFlow version the binding runs on (`TF_Version()` of the library it loaded). */
export function nativeTensorFlowVersion(): string {
  return (tf.backend() as unknown as { binding: { TF_Version: string } }).binding.TF_Version;
}

/** Permissions a child Deno needs to load the native backend. */
export const NATIVE_PERMISSIONS = ["--allow-read", "--allow-write", "--allow-env", "--allow-ffi"];
