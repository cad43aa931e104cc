/**
 * `FILE.sha256` sidecars in the format `sha256sum` prints and `sha256sum -c` checks, so a file
 * written by any codec can be verified by standard tools and by {@linkcode loadCheckpoint}.
 *
 * @module
 */
import { checkInteropOptions } from "./_option_names.ts";
import { locate, type StorageOptions } from "../io/read.ts";
import { toPath, writeFileAtomic } from "../io/save.ts";
import type { StorageAddress, StoreObject } from "../storage/resolve.ts";
import { files } from "../runtime/files.ts";

const HEX64 = /^[0-9a-f]{64}$/;

/** The largest sidecar read from a store other than the local file system. */
export const MAX_SIDECAR_BYTES = 2 ** 20;

/** Options for {@linkcode writeSha256Sidecar} and {@linkcode readSha256Sidecar}. */
export interface SidecarOptions extends StorageOptions {
  /**
   * Flush the sidecar and its directory to disk before resolving (stores that are durable on
   * acknowledgement, S3, ignore it).
   *
   * @default {true}
   */
  sync?: boolean;
}

function escapeName(name: string): { prefix: string; name: string } {
  // GNU sha256sum escapes a name holding a backslash, newline or carriage return, and marks the
  // line with a leading backslash.
  if (!/[\\\n\r]/.test(name)) return { prefix: "", name };
  return {
    prefix: "\\",
    name: name.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll("\r", "\\r"),
  };
}

/** The object's file name: the last segment of its key. */
function fileName(object: StoreObject): string {
  return object.key.slice(object.key.lastIndexOf("/") + 1);
}

/**
 * The local path of an address on the file system as given (relative stays relative), or
 * `undefined` for other stores.
 */
function localPath(address: StorageAddress, object: StoreObject): string | undefined {
  const local = object.store.files;
  if (!local) return undefined;
  return typeof address === "string" || address instanceof URL ? toPath(address) : local.path(object.key);
}

/**
 * Writes `NAME.sha256` beside the object at `address` (atomically): one line
 * `<sha256>  <file name>`, as `sha256sum` prints it, so `cd DIR && sha256sum -c FILE.sha256`
 * verifies the file. `address` is a path, a `file:` URL, `s3://bucket/key` or `{ store, key }`
 * (any writable store); `https://` is read-only (a `TypeError`). Returns the sidecar's path, or
 * its URL on other stores. `sha256` is what `saveCheckpoint` returned (64 hex digits).
 *
 * @example
 * ```ts
 * import { readSha256Sidecar, writeSha256Sidecar } from "./sidecar.ts";
 * import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const path = `${dir}/model.ckpt`;
 * const { sha256 } = await saveCheckpoint(path, { metadata: { step: 1 }, tensors: [] }, { sha256sum: true });
 * const sidecar = await writeSha256Sidecar(path, sha256!);
 * assert.equal(await Deno.readTextFile(sidecar), `${sha256}  model.ckpt\n`);
 * await loadCheckpoint(path, { sha256: await readSha256Sidecar(path) });
 * await Deno.remove(dir, { recursive: true });
 * ```
 *
 * @example Beside an object in any store (memory here; `s3://bucket/run/model.ckpt` alike)
 * ```ts
 * import { readSha256Sidecar, writeSha256Sidecar } from "./sidecar.ts";
 * import { saveCheckpoint } from "../../mod.ts";
 * import { MemoryStore } from "../storage/memory.ts";
 * import assert from "node:assert/strict";
 * const object = { store: new MemoryStore({ name: "run" }), key: "model.ckpt" };
 * const { sha256 } = await saveCheckpoint(object, { metadata: { step: 1 }, tensors: [] }, { sha256sum: true });
 * assert.equal(await writeSha256Sidecar(object, sha256!), "memory://run/model.ckpt.sha256");
 * assert.equal(await readSha256Sidecar(object), sha256);
 * ```
 */
export async function writeSha256Sidecar(
  address: StorageAddress,
  sha256: string,
  options: SidecarOptions = {},
): Promise<string> {
  checkInteropOptions("sidecar", options, "Cannot write sha256 sidecar");
  if (typeof sha256 !== "string" || !HEX64.test(sha256.toLowerCase())) {
    throw new TypeError("Cannot write sha256 sidecar: sha256 must be 64 hex digits");
  }
  const object = locate(address, options, "write sha256 sidecar beside");
  const { prefix, name } = escapeName(fileName(object));
  const line = new TextEncoder().encode(`${prefix}${sha256.toLowerCase()}  ${name}\n`);
  const file = localPath(address, object);
  if (file === undefined) {
    await object.store.put(`${object.key}.sha256`, line);
    return `${object.store.url}${object.key}.sha256`;
  }
  const sidecar = `${file}.sha256`;
  await writeFileAtomic(sidecar, async (f) => {
    let off = 0;
    while (off < line.byteLength) off += await f.write(line.subarray(off));
  }, { sync: options.sync ?? true });
  return sidecar;
}

async function readText(object: StoreObject, where: string): Promise<string> {
  const got = await object.store.get(`${object.key}.sha256`);
  if (got.info.size > MAX_SIDECAR_BYTES) {
    await got.body.cancel();
    throw new RangeError(`Cannot read sha256 sidecar ${where}: ${got.info.size} bytes, over ${MAX_SIDECAR_BYTES}`);
  }
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const chunk of got.body) {
    n += chunk.byteLength;
    if (n > MAX_SIDECAR_BYTES) {
      throw new RangeError(`Cannot read sha256 sidecar ${where}: over ${MAX_SIDECAR_BYTES} bytes`);
    }
    parts.push(chunk);
  }
  const bytes = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.byteLength;
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new SyntaxError(`Cannot read sha256 sidecar ${where}: not UTF-8 text`);
  }
}

/**
 * Reads `NAME.sha256` beside the object at `address` (any address `loadCheckpoint` takes) and
 * returns the digest it gives for the object's file name, lowercase hex. Throws a `SyntaxError`
 * when the sidecar is not one `sha256sum` line for that file, `Deno.errors.NotFound` when a local
 * sidecar is missing and the store's `ObjectNotFoundError` when another store has none. A sidecar
 * read from a store other than the file system is capped at {@linkcode MAX_SIDECAR_BYTES} (a
 * `RangeError`).
 *
 * @example
 * ```ts
 * import { readSha256Sidecar } from "./sidecar.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/a.bin.sha256`, `${"ab".repeat(32)} *a.bin\n`);
 * assert.equal(await readSha256Sidecar(`${dir}/a.bin`), "ab".repeat(32));
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readSha256Sidecar(address: StorageAddress, options: StorageOptions = {}): Promise<string> {
  checkInteropOptions("sidecar", options, "Cannot read sha256 sidecar");
  const object = locate(address, options, "read sha256 sidecar beside");
  const file = localPath(address, object);
  const sidecar = file === undefined ? `${object.store.url}${object.key}.sha256` : `${file}.sha256`;
  const text = file === undefined ? await readText(object, sidecar) : await files.readTextFile(sidecar);
  const lines = text.split("\n").filter((l) => l.length > 0);
  const base = fileName(object);
  const { prefix, name } = escapeName(base);
  for (const line of lines) {
    const m = /^(\\?)([0-9a-fA-F]{64}) [ *](.*)$/.exec(line);
    if (m && m[1] === prefix && m[3] === name) return m[2]!.toLowerCase();
  }
  throw new SyntaxError(`Cannot read sha256 sidecar ${sidecar}: no "<sha256>  ${base}" line`);
}
