/**
 * The local file system as an {@linkcode ObjectStore}: objects are regular files under a root
 * directory, keys are paths relative to it.
 *
 * @module
 */
import { createError } from "./_write_errors.ts";
import { checkOptionNames } from "../format/_options.ts";
import { FILE_STORE_OPTION_NAMES } from "./_storage_options.ts";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { StagedFileSink } from "./_file_sink.ts";
import { openDirect } from "./_direct_io.ts";
import { readFull } from "./_file_io.ts";
import { checkKey, checkPrefix, checkRange, clipRange } from "./_validate.ts";

/**
 * Keys may hold a backslash where file names may (not on Windows, where it separates paths):
 * `saveCheckpoint("runs/back\\slash.ckpt")` must work wherever the file system allows the name.
 */
const BACKSLASH_KEYS = globalThis.Deno?.build.os !== "windows";
import type { WorkerHash } from "./_worker_hash.ts";
import {
  type GetOptions,
  type GetResult,
  type LocalFiles,
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  type ObjectWriter,
  PreconditionFailedError,
  type PutOptions,
  type WriteOptions,
} from "./types.ts";
import { OsErrors } from "../runtime/errors.ts";
import { withDirectoryLock } from "../runtime/locks.ts";
import { type DirEntry, type FileHandle, type FileInfo, files, readDirAll, SeekMode } from "../runtime/files.ts";
import { thisProcess } from "../runtime/process.ts";

/**
 * A write option only {@linkcode FileStore} reads: a whole-file hash fed from its staging buffers
 * on another thread (saves use it; it is not part of the store interface).
 */
export const WORKER_HASH: unique symbol = Symbol("ckpt.workerHash");

/** How temporary files are named: `.NAME.tmp-PID-XXXXXXXX` beside their target. */
const TEMP_NAME = /^\..+\.tmp-\d+-[0-9a-f]{8}$/;

/** Bytes per chunk of a {@linkcode FileStore.get} body; each chunk is a fresh buffer the reader may keep. */
const GET_CHUNK = 4 * 2 ** 20;

function tempPath(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1);
  return join(dirname(path), `.${name}.tmp-${thisProcess.pid}-${crypto.randomUUID().slice(0, 8)}`);
}

function describeKind(st: FileInfo): string {
  if (st.isDirectory) return "a directory";
  if (st.isSymlink) return "a symbolic link";
  return "a device, socket or pipe";
}

async function statOrUndefined(path: string): Promise<FileInfo | undefined> {
  try {
    return await files.stat(path);
  } catch (e) {
    if (e instanceof OsErrors.NotFound || e instanceof OsErrors.NotADirectory) return undefined;
    throw e;
  }
}

/**
 * Creates `path` and its missing parents (as `mkdir -p`); with `sync`, each new directory is made
 * durable by flushing its parent, where its entry lives. Errors are the file system's.
 *
 * @example
 * ```ts
 * import { makeDirectory } from "./file.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await makeDirectory(`${dir}/runs/a/b`, true);
 * assert.ok((await Deno.stat(`${dir}/runs/a/b`)).isDirectory);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function makeDirectory(path: string, sync: boolean): Promise<void> {
  const missing: string[] = [];
  for (let p = resolve(path); !(await statOrUndefined(p)); p = dirname(p)) {
    missing.push(p);
    if (dirname(p) === p) break;
  }
  for (const p of missing.reverse()) {
    try {
      await files.mkdir(p);
    } catch (e) {
      if (e instanceof OsErrors.AlreadyExists) continue; // made meanwhile, by someone else
      throw e;
    }
    if (sync) await syncDir(dirname(p));
  }
}

async function syncDir(dir: string): Promise<void> {
  const d = await files.open(dir, { read: true });
  try {
    await d.sync();
  } finally {
    d.close();
  }
}

function closeQuietly(file: FileHandle): void {
  try {
    file.close();
  } catch { /* already closed */ }
}

