/**
 * Lets `@tensorflow/tfjs-node` and `@tensorflow/tfjs-node-gpu` 4.x (the native `tensorflow`
 * backend) run under Deno: their kernels call `util.isNullOrUndefined` and `util.isArray` from
 * `node:util`, two functions Deno's `node:util` does not have (Node removed them in version 23,
 * so the same failure appears there). Without them the first op on that backend throws
 * `util.isNullOrUndefined is not a function`.
 *
 * Importing this module adds the two functions to `node:util` where they are missing (with
 * Node's old semantics: `value === null || value === undefined`, and `Array.isArray`), and
 * changes nothing where they exist. Import it before tfjs-node:
 *
 * ```ts ignore
 * import "@ckpt/ckpt/tfjs-node-shim";
 * import * as tf from "npm:@tensorflow/tfjs-node@4.22.0"; // deno run --allow-ffi --allow-read --allow-env
 * ```
 *
 * (Under Deno the package's binding has to be built first: `deno task setup:native`, see
 * docs/tfjs.md.)
 *
 * @example
 * ```ts
 * import "./node_util_shim.ts";
 * import util from "node:util";
 * import assert from "node:assert/strict";
 *
 * const legacy = util as unknown as { isNullOrUndefined(v: unknown): boolean; isArray(v: unknown): boolean };
 * assert.equal(legacy.isNullOrUndefined(undefined), true);
 * assert.equal(legacy.isNullOrUndefined(0), false);
 * assert.equal(legacy.isArray([1]), true);
 * ```
 *
 * @module
 */
import util from "node:util";

/** The `node:util` functions tfjs-node 4.x calls that newer runtimes dropped. */
interface LegacyUtil {
  isNullOrUndefined?: (value: unknown) => boolean;
  isArray?: (value: unknown) => boolean;
}

/**
 * Adds `util.isNullOrUndefined` and `util.isArray` to `node:util` where they are missing, and
 * returns the names it added (none where the runtime has them, as Node 20 and 22 do). Importing
 * this module calls it once; calling it again adds nothing.
 *
 * @returns The names added by this call.
 *
 * @example
 * ```ts
 * import { installNodeUtilShim } from "./node_util_shim.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(installNodeUtilShim(), []); // the import already added what was missing
 * ```
 */
export function installNodeUtilShim(): string[] {
  const legacy = util as unknown as LegacyUtil;
  const added: string[] = [];
  if (typeof legacy.isNullOrUndefined !== "function") {
    legacy.isNullOrUndefined = (value) => value === null || value === undefined;
    added.push("isNullOrUndefined");
  }
  if (typeof legacy.isArray !== "function") {
    legacy.isArray = Array.isArray;
    added.push("isArray");
  }
  return added;
}

installNodeUtilShim();
