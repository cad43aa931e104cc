// Where TF.js artifacts are read from and written to: a local directory (regular files only,
// symbolic links checked, shards published by rename) or any other store (`s3://`, `https://`,
// memory, OPFS), where the shards are objects beside `model.json` and each object is published
// whole by the store. tfjs_artifacts.ts decides what goes in the files; this module only moves
// their bytes.

import { dirname, join, sep as SEP } from "node:path";
import { locate, type StorageOptions } from "../io/read.ts";
import { writeFileAtomic } from "../io/save.ts";
import {
  describeAddress,
  type DirectoryAddress,
  resolveDirectory,
  type StorageAddress,
  type StoreObject,
} from "../storage/resolve.ts";
import { requireFiles } from "../runtime/files.ts";
import type { LocalFiles, ObjectStore } from "../storage/types.ts";
import { OsErrors } from "../runtime/errors.ts";
import { type FileHandle, type FileInfo, files } from "../runtime/files.ts";
import { thisProcess } from "../runtime/process.ts";

/** The largest piece a shard is read in. */
const SHARD_READ_BYTES = 4 * 2 ** 20;

/** Where a set of TF.js artifacts is read from. */
export interface ArtifactsSource {
  /** How messages name `model.json`: the path or URL as given, or the object's URL. */
  readonly label: string;
  /** `model.json` as an object. */
  readonly object: StoreObject;
  /** The bytes of `model.json`; a `RangeError` when it holds more than `maxBytes`. */
  modelJson(maxBytes: number): Promise<Uint8Array>;
  /**
   * The bytes of the shard `path` (a plain relative path, already checked), in chunks of at most
   * 4 MiB; returning early closes the shard.
   */
  shard(path: string): AsyncGenerator<Uint8Array>;
}

function tooLarge(size: number, max: number): RangeError {
  return new RangeError(`Cannot decode TF.js artifacts: model.json of ${size} bytes exceeds maxHeaderBytes ${max}`);
}

/**
 * Refuses anything but a regular file (a FIFO would block the reader forever). For a name taken
 * from `model.json` (`fromManifest`), a name the file system refuses (too long, say) is reported
 * as a bad name; a missing file stays `Deno.errors.NotFound`.
 */
async function regularFile(path: string, what: string, fromManifest = false): Promise<FileInfo> {
  let info: FileInfo;
  try {
    info = await files.stat(path);
  } catch (e) {
    if (!fromManifest || e instanceof OsErrors.NotFound) throw e;
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${what} cannot be read (${(e as Error).message})`, {
      cause: e,
    });
  }
  if (!info.isFile) throw new SyntaxError(`Cannot decode TF.js artifacts: ${what} is not a regular file`);
  return info;
}

/** Artifacts in a local directory: regular files only, shards kept inside it unless allowed. */
function fileSource(object: StoreObject, local: LocalFiles, label: string, allowOutside: boolean): ArtifactsSource {
  const path = local.path(object.key);
  const root = dirname(path);
  let realRoot: Promise<string> | undefined;
  return {
    label,
    object,
    async modelJson(maxBytes) {
      const size = (await regularFile(path, label)).size;
      if (size > maxBytes) throw tooLarge(size, maxBytes);
      return await files.readFile(path);
    },
    async *shard(p) {
      const file = join(root, p);
      const { size } = await regularFile(file, `shard ${JSON.stringify(p)}`, true);
      const real = await files.realPath(file);
      const inside = await (realRoot ??= files.realPath(root));
      if (!allowOutside && !real.startsWith(inside.endsWith(SEP) ? inside : inside + SEP)) {
        throw new SyntaxError(
          `Cannot decode TF.js artifacts: shard ${
            JSON.stringify(p)
          } resolves to ${real}, outside the artifacts directory ${inside} (allowOutsideShards permits it)`,
        );
      }
      const handle = await files.open(file, { read: true });
      try {
        let bytes = 0;
        for (;;) {
          // Sized to what is left, plus one byte that finds the end (or a file that grew) in the same
          // read: a 4 MiB buffer per read cost a small shard 8 MiB of zeroed memory.
          const buf = new Uint8Array(Math.min(SHARD_READ_BYTES, Math.max(0, size - bytes) + 1));
          const n = await handle.read(buf);
          if (n === null) break;
          bytes += n;
          yield buf.subarray(0, n);
        }
      } finally {
        handle.close();
      }
    },
  };
}

/** The key of shard `p` (a checked plain relative path) beside `model.json`'s key; `.` segments dropped. */
export function shardKey(modelKey: string, p: string): string {
  const parts = p.split("/").filter((s) => s !== ".");
  if (parts.length === 0) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: shard ${JSON.stringify(p)} is not a plain relative path`);
  }
  return modelKey.slice(0, modelKey.lastIndexOf("/") + 1) + parts.join("/");
}