/** Options of a {@linkcode FileStore}. */
export interface FileStoreOptions {
  /**
   * Whether a durable write (`sync`, the default) goes around the page cache where it can: on
   * Linux with FFI granted (`--allow-ffi`, `-A`), whole 4 KiB blocks are written straight from
   * the staging buffers to the device (`O_DIRECT`), so a save neither copies its bytes into fresh
   * page-cache pages nor pushes other memory out of the cache for a file nobody reads before a
   * restart. A file system that refuses such writes gets ordinary ones. Set it to `false` when
   * something reads each checkpoint right after it is saved (it then comes from memory, not the
   * disk). Elsewhere, and for writes with `sync: false`, writes go through the page cache.
   *
   * @default {true}
   *
   * @example
   * ```ts
   * import { FileStore } from "./file.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const store = new FileStore(dir, { directWrites: false }); // every write through the page cache
   * const w = await store.writer("a.bin");
   * await w.write(new Uint8Array([1, 2, 3]));
   * assert.equal((await w.close()).size, 3);
   * assert.equal(store.address, undefined); // a worker could not reopen it as it is
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  directWrites?: boolean;
}

/**
 * An {@linkcode ObjectStore} over a directory. Writes go to a temporary file beside the target
 * (`.NAME.tmp-PID-XXXXXXXX`), which is flushed (`fdatasync`: behind the writes as they go, and
 * its end at close; or written around the page cache, see {@linkcode FileStoreOptions.directWrites}),
 * renamed over the target, and the directory flushed (`fsync`): readers see
 * the previous file or the new one, never a partial one, even across a crash. `"create"`
 * publishes with a hard link, which fails if the target exists; `{ ifMatch }` checks and renames
 * under an exclusive lock on the directory. An object's `version` is its device, inode, size and
 * modification time.
 *
 * Keys map to paths below the root (`a/b.ckpt` is `ROOT/a/b.ckpt`); they never escape it. Only
 * regular files (or links to them) are objects: reading a directory, device or pipe is a
 * `TypeError`. Temporary files never appear in {@linkcode FileStore.list};
 * {@linkcode FileStore.sweep} removes those a killed process left.
 *
 * @example
 * ```ts
 * import { FileStore } from "./file.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const store = new FileStore(dir);
 * const w = await store.writer("run/a.bin");
 * await w.write(new Uint8Array([1, 2, 3]));
 * const info = await w.close();
 * assert.equal(info.size, 3);
 * const { body } = await store.get("run/a.bin", { range: { suffix: 2 } });
 * assert.deepEqual(new Uint8Array(await new Response(body).arrayBuffer()), new Uint8Array([2, 3]));
 * assert.deepEqual(await Array.fromAsync(store.list("run/"), (o) => o.key), ["run/a.bin"]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class FileStore implements ObjectStore {
  /** The root directory, absolute. */
  readonly root: string;
  /** The root as a `file:` URL ending in `/`. */
  readonly url: string;
  /** Always true. */
  readonly writable = true;
  /**
   * The same as `url`: a worker reopens the store from it. Absent for a store opened with
   * `directWrites: false`, which a worker could not open as it is.
   */
  readonly address: string | undefined;
  /** What this store can do beyond the interface: its objects are local files (see {@linkcode LocalFiles}). */
  readonly files: LocalFiles;
  #directWrites: boolean;

  /**
   * A store rooted at a directory.
   *
   * @param root the directory holding the objects (a path or a `file:` URL); it must exist before the first write, directories below it are made as needed
   * @param options `directWrites`: whether a durable write may go around the page cache (see {@linkcode FileStoreOptions})
   */
  constructor(root: string | URL, options: FileStoreOptions = {}) {
    checkOptionNames(options, FILE_STORE_OPTION_NAMES, "Cannot open a FileStore");
    if (root instanceof URL) {
      if (root.protocol !== "file:") throw new TypeError(`Cannot open a FileStore at ${root.href}: not a file: URL`);
      root = fileURLToPath(root);
    }
    if (typeof root !== "string" || root === "") throw new TypeError("Cannot open a FileStore: root must be a path");
    this.root = resolve(root);
    const href = pathToFileURL(this.root).href;
    this.url = href.endsWith("/") ? href : `${href}/`;
    const direct = options?.directWrites ?? true;
    if (typeof direct !== "boolean") throw new TypeError("Cannot open a FileStore: directWrites must be a boolean");
    this.#directWrites = direct;
    this.address = direct ? this.url : undefined;
    this.files = Object.freeze({
      root: this.root,
      path: (key: string) => this.path(key),
      open: (key: string) => this.openFile(key),
      stagedWrites: true,
    });
  }

