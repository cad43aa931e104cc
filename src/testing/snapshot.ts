/**
 * `assertCheckpointSnapshot`: golden-checkpoint testing in the manner of Deno std's
 * `assertSnapshot`. The first run with `deno test -A -- --update` writes the checkpoint beside
 * the test file; later runs compare against it, with the same tolerances and messages as
 * `assertCheckpointEquals`.
 *
 * @module
 */
import { checkDiffOptions } from "../compare/_option_names.ts";
import { ASSERT_OPTION_NAMES, SNAPSHOT_OPTION_NAMES } from "./_option_names.ts";
import { loadCheckpoint } from "../io/load.ts";
import { saveCheckpoint } from "../io/save.ts";
import { assertCheckpointEquals, type AssertCheckpointOptions } from "./assert.ts";
import { AssertionError } from "./assertion_error.ts";
import type { CheckpointLike } from "./_open.ts";
import type { Checkpoint, CheckpointInput } from "../format/types.ts";
import type { Compression } from "../format/encode.ts";

/** Options for {@linkcode assertCheckpointSnapshot}. */
export interface SnapshotAssertOptions extends AssertCheckpointOptions {
  /**
   * The snapshot's name, unique within the test file.
   *
   * @default {the test's name (steps joined with " > "), then " 2", " 3"... for later calls in the same test}
   */
  name?: string;
  /**
   * Folder for golden files, relative to the test file.
   *
   * @default {"__snapshots__"}
   */
  dir?: string;
  /**
   * Write (or rewrite) the golden file instead of comparing.
   *
   * @default {true when the test was run with `-- --update` or `-- -u`}
   */
  update?: boolean;
  /**
   * Compression of golden files: `"gzip"`, `"bytegroup"` or `"none"`. Golden checkpoints are
   * small, where gzip packs tighter than the byte-grouped encoding (the train demo's: 16.8 KB
   * against 21.6 KB), and speed does not matter.
   *
   * @default {"gzip"}
   */
  compression?: Compression;
}

const calls = new WeakMap<Deno.TestContext, number>();

function testName(t: Deno.TestContext): string {
  const names: string[] = [];
  for (let c: Deno.TestContext | undefined = t; c; c = c.parent) names.unshift(c.name);
  return names.join(" > ");
}

/** A file name from a test name: path separators and control characters become `_`. */
function fileSafe(name: string): string {
  // deno-lint-ignore no-control-regex
  return name.replace(/[\u0000-\u001f\\/:*?"<>|]/g, "_").slice(0, 200);
}

function updating(): boolean {
  return Deno.args.includes("--update") || Deno.args.includes("-u");
}

/** Where `t`'s golden file for `name` lives: `<test dir>/__snapshots__/<test file>.<name>.ckpt`. */
function goldenPath(t: Deno.TestContext, name: string, dir: string): { path: string; test: string } {
  const test = new URL(t.origin);
  if (test.protocol !== "file:") {
    throw new TypeError(`Cannot use checkpoint snapshots: the test file ${test.href} is not a local file`);
  }
  const file = decodeURIComponent(test.pathname.slice(test.pathname.lastIndexOf("/") + 1));
  const url = new URL(`${dir.replace(/\/?$/, "/")}${encodeURIComponent(`${file}.${fileSafe(name)}.ckpt`)}`, test);
  return { path: decodeURIComponent(url.pathname), test: decodeURIComponent(test.pathname) };
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

async function materialise(x: CheckpointLike): Promise<Checkpoint | CheckpointInput> {
  if (typeof x === "object" && x !== null && "metadata" in x && "tensors" in x) return x as CheckpointInput;
  return await loadCheckpoint(x as Parameters<typeof loadCheckpoint>[0]);
}

/**
 * Compares `checkpoint` with the golden checkpoint stored for this test, or (with
 * `deno test -A <file> -- --update`) writes it. Golden files are binary ckpt files with
 * deterministic bytes at `__snapshots__/<test file>.<test name>.ckpt` beside the test file; an
 * update leaves a golden file untouched when the checkpoint still matches it. A missing golden
 * file fails with the command that creates it. Needs `--allow-read` (and `--allow-write` to
 * update).
 *
 * @example
 * ```ts ignore
 * import { assertCheckpointSnapshot } from "@ckpt/ckpt/testing";
 * Deno.test("ten steps from seed 7", async (t) => {
 *   const ckpt = await trainTenSteps({ seed: 7 });
 *   await assertCheckpointSnapshot(t, ckpt, { atol: 1e-6, ignoreMetadata: ["createdAt"] });
 * });
 * ```
 */
export async function assertCheckpointSnapshot(
  t: Deno.TestContext,
  checkpoint: CheckpointLike,
  options: SnapshotAssertOptions = {},
): Promise<void> {
  if (typeof t !== "object" || t === null || typeof t.origin !== "string") {
    throw new TypeError("Cannot use checkpoint snapshots: the first argument must be the test context (t)");
  }
  checkDiffOptions(options, "Cannot compare checkpoints", [...ASSERT_OPTION_NAMES, ...SNAPSHOT_OPTION_NAMES]);
  const { name: _name, dir: _dir, update: _update, compression: _compression, ...compare } = options;
  const n = (calls.get(t) ?? 0) + 1;
  calls.set(t, n);
  const name = options.name ?? (n === 1 ? testName(t) : `${testName(t)} ${n}`);
  const { path, test } = goldenPath(t, name, options.dir ?? "__snapshots__");
  const update = options.update ?? updating();
  const present = await exists(path);
  if (update) {
    const value = await materialise(checkpoint);
    if (present) {
      try {
        await assertCheckpointEquals(value, path, compare);
        return;
      } catch (e) {
        if (!(e instanceof AssertionError)) throw e;
      }
    }
    await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    await saveCheckpoint(path, value, { codec: "binary", compression: options.compression ?? "gzip" });
    return;
  }
  if (!present) {
    throw new AssertionError(
      `Missing golden checkpoint ${path} for ${
        JSON.stringify(name)
      }: run \`deno test -A ${test} -- --update\` to create it`,
    );
  }
  await assertCheckpointEquals(checkpoint, path, {
    ...compare,
    message: `${options.message ? options.message + ": " : ""}does not match golden checkpoint ${path}`,
  });
}