/** Reads a body to its end, refusing more than `max` bytes. */
async function readCapped(body: ReadableStream<Uint8Array>, size: number, max: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const chunk of body) {
    n += chunk.byteLength;
    if (n > max) throw tooLarge(Math.max(n, size), max); // leaving the loop cancels the body
    parts.push(chunk);
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/**
 * Artifacts in an object store: `model.json` and the shards are objects, the shards' keys are
 * their manifest paths relative to `model.json`'s key. Paths were checked to be plain relative
 * paths (no `..`, not absolute, no scheme), so a shard is always an object under the same prefix.
 */
function objectSource(object: StoreObject, label: string): ArtifactsSource {
  const { store, key } = object;
  return {
    label,
    object,
    async modelJson(maxBytes) {
      const got = await store.get(key);
      if (got.info.size > maxBytes) {
        await got.body.cancel();
        throw tooLarge(got.info.size, maxBytes);
      }
      return await readCapped(got.body, got.info.size, maxBytes);
    },
    async *shard(p) {
      const got = await store.get(shardKey(key, p));
      const reader = got.body.getReader();
      let done = false;
      try {
        for (;;) {
          const r = await reader.read();
          if (r.done) {
            done = true;
            return;
          }
          // A store may hand out larger chunks; the reader above expects at most 4 MiB at once.
          for (let at = 0; at < r.value.byteLength; at += SHARD_READ_BYTES) {
            yield r.value.subarray(at, at + SHARD_READ_BYTES);
          }
        }
      } finally {
        if (!done) await reader.cancel().catch(() => {});
      }
    },
  };
}

/**
 * Where the artifacts whose `model.json` is at `address` are read from. A path where there are
 * no files (a browser) is a `TypeError`.
 */
export function artifactsSource(
  address: StorageAddress,
  options: StorageOptions & { allowOutsideShards?: boolean } = {},
): ArtifactsSource {
  const object = locate(address, options, "read TF.js artifacts from");
  const given = address instanceof URL && address.protocol === "file:"
    ? object.store.files?.path(object.key) ?? describeAddress(address)
    : describeAddress(address);
  const local = object.store.files;
  if (local) {
    return fileSource(object, local, given, options.allowOutsideShards ?? false);
  }
  return objectSource(object, given);
}

/** A shard being written: bytes appended, then published or dropped. */
export interface ShardWriter {
  write(bytes: Uint8Array): Promise<void>;
  close(): Promise<void>;
  abort(): Promise<void>;
}

/** Where a set of TF.js artifacts is written. */
export interface ArtifactsTarget {
  /** The store, whose root holds `model.json` and the shards. */
  readonly store: ObjectStore;
  /**
   * Whether shards can be renamed once all are written (a local directory): they are then
   * written under temporary names, and `open` needs no final name.
   */
  readonly renames: boolean;
  /** Starts writing shard `index` (from 0), under `name` where the target cannot rename. */
  open(index: number, name: string | undefined): Promise<ShardWriter>;
  /**
   * Publishes the shards written under `names` (renaming them, where the target renames) and then
   * `model.json`, atomically.
   */
  commit(names: string[], modelJson: Uint8Array): Promise<void>;
  /** After a failure: removes what `open` left that `commit` did not publish. */
  discard(): Promise<void>;
  /** How the result names an object of the set: its path, or its URL. */
  name(file: string): string;
}

async function writeAll(file: FileHandle, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.byteLength) off += await file.write(bytes.subarray(off));
}

