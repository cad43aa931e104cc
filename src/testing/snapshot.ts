/**
 * `assertCheckpointSnapshot`: golden-checkpoint testing in the manner of Deno std's
 * `assertSnapshot`. The first run with `deno test -A -- --update` (in Node:
 * `CKPT_UPDATE_SNAPSHOTS=1 node --test`) writes the checkpoint beside the test file; later runs
 * compare against it, with the same tolerances and messages as `assertCheckpointEquals`.
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
import { OsErrors } from "../runtime/errors.ts";
import { files } from "../runtime/files.ts";
import { thisProcess } from "../runtime/process.ts";

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
   * @default {true when the test was run with `-- --update` or `-- -u`, or with `CKPT_UPDATE_SNAPSHOTS=1` in the environment}
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

/**
 * The test context a snapshot is taken in: Deno's `Deno.TestContext` or `node:test`'s
 * `TestContext` (the part of either that names the test and its file).
 */
export interface SnapshotTestContext {
  /** The test's (or step's) name. */
  readonly name: string;
  /** Deno: the test file's URL. */
  readonly origin?: string;
  /** Deno: the enclosing test of a step. */
  readonly parent?: SnapshotTestContext;
  /** Node: the test's name with its parents', joined with " > ". */
  readonly fullName?: string;
  /** Node 22.6 and later: the test file's path (earlier, the process's main module is the test file). */
  readonly filePath?: string;
}

const calls = new WeakMap<SnapshotTestContext, number>();

function testName(t: SnapshotTestContext): string {
  if (typeof t.fullName === "string") return t.fullName;
  const names: string[] = [];
  for (let c: SnapshotTestContext | undefined = t; c; c = c.parent) names.unshift(c.name);
  return names.join(" > ");
}

/** The test file's URL: Deno's `origin`, Node's `filePath`, else the main module (`node --test` runs each file as one). */
function testFile(t: SnapshotTestContext): string | undefined {
  if (typeof t.origin === "string") return t.origin;
  if (typeof t.filePath === "string") {
    return new URL(`file://${t.filePath.split("/").map(encodeURIComponent).join("/")}`).href;
  }
  return thisProcess.mainModule;
}

/** A file name from a test name: path separators and control characters become `_`. */
function fileSafe(name: string): string {
  // deno-lint-ignore no-control-regex
  return name.replace(/[\u0000-\u001f\\/:*?"<>|]/g, "_").slice(0, 200);
}

function updating(): boolean {
  return thisProcess.args.includes("--update") || thisProcess.args.includes("-u") ||
    thisProcess.env("CKPT_UPDATE_SNAPSHOTS") === "1";
}

/** Where `t`'s golden file for `name` lives: `<test dir>/__snapshots__/<test file>.<name>.ckpt`. */
function goldenPath(origin: string, name: string, dir: string): { path: string; test: string } {
  const test = new URL(origin);
  if (test.protocol !== "file:") {
    throw new TypeError(`Cannot use checkpoint snapshots: the test file ${test.href} is not a local file`);
  }
  const file = decodeURIComponent(test.pathname.slice(test.pathname.lastIndexOf("/") + 1));
  const url = new URL(`${dir.replace(/\/?$/, "/")}${encodeURIComponent(`${file}.${fileSafe(name)}.ckpt`)}`, test);
  return { path: decodeURIComponent(url.pathname), test: decodeURIComponent(test.pathname) };
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await files.stat(path)).isFile;
  } catch (e) {
    if (e instanceof OsErrors.NotFound) return false;
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
  t: SnapshotTestContext,
  checkpoint: CheckpointLike,
  options: SnapshotAssertOptions = {},
): Promise<void> {
  const origin = typeof t === "object" && t !== null && typeof t.name === "string" ? testFile(t) : undefined;
  if (origin === undefined) {
    throw new TypeError("Cannot use checkpoint snapshots: the first argument must be the test context (t)");
  }
  checkDiffOptions(options, "Cannot compare checkpoints", [...ASSERT_OPTION_NAMES, ...SNAPSHOT_OPTION_NAMES]);
  const { name: _name, dir: _dir, update: _update, compression: _compression, ...compare } = options;
  const n = (calls.get(t) ?? 0) + 1;
  calls.set(t, n);
  const name = options.name ?? (n === 1 ? testName(t) : `${testName(t)} ${n}`);
  const { path, test } = goldenPath(origin, name, options.dir ?? "__snapshots__");
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
    await files.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    await saveCheckpoint(path, value, { codec: "binary", compression: options.compression ?? "gzip" });
    return;
  }
  if (!present) {
    throw new AssertionError(
      `Missing golden checkpoint ${path} for ${JSON.stringify(name)}: run \`${
        typeof t.origin === "string"
          ? `deno test -A ${test} -- --update`
          : `CKPT_UPDATE_SNAPSHOTS=1 node --test ${test}`
      }\` to create it`,
    );
  }
  await assertCheckpointEquals(checkpoint, path, {
    ...compare,
    message: `${options.message ? options.message + ": " : ""}does not match golden checkpoint ${path}`,
  });
}