  /**
   * The local path of the object `key`.
   *
   * @example
   * ```ts
   * import { FileStore } from "./file.ts";
   * import assert from "node:assert/strict";
   * assert.equal(new FileStore("/data/runs").path("a/b.ckpt"), "/data/runs/a/b.ckpt");
   * ```
   */
  path(key: string): string {
    checkKey(key, this.url, BACKSLASH_KEYS);
    return join(this.root, ...key.split("/"));
  }

  #url(key: string): string {
    return this.url + key.split("/").map(encodeURIComponent).join("/");
  }

  #info(key: string, st: FileInfo): ObjectInfo {
    const mtime = st.mtime?.getTime() ?? 0;
    const info: ObjectInfo = { key, size: st.size, version: `${st.dev}-${st.ino}-${st.size}-${mtime}` };
    if (st.mtime) info.lastModified = st.mtime;
    return info;
  }

  /** The file's status, refusing what is not a regular file; `undefined` when absent. */
  async #stat(key: string, verb: string): Promise<FileInfo | undefined> {
    const st = await statOrUndefined(this.path(key));
    if (st && !st.isFile) {
      throw new TypeError(`Cannot ${verb} ${this.#url(key)}: not a regular file (${describeKind(st)})`);
    }
    return st;
  }

  /**
   * Opens the object's file for reading, for callers that read it directly (a fast local path);
   * errors are the file system's own classes (`OsErrors.NotFound` for an absent file, saying
   * `Cannot read "PATH": No such file or directory`, as the CLI does). The caller closes it.
   *
   * @example
   * ```ts
   * import { FileStore } from "./file.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const store = new FileStore(dir);
   * await store.put("a", new Uint8Array([1]));
   * const file = await store.openFile("a");
   * assert.equal((await file.stat()).size, 1);
   * file.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async openFile(key: string): Promise<FileHandle> {
    const path = this.path(key);
    let st: FileInfo;
    try {
      st = await files.stat(path);
    } catch (e) {
      // Deno's own message ends "(os error 2): stat '/path'"; say it as the CLI does.
      if (e instanceof OsErrors.NotFound) {
        throw new OsErrors.NotFound(`Cannot read ${JSON.stringify(path)}: No such file or directory`, { cause: e });
      }
      throw e;
    }
    if (st.isDirectory) throw new TypeError(`Cannot read ${JSON.stringify(path)}: it is a directory`); // as the CLI says
    if (!st.isFile) throw new TypeError(`Cannot read ${this.#url(key)}: not a regular file (${describeKind(st)})`);
    return await files.open(path, { read: true });
  }

  /** Reads an object or a range of it, in chunks of up to 4 MiB. */
  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    checkRange(options.range);
    options.signal?.throwIfAborted();
    const path = this.path(key);
    // stat first: opening a named pipe would block until a writer came.
    if (!(await this.#stat(key, "read"))) throw new ObjectNotFoundError(this.#url(key));
    let file: FileHandle;
    try {
      file = await files.open(path, { read: true });
    } catch (e) {
      if (e instanceof OsErrors.NotFound) throw new ObjectNotFoundError(this.#url(key), { cause: e });
      throw e;
    }
    let st: FileInfo;
    try {
      st = await file.stat(); // the open file's own status: the object as it is read
      if (!st.isFile) throw new TypeError(`Cannot read ${this.#url(key)}: not a regular file (${describeKind(st)})`);
    } catch (e) {
      file.close();
      throw e;
    }
    const { offset, length } = clipRange(options.range, st.size);
    const url = this.#url(key);
    let left = length;
    let closed = false;
    const finish = () => {
      if (!closed) closeQuietly(file);
      closed = true;
    };
    const signal = options.signal;
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        if (length === 0) {
          finish();
          c.close();
          return;
        }
        try {
          await file.seek(offset, SeekMode.Start);
        } catch (e) {
          finish();
          throw e;
        }
        signal?.addEventListener("abort", () => {
          finish();
          try {
            c.error(signal.reason);
          } catch { /* already closed */ }
        }, { once: true });
      },
      async pull(c) {
        const buf = new Uint8Array(Math.min(GET_CHUNK, left));
        let n: number;
        try {
          n = await readFull(file, buf);
        } catch (e) {
          finish();
          throw e;
        }
        if (n < buf.byteLength) {
          finish();
          throw new RangeError(
            `Cannot read ${url}: the file shrank while being read (ends at ${offset + length - left + n})`,
          );
        }
        left -= n;
        c.enqueue(buf);
        if (left === 0) {
          finish();
          c.close();
        }
      },
      cancel() {
        finish();
      },
    }, { highWaterMark: 0 });
    return { info: this.#info(key, st), offset, length, body };
  }

  /** Describes an object, or gives `undefined` when there is none. */
  async head(key: string): Promise<ObjectInfo | undefined> {
    const st = await this.#stat(key, "read");
    return st ? this.#info(key, st) : undefined;
  }

  /** Writes `data` to a flushed temporary file beside the object, then publishes it per `mode`. */
  async put(key: string, data: Uint8Array, options: PutOptions = {}): Promise<ObjectInfo> {
    const path = this.path(key);
    const mode = options.mode ?? "overwrite";
    if (
      mode !== "overwrite" && mode !== "create" &&
      !(typeof mode === "object" && mode !== null && typeof mode.ifMatch === "string")
    ) {
      throw new TypeError(`Cannot write ${this.#url(key)}: mode must be "overwrite", "create" or { ifMatch: version }`);
    }
    if (!(data instanceof Uint8Array)) throw new TypeError(`Cannot write ${this.#url(key)}: data must be a Uint8Array`);
    options.signal?.throwIfAborted();
    await this.#stat(key, "write");
    const dir = await this.#parent(key);
    const tmp = tempPath(path);
    let info: ObjectInfo;
    const file = await files.open(tmp, { write: true, createNew: true, mode: 0o644 }).catch(async (e) => {
      throw await createError(path, e);
    });
    try {
      try {
        let off = 0;
        while (off < data.byteLength) off += await file.write(data.subarray(off));
        await file.syncData();
        info = this.#info(key, await file.stat());
      } finally {
        file.close();
      }
      options.signal?.throwIfAborted();
      if (mode === "create") {
        try {
          await files.link(tmp, path);
        } catch (e) {
          if (e instanceof OsErrors.AlreadyExists) {
            throw new PreconditionFailedError(this.#url(key), "an object already exists there", { cause: e });
          }
          throw e;
        }
        await files.remove(tmp);
      } else if (mode === "overwrite") {
        await files.rename(tmp, path);
      } else {
        await withDirectoryLock(dir, async () => {
          const st = await this.#stat(key, "write");
          if (!st) {
            throw new PreconditionFailedError(
              this.#url(key),
              `no object to replace (expected version ${mode.ifMatch})`,
            );
          }
          const now = this.#info(key, st).version;
          if (now !== mode.ifMatch) {
            throw new PreconditionFailedError(
              this.#url(key),
              `it changed since it was read (version ${now}, expected ${mode.ifMatch})`,
            );
          }
          await files.rename(tmp, path);
        });
      }
    } catch (e) {
      await files.remove(tmp).catch(() => {});
      throw e;
    }
    await syncDir(dir);
    return info;
  }

  /**
   * The directory that holds `key`, made (below the root) if needed. The root itself must exist:
   * a missing root is the file system's `NotFound`, as for a bucket that does not exist.
   */
  async #parent(key: string, sync = true): Promise<string> {
    const segments = key.split("/").slice(0, -1);
    let dir = this.root;
    if (segments.length === 0) return dir;
    if (!(await statOrUndefined(this.root))) await files.stat(this.root); // throws NotFound naming the root
    for (const s of segments) {
      const up = dir;
      dir = join(dir, s);
      let created = true;
      try {
        await files.mkdir(dir);
      } catch (e) {
        if (!(e instanceof OsErrors.AlreadyExists)) throw e;
        created = false;
      }
      // A new directory's entry lives in its parent: flush the parent, or a crash after a commit
      // could lose the directory (a blob shard, say) with everything the commit put in it.
      if (created && sync) await syncDir(up);
    }
    return dir;
  }

  /**
   * Starts a streaming write to a temporary file beside the object, through two reused staging
   * buffers written off the JS thread. With `reuse`, that object's file is renamed to the
   * temporary name and overwritten in place (then truncated to the bytes written).
   */
  async writer(key: string, options: WriteOptions = {}): Promise<ObjectWriter> {
    const path = this.path(key);
    if (options.reuse !== undefined) {
      checkKey(options.reuse, this.url, BACKSLASH_KEYS);
      if (options.reuse === key) {
        throw new TypeError(`Cannot write ${this.#url(key)}: reuse must name another object than the one written`);
      }
    }
    options.signal?.throwIfAborted();
    await this.#stat(key, "write");
    const sync = options.sync ?? true;
    const dir = await this.#parent(key, sync);
    const tmp = tempPath(path);
    let file: FileHandle | undefined;
    let reused = false;
    if (options.reuse !== undefined) {
      const old = this.path(options.reuse);
      const st = await files.lstat(old).catch(() => undefined);
      if (st?.isFile) {
        try {
          await files.rename(old, tmp);
          file = await files.open(tmp, { write: true });
          reused = true;
        } catch {
          // Gone meanwhile, or on another file system: write a new file instead.
          await files.remove(tmp).catch(() => {});
        }
      }
    }
    file ??= await files.open(tmp, { write: true, createNew: true, mode: 0o644 }).catch(async (e) => {
      throw await createError(path, e);
    });
    // A second handle to flush through while the first one writes (see StagedFileSink).
    let flushBehind: FileHandle | undefined;
    try {
      flushBehind = sync ? await files.open(tmp, { write: true }) : undefined;
    } catch (e) {
      closeQuietly(file);
      await files.remove(tmp).catch(() => {});
      throw e;
    }
    const worker = (options as { [WORKER_HASH]?: WorkerHash })[WORKER_HASH];
    return new FileWriter({
      file,
      tmp,
      path,
      dir,
      reused,
      sync,
      sink: new StagedFileSink(file, {
        worker,
        flushBehind,
        direct: sync && this.#directWrites ? openDirect(tmp) : undefined,
      }),
      info: (st) => this.#info(key, st),
      signal: options.signal,
    });
  }

  /** Deletes an object; an absent one is not an error. Directories left empty stay. */
  async delete(key: string): Promise<void> {
    const path = this.path(key);
    await this.#stat(key, "delete");
    try {
      await files.remove(path);
    } catch (e) {
      if (!(e instanceof OsErrors.NotFound)) throw e;
    }
  }

  /** Every regular file below the root whose key starts with `prefix`, in ascending key order. */
  async *list(prefix = ""): AsyncIterable<ObjectInfo> {
    checkPrefix(prefix, this.url);
    const keys = (await this.#walk(prefix)).filter((k) => !TEMP_NAME.test(k.slice(k.lastIndexOf("/") + 1)));
    for (const key of keys) {
      const st = await statOrUndefined(this.path(key));
      if (st?.isFile) yield this.#info(key, st);
    }
  }

  /** Removes the temporary files below `prefix` that interrupted writes left; says how many. */
  async sweep(prefix = ""): Promise<number> {
    checkPrefix(prefix, this.url);
    let removed = 0;
    for (const key of await this.#walk(prefix)) {
      if (!TEMP_NAME.test(key.slice(key.lastIndexOf("/") + 1))) continue;
      try {
        await files.remove(this.path(key));
        removed++;
      } catch (e) {
        if (!(e instanceof OsErrors.NotFound)) throw e;
      }
    }
    return removed;
  }

  /** Keys of the files (and links to files) below the root that start with `prefix`, sorted. */
  async #walk(prefix: string): Promise<string[]> {
    const cut = prefix.lastIndexOf("/");
    const start = cut < 0 ? "" : prefix.slice(0, cut + 1);
    const keys: string[] = [];
    const visit = async (dirKey: string): Promise<void> => {
      const dir = dirKey === "" ? this.root : join(this.root, ...dirKey.slice(0, -1).split("/"));
      let entries: DirEntry[];
      try {
        entries = await readDirAll(dir);
      } catch (e) {
        if (e instanceof OsErrors.NotFound || e instanceof OsErrors.NotADirectory) return;
        throw e;
      }
      for (const e of entries) {
        const key = dirKey + e.name;
        if (e.name.includes("\\")) continue; // not addressable by a key
        let isFile = e.isFile;
        let isDir = e.isDirectory;
        if (e.isSymlink) {
          // Links to files are objects; links to directories are not followed (no loops, no escape).
          isFile = (await statOrUndefined(join(dir, e.name)))?.isFile ?? false;
          isDir = false;
        }
        if (isFile && key.startsWith(prefix)) keys.push(key);
        else if (isDir && (key + "/").slice(0, prefix.length) === prefix.slice(0, key.length + 1)) {
          await visit(key + "/");
        }
      }
    };
    await visit(start);
    return keys.sort((a, b) => a < b ? -1 : a > b ? 1 : 0);
  }
}

