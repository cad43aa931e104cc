/**
 * Loads `@tensorflow/tfjs-node` (or `-gpu`) for the demo, tests and benchmarks, with the
 * `node:util` shim installed first and a clear error where the binding was not built.
 *
 * The specifier is assembled at run time, so `deno check` and the module graph of a run that
 * never asks for the native backend do not resolve or download the package.
 *
 * @module
 */
import "./node_util_shim.ts";
import process from "node:process";
import type * as tfjs from "@tensorflow/tfjs-core";

/** The tfjs-node release `deno task setup:native` builds; tfjs-core here is the same version. */
export const TFJS_NODE_VERSION = "4.22.0";

/** What `loadTfjsNode` gives: TF.js (tfjs-core's API here) with the `tensorflow` backend registered. */
export type TfjsNode = typeof tfjs;

/** Thrown when the native backend cannot be loaded (not set up, or the binding does not load). */
export class NativeBackendUnavailableError extends Error {
  override name = "NativeBackendUnavailableError";
}

/**
 * Imports `npm:@tensorflow/tfjs-node@4.22.0` (or `tfjs-node-gpu`), which registers the
 * `tensorflow` backend and makes it the default. Needs `--allow-ffi`, `--allow-read` and
 * `--allow-env`.
 */
export async function loadTfjsNode(pkg: "tfjs-node" | "tfjs-node-gpu" = "tfjs-node"): Promise<TfjsNode> {
  const specifier = ["npm:@tensorflow/", pkg, "@", TFJS_NODE_VERSION].join("");
  // tfjs-node finds its binding with node-pre-gyp, which parses process.argv as its own flags:
  // a script's `--dir runs/x` reads as node-pre-gyp's `--directory` and sends it looking there.
  const argv = process.argv;
  process.argv = argv.slice(0, 2);
  try {
    return await import(specifier);
  } catch (e) {
    const reason = (e as Error)?.message?.split("\n")[0] ?? String(e);
    throw new NativeBackendUnavailableError(
      `Cannot load ${specifier}: ${reason} (build the native backend with \`deno task setup:native\`; see docs/tfjs.md)`,
      { cause: e },
    );
  } finally {
    process.argv = argv;
  }
}