/**
 * A local directory: shards are written to temporary files (`.weights.tmp-PID-XXXXXXXX-N`),
 * flushed, and renamed to their names only when all are written; then `model.json` is replaced
 * atomically (temporary file, fsync, rename, fsync of the directory).
 */
function fileTarget(store: ObjectStore, local: LocalFiles, sync: boolean): ArtifactsTarget {
  const root = local.root;
  const tag = `${thisProcess.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const temps: string[] = [];
  const open: FileHandle[] = [];
  let made: Promise<void> | undefined;
  return {
    store,
    renames: true,
    async open(index) {
      await (made ??= files.mkdir(root, { recursive: true }));
      const tmp = join(root, `.weights.tmp-${tag}-${index}`);
      temps.push(tmp);
      const file = await files.open(tmp, { write: true, createNew: true, mode: 0o644 });
      open.push(file);
      const forget = () => open.splice(open.indexOf(file), 1);
      return {
        write: (bytes) => writeAll(file, bytes),
        async close() {
          if (sync) await file.syncData();
          forget();
          file.close();
        },
        abort() {
          forget();
          try {
            file.close();
          } catch { /* already closed */ }
          return Promise.resolve();
        },
      };
    },
    async commit(names, modelJson) {
      await (made ??= files.mkdir(root, { recursive: true }));
      for (let i = 0; i < names.length; i++) await files.rename(temps[i]!, join(root, names[i]!));
      temps.length = 0;
      await writeFileAtomic(join(root, "model.json"), (f) => writeAll(f, modelJson), { sync });
    },
    async discard() {
      for (const f of open.splice(0)) {
        try {
          f.close();
        } catch { /* already closed */ }
      }
      for (const t of temps.splice(0)) await files.remove(t).catch(() => {});
    },
    name: (file) => join(root, file),
  };
}

/**
 * Any other store, which has no rename: each shard is written under its final key by the store's
 * atomic writer, then `model.json` by one atomic put. An existing `model.json` is deleted before
 * the first shard is replaced, so that no reader (TF.js included, which checks no digests) pairs
 * the old `model.json` with new shards.
 */
function objectTarget(store: ObjectStore, sync: boolean): ArtifactsTarget {
  let cleared = false;
  let current: ShardWriter | undefined;
  return {
    store,
    renames: false,
    async open(_index, name) {
      if (!cleared) {
        await store.delete("model.json");
        cleared = true;
      }
      const w = await store.writer(name!, { sync });
      const writer: ShardWriter = {
        write: (bytes) => w.write(bytes),
        async close() {
          current = undefined;
          await w.close();
        },
        async abort() {
          current = undefined;
          await w.abort();
        },
      };
      current = writer;
      return writer;
    },
    async commit(_names, modelJson) {
      await store.put("model.json", modelJson);
    },
    async discard() {
      await current?.abort().catch(() => {});
    },
    name: (file) => store.url + file,
  };
}

/**
 * Where artifacts go: a local directory (shards renamed into place), or the root of a writable
 * store. An HTTP store is read-only: a `TypeError`.
 */
export function artifactsTarget(store: ObjectStore, sync: boolean): ArtifactsTarget {
  if (store.files) return fileTarget(store, store.files, sync);
  if (!store.writable) {
    throw new TypeError(`Cannot export to TF.js: ${store.url} is read-only (write to a path, s3://, OPFS or memory)`);
  }
  return objectTarget(store, sync);
}

/** The store a directory address names; a path where there are no files (a browser) is a `TypeError`. */
export function artifactsDirectory(dir: DirectoryAddress, options: StorageOptions = {}): ObjectStore {
  if (
    typeof dir === "string" ? !/^[a-zA-Z][a-zA-Z0-9+.-]+:/.test(dir) : dir instanceof URL && dir.protocol === "file:"
  ) {
    requireFiles(String(dir), "export TF.js artifacts to");
  }
  return resolveDirectory(dir, options.storage);
}