interface FileWriterParts {
  file: FileHandle;
  tmp: string;
  path: string;
  dir: string;
  reused: boolean;
  sync: boolean;
  sink: StagedFileSink;
  info: (st: FileInfo) => ObjectInfo;
  signal: AbortSignal | undefined;
}

/** One streaming write to a temporary file; published by rename on close. */
class FileWriter implements ObjectWriter {
  #p: FileWriterParts;
  #state: "open" | "closing" | "done" = "open";
  #failure: unknown;
  #onAbort: (() => void) | undefined;

  constructor(parts: FileWriterParts) {
    this.#p = parts;
    const signal = parts.signal;
    if (signal) {
      this.#onAbort = () => void this.abort(signal.reason);
      signal.addEventListener("abort", this.#onAbort, { once: true });
    }
  }

  #check(): void {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#state !== "open") throw new TypeError(`Cannot write ${this.#p.path}: the writer is closed`);
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.#check();
    if (!(chunk instanceof Uint8Array)) throw new TypeError(`Cannot write ${this.#p.path}: chunk is not a Uint8Array`);
    try {
      await this.#p.sink.write(chunk);
    } catch (e) {
      await this.abort(e);
      throw e;
    }
    this.#check(); // aborted while the chunk was being staged
  }

  async close(): Promise<ObjectInfo> {
    this.#check();
    this.#state = "closing";
    const { file, sink, tmp, path, dir, sync } = this.#p;
    try {
      await sink.close();
      if (this.#p.reused) await file.truncate(sink.bytes);
      if (sync) await file.syncData();
      const info = this.#p.info(await file.stat());
      file.close();
      if (this.#failure !== undefined) throw this.#failure;
      await files.rename(tmp, path);
      this.#state = "done";
      this.#detach();
      if (sync) await syncDir(dir);
      return info;
    } catch (e) {
      this.#state = "open";
      await this.abort(e);
      throw e;
    }
  }

  async abort(reason?: unknown): Promise<void> {
    if (this.#state === "done") return;
    if (this.#state === "closing") {
      // close() sees this before publishing, and cleans up.
      this.#failure ??= reason ?? new Error(`Cannot write ${this.#p.path}: the write was aborted`);
      return;
    }
    this.#state = "done";
    this.#failure ??= reason ?? new Error(`Cannot write ${this.#p.path}: the write was aborted`);
    this.#detach();
    await this.#p.sink.abort();
    closeQuietly(this.#p.file);
    await files.remove(this.#p.tmp).catch(() => {});
  }

  #detach(): void {
    if (this.#onAbort) this.#p.signal?.removeEventListener("abort", this.#onAbort);
    this.#onAbort = undefined;
  }
}
