/**
 * `FILE.sha256` sidecars in the format `sha256sum` prints and `sha256sum -c` checks, so a file
 * written by any codec can be verified by standard tools and by {@linkcode loadCheckpoint}.
 *
 * @module
 */
import { basename } from "node:path";
import { toPath, writeFileAtomic } from "../io/save.ts";

const HEX64 = /^[0-9a-f]{64}$/;

/** Options for {@linkcode writeSha256Sidecar}. */
export interface SidecarOptions {
  /**
   * Flush the sidecar and its directory to disk before resolving.
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

/**
 * Writes `PATH.sha256` beside `path` (atomically): one line `<sha256>  <file name>`, as
 * `sha256sum` prints it, so `cd DIR && sha256sum -c FILE.sha256` verifies the file. Returns the
 * sidecar's path. `sha256` is what `saveCheckpoint` returned (64 hex digits).
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
 */
export async function writeSha256Sidecar(
  path: string | URL,
  sha256: string,
  options: SidecarOptions = {},
): Promise<string> {
  if (typeof sha256 !== "string" || !HEX64.test(sha256.toLowerCase())) {
    throw new TypeError("Cannot write sha256 sidecar: sha256 must be 64 hex digits");
  }
  const file = toPath(path);
  const { prefix, name } = escapeName(basename(file));
  const sidecar = `${file}.sha256`;
  const line = new TextEncoder().encode(`${prefix}${sha256.toLowerCase()}  ${name}\n`);
  await writeFileAtomic(sidecar, async (f) => {
    let off = 0;
    while (off < line.byteLength) off += await f.write(line.subarray(off));
  }, { sync: options.sync ?? true });
  return sidecar;
}

/**
 * Reads `PATH.sha256` and returns the digest it gives for `path`'s file name, lowercase hex.
 * Throws a `SyntaxError` when the sidecar is not one `sha256sum` line for that file.
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
export async function readSha256Sidecar(path: string | URL): Promise<string> {
  const file = toPath(path);
  const sidecar = `${file}.sha256`;
  const text = await Deno.readTextFile(sidecar);
  const lines = text.split("\n").filter((l) => l.length > 0);
  const { prefix, name } = escapeName(basename(file));
  for (const line of lines) {
    const m = /^(\\?)([0-9a-fA-F]{64}) [ *](.*)$/.exec(line);
    if (m && m[1] === prefix && m[3] === name) return m[2]!.toLowerCase();
  }
  throw new SyntaxError(`Cannot read sha256 sidecar ${sidecar}: no "<sha256>  ${basename(file)}" line`);
}
