// TF.js artifacts named on the command line: finding a `model.json` behind a directory, an
// `s3://` prefix or an `https://` folder (through the store's head, not a local stat), reading
// them with errors that name the input, and checking where artifacts may be written.

import { basename, join } from "node:path";
import type { Checkpoint } from "../../mod.ts";
import { readTfjsArtifactsChecked, type ShardRead } from "../interop/tfjs_artifacts.ts";
import { resolveDirectory, resolveObject } from "../storage/resolve.ts";
import { ObjectNotFoundError } from "../storage/types.ts";
import { FileError, isRemote, osReason, readFailure, UsageError } from "./_io.ts";
import { readError } from "./_source.ts";
import { OsErrors } from "../runtime/errors.ts";
import { type FileInfo, files } from "../runtime/files.ts";

/** Whether a store has the object `key`; failures to ask are a {@linkcode FileError} naming `spec`. */
async function has(spec: string, ask: () => Promise<unknown>): Promise<boolean> {
  try {
    return (await ask()) !== undefined;
  } catch (e) {
    if (e instanceof ObjectNotFoundError) return false;
    if (e instanceof TypeError && /^Invalid (address|object key|directory)/.test(e.message)) return false;
    throw readFailure(spec, e);
  }
}

/**
 * The address of the `model.json` that `spec` names, when `spec` is TF.js artifacts: a
 * `model.json` itself, or a directory (a local one, an `s3://` prefix, an `https://` folder)
 * holding one. `undefined` when `spec` is anything else (a checkpoint, or nothing at all: the
 * checkpoint reader then says what is wrong).
 *
 * @example
 * ```ts
 * import { findTfjsArtifacts } from "./_tfjs.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/model.json`, "{}");
 * assert.equal(await findTfjsArtifacts(dir), `${dir}/model.json`);
 * assert.equal(await findTfjsArtifacts(`${dir}/a.ckpt`), undefined);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function findTfjsArtifacts(spec: string): Promise<string | undefined> {
  if (spec === "-") return undefined;
  if (!isRemote(spec)) {
    let info: FileInfo;
    try {
      info = await files.stat(spec);
    } catch {
      return undefined;
    }
    if (!info.isDirectory) return basename(spec) === "model.json" ? spec : undefined;
    const inside = join(spec, "model.json");
    try {
      return (await files.stat(inside)).isFile ? inside : undefined;
    } catch {
      return undefined;
    }
  }
  let url: URL;
  try {
    url = new URL(spec);
  } catch {
    return undefined; // the checkpoint reader names what is wrong with it
  }
  if (/(^|\/)model\.json$/.test(url.pathname)) return spec;
  const folder = url.pathname === "" || url.pathname.endsWith("/");
  if (!folder) {
    // An object at that address is a checkpoint, not a folder.
    const head = () => {
      const object = resolveObject(spec); // a malformed address: the checkpoint reader names what is wrong
      return object.store.head(object.key);
    };
    if (await has(spec, head)) return undefined;
  }
  const dir = new URL(url.href);
  if (!folder) dir.pathname = `${url.pathname}/`;
  const found = await has(spec, () => resolveDirectory(dir).head("model.json"));
  if (!found) return undefined;
  const model = new URL(dir.href);
  model.pathname = `${dir.pathname}model.json`;
  return model.href;
}

/** Reads TF.js artifacts for the CLI: failures are a `FileError` or a `BadCheckpointError` naming them. */
export async function readArtifacts(modelJson: string): Promise<Checkpoint> {
  return (await readArtifactsChecked(modelJson)).checkpoint;
}

/**
 * {@linkcode readArtifacts}, with the bytes of all shards and whether every shard was checked
 * against the `"ckpt"` record's digests (false for artifacts without one: structure only).
 */
export async function readArtifactsChecked(
  modelJson: string,
): Promise<{ checkpoint: Checkpoint; bytes: number; verified: boolean }> {
  let read: { checkpoint: Checkpoint; shards: ShardRead[] };
  try {
    read = await readTfjsArtifactsChecked(modelJson);
  } catch (e) {
    if (e instanceof ObjectNotFoundError) throw readFailure(modelJson, e);
    if (e instanceof TypeError) {
      throw new FileError(`Cannot read ${JSON.stringify(modelJson)}: ${e.message}`, { cause: e });
    }
    throw readError(modelJson, e);
  }
  const { checkpoint, shards } = read;
  return {
    checkpoint,
    bytes: shards.reduce((n, s) => n + s.bytes, 0),
    verified: shards.length > 0 && shards.every((s) => s.checked),
  };
}

/**
 * Checks that TF.js artifacts can be written to `dir`: a local directory (made if missing) or
 * `s3://`; `https://` is read-only, and a local file is not a directory.
 */
export async function checkTfjsTarget(dir: string): Promise<void> {
  if (isRemote(dir)) {
    if (!/^s3:/i.test(dir)) {
      throw new UsageError(
        `Cannot write ${JSON.stringify(dir)}: HTTP addresses are read-only; write to a path or s3://`,
      );
    }
    return;
  }
  try {
    const info = await files.stat(dir);
    if (!info.isDirectory) {
      throw new FileError(
        `Cannot write ${JSON.stringify(dir)}: it is not a directory (TF.js artifacts are model.json and shards in one)`,
      );
    }
  } catch (e) {
    if (e instanceof FileError) throw e;
    if (!(e instanceof OsErrors.NotFound)) {
      throw new FileError(`Cannot write ${JSON.stringify(dir)}: ${osReason(e)}`, { cause: e });
    }
  }
}
