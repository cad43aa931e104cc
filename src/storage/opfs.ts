/**
 * An {@linkcode ObjectStore} in the browser's Origin Private File System (OPFS): a directory per
 * store, `/`-separated keys as nested directories, streaming writes through `createWritable()`.
 *
 * What Chromium does, and what this store does about it (checked in headless Chromium 156):
 * - `createWritable()` on a file writes a swap entry (`NAME.crswap`) beside it that directory
 *   listings show, and moves it over the file on `close()`; `abort()` and a closed tab discard it.
 *   A file created for the purpose would be visible, empty, for the whole write. So a write here
 *   goes to a fresh file in the store's `.ckpt-tmp/` directory and is `move()`d over the key when
 *   complete (a move over an existing file replaces it whole): readers see the old object or the
 *   new one. Listings skip `.ckpt-tmp/` and swap entries; {@linkcode OpfsStore.sweep} removes what
 *   a closed tab left there.
 * - A `File` read from a handle that has since been replaced can no longer be read
 *   (`NotReadableError`): a read racing a replacement fails, it never mixes two objects.
 * - Every move over a key (conditional writes check and move) and every delete runs under a
 *   Web Lock (`navigator.locks`) named after the object, so tabs and workers of one origin cannot
 *   both win, and a load reading the file through a sync access handle (which locks it) ends
 *   first. An object's version is its size and modification time in milliseconds.
 *
 * @example
 * ```ts ignore
 * // In a page or a worker:
 * import { OpfsStore } from "./opfs.ts";
 * const store = await OpfsStore.open("runs/demo");
 * await store.put("notes.txt", new TextEncoder().encode("hello"));
 * for await (const info of store.list()) console.log(info.key, info.size);
 * ```
 *
 * @module
 */
import {
  type GetOptions,
  type GetResult,
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  type ObjectWriter,
  PreconditionFailedError,
  type PutOptions,
  type WriteOptions,
} from "./types.ts";
import { checkKey as checkKeyShape, checkPrefix, checkRange, clipRange } from "./_validate.ts";
import { checkOptionNames } from "../format/_options.ts";
import { OPFS_STORE_OPTION_NAMES } from "./_storage_options.ts";

import { openWritable, type WritableEntry, type WritableFile } from "./_opfs_writable.ts";
import { checkQuota, StorageFullError } from "./quota.ts";
import { noteOpfsFile, underObjectLock } from "./_opfs_read.ts";

export { persistStorage, type StorageEstimate, storageEstimate, StorageFullError } from "./quota.ts";

// The parts of the File System Access API used here (Deno's type library has no DOM).
interface FileEntry extends WritableEntry {
  readonly kind: "file";
  readonly name: string;
  getFile(): Promise<File>;
  move(parent: DirectoryEntry, name: string): Promise<void>;
}
/** A directory of the Origin Private File System (`FileSystemDirectoryHandle`). */
export interface DirectoryEntry {
  readonly kind: "directory";
  readonly name: string;
  getFileHandle(name: string, options?: { create?: boolean }): Promise<FileEntry>;
  getDirectoryHandle(name: string, options?: { create?: boolean }): Promise<DirectoryEntry>;
  removeEntry(name: string, options?: { recursive?: boolean }): Promise<void>;
  entries(): AsyncIterable<[string, FileEntry | DirectoryEntry]>;
}

/** The directory inside a store that holds writes in progress. */
export const OPFS_TEMP_DIR = ".ckpt-tmp";
const SWAP_SUFFIX = ".crswap";

/**
 * Room kept for the origin's other storage (IndexedDB, caches) when {@linkcode checkRoom} counts
 * the origin's OPFS files itself.
 */
const OTHER_STORAGE = 64 * 2 ** 20;

/**
 * Refuses, before anything is written, a write of `size` bytes to `url` that the origin's free
 * quota cannot hold. WebKit's `navigator.storage.estimate()` goes on counting files that were
 * replaced or removed (WebKitGTK 2.50: 768 MiB used with 1 MiB of files left, after removing
 * them, their directory, and reloading), which refused the fourth save of 256 MiB to one key
 * in a 1000 MB origin. So where the estimate refuses, the origin's OPFS files are counted, and
 * the write goes ahead when they, the write and {@linkcode OTHER_STORAGE} fit the quota; if the
 * quota cannot hold it after all, the engine's own QuotaExceededError stops it part way (a
 * StorageFullError too, and no partial file). That is also what happens in Firefox when the
 * site's other origins (another port of the same host: one quota group, which its estimate
 * counts) hold more than {@linkcode OTHER_STORAGE}: the count sees this origin's files only.
 */
async function checkRoom(url: string, size: number): Promise<void> {
  try {
    await checkQuota(url, size);
  } catch (e) {
    const storage = (globalThis.navigator as unknown as { storage?: { getDirectory?: () => Promise<DirectoryEntry> } })
      ?.storage;
    if (!(e instanceof StorageFullError) || e.quota === undefined || typeof storage?.getDirectory !== "function") {
      throw e;
    }
    if ((await filesBytes(await storage.getDirectory())) + size + OTHER_STORAGE > e.quota) throw e;
  }
}

/** The bytes of the files under `dir`, at every depth. */
async function filesBytes(dir: DirectoryEntry): Promise<number> {
  let bytes = 0;
  for await (const [, entry] of dir.entries()) {
    // A file removed meanwhile counts nothing.
    bytes += entry.kind === "file" ? await entry.getFile().then((f) => f.size, () => 0) : await filesBytes(entry);
  }
  return bytes;
}

/** Options for {@linkcode OpfsStore.open}. */
export interface OpfsStoreOptions {
  /**
   * The directory to resolve `path` in.
   *
   * @default {await navigator.storage.getDirectory()}
   */
  root?: DirectoryEntry;
}

function domName(e: unknown): string {
  return e !== null && typeof e === "object" && "name" in e ? String((e as { name: unknown }).name) : "";
}

function isMissing(e: unknown): boolean {
  const n = domName(e);
  return n === "NotFoundError" || n === "TypeMismatchError";
}

function checkKey(key: string, store: string): string[] {
  checkKeyShape(key, store);
  const parts = key.split("/");
  if (parts.some((p) => p.endsWith(SWAP_SUFFIX))) {
    throw new TypeError(
      `Invalid object key ${JSON.stringify(key)} for ${store}: names ending in ${SWAP_SUFFIX} are the browser's`,
    );
  }
  if (parts[0] === OPFS_TEMP_DIR) {
    throw new TypeError(`Invalid object key ${JSON.stringify(key)} for ${store}: ${OPFS_TEMP_DIR} is reserved`);
  }
  return parts;
}

function info(key: string, file: File): ObjectInfo {
  return {
    key,
    size: file.size,
    version: `${file.size}-${file.lastModified}`,
    lastModified: new Date(file.lastModified),
  };
}

/**
 * An {@linkcode ObjectStore} in the Origin Private File System. See the module doc for how
 * writes stay atomic.
 */
export class OpfsStore implements ObjectStore {
  readonly url: string;
  readonly writable = true;
  #dir: DirectoryEntry;
  #address: string | undefined;

  /**
   * A store over an OPFS directory handle; `url` names it in messages.
   *
   * @param dir the store's root directory
   * @param url how error messages name the root; ends with `/`
   */
  constructor(dir: DirectoryEntry, url = `opfs:///${dir.name ? dir.name + "/" : ""}`) {
    this.#dir = dir;
    this.url = url.endsWith("/") ? url : `${url}/`;
  }

  /**
   * The store at `path` (`/`-separated, created if absent) in this origin's OPFS.
   *
   * @example
   * ```ts ignore
   * const store = await OpfsStore.open("runs/mnist");
   * ```
   */
  static async open(path = "", options: OpfsStoreOptions = {}): Promise<OpfsStore> {
    checkOptionNames(options, OPFS_STORE_OPTION_NAMES, "Cannot open an OPFS store");
    let dir = options.root;
    if (!dir) {
      const storage =
        (globalThis.navigator as unknown as { storage?: { getDirectory?: () => Promise<DirectoryEntry> } })
          ?.storage;
      if (typeof storage?.getDirectory !== "function") {
        throw new TypeError("Cannot open an OPFS store: this runtime has no navigator.storage.getDirectory()");
      }
      dir = await storage.getDirectory();
    }
    const parts = path.split("/").filter((p) => p !== "");
    if (parts.length) checkKey(parts.join("/"), "OPFS");
    for (const p of parts) dir = await dir.getDirectoryHandle(p, { create: true });
    const store = new OpfsStore(dir, `opfs:///${parts.map((p) => p + "/").join("")}`);
    // Under the origin's own root, a worker of this origin finds the same directory by its URL.
    if (!options.root) store.#address = store.url;
    return store;
  }

  /**
   * `opfs:///path/` for a store that {@linkcode OpfsStore.open} opened in the origin's root, so a
   * Web Worker (a `BackgroundWriter`'s) can open it too; `undefined` for a store on a directory
   * handle of your own, which cannot be posted to a worker.
   */
  get address(): string | undefined {
    return this.#address;
  }

  async #parent(parts: string[], create: boolean): Promise<DirectoryEntry> {
    let dir = this.#dir;
    for (const p of parts.slice(0, -1)) dir = await dir.getDirectoryHandle(p, { create });
    return dir;
  }

  async #file(key: string): Promise<File | undefined> {
    return (await this.#entry(key))?.file;
  }

  /** The object's file handle and its content now; `undefined` if there is none. */
  async #entry(key: string): Promise<{ handle: FileEntry; file: File } | undefined> {
    const parts = checkKey(key, this.url);
    try {
      const dir = await this.#parent(parts, false);
      const handle = await dir.getFileHandle(parts.at(-1)!);
      return { handle, file: await handle.getFile() };
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw e;
    }
  }

  /** Reads an object, or a range of it. */
  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    checkRange(options.range);
    const file = await this.#file(key);
    if (!file) throw new ObjectNotFoundError(this.url + key);
    const { offset: start, length } = clipRange(options.range, file.size);
    const end = start + length;
    const url = this.url + key;
    const source = file.slice(start, end).stream().getReader();
    const signal = options.signal;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        signal?.throwIfAborted();
        try {
          const r = await source.read();
          if (r.done) c.close();
          else c.enqueue(r.value);
        } catch (e) {
          if (domName(e) === "NotReadableError") {
            throw new Error(`Cannot read ${url}: the object was replaced or deleted while it was being read`, {
              cause: e,
            });
          }
          throw e;
        }
      },
      cancel: (reason) => source.cancel(reason),
    }, { highWaterMark: 0 });
    return { info: info(key, file), offset: start, length: end - start, body };
  }

  /**
   * The object's `File`, for reads by slices (a load reads each large record with one
   * `slice().arrayBuffer()`). Once the object is replaced or deleted, reads of it fail
   * (`NotReadableError`): they never mix two objects. A whole load may read the same file
   * through a sync access handle on a worker instead (src/storage/_opfs_read.ts).
   */
  async blob(key: string): Promise<Blob> {
    const entry = await this.#entry(key);
    if (!entry) throw new ObjectNotFoundError(this.url + key);
    noteOpfsFile(entry.file, entry.handle, this.url + key);
    return entry.file;
  }

  /** Describes an object, or `undefined` when there is none. */
  async head(key: string): Promise<ObjectInfo | undefined> {
    const file = await this.#file(key);
    return file ? info(key, file) : undefined;
  }

  /** Writes a small object atomically, honouring `mode`. */
  async put(key: string, data: Uint8Array, options: PutOptions = {}): Promise<ObjectInfo> {
    const mode = options.mode ?? "overwrite";
    const w = await this.#start(key, options.signal, mode, data.byteLength);
    try {
      await w.write(data);
    } catch (e) {
      await w.abort(e);
      throw e;
    }
    return await w.close();
  }

  /** Starts a streaming atomic write. */
  async writer(key: string, options: WriteOptions = {}): Promise<ObjectWriter> {
    return await this.#start(key, options.signal, "overwrite", options.sizeHint);
  }

  async #start(
    key: string,
    signal: AbortSignal | undefined,
    mode: PutOptions["mode"],
    size = 0,
  ): Promise<ObjectWriter> {
    const parts = checkKey(key, this.url);
    if (mode !== "overwrite" && mode !== "create" && !(typeof mode === "object" && typeof mode?.ifMatch === "string")) {
      throw new TypeError(`Invalid put mode ${JSON.stringify(mode)}: use "overwrite", "create" or { ifMatch }`);
    }
    signal?.throwIfAborted();
    const url = this.url + key;
    await checkRoom(url, size); // refused before anything is written
    const tempDir = await this.#dir.getDirectoryHandle(OPFS_TEMP_DIR, { create: true });
    const tempName = crypto.randomUUID();
    const temp = await tempDir.getFileHandle(tempName, { create: true });
    const removeTemp = () => tempDir.removeEntry(tempName).catch(() => {});
    let out: WritableFile;
    try {
      out = await openWritable(temp, tempDir, url, size);
    } catch (e) {
      await removeTemp();
      throw e;
    }
    let state: "open" | "closed" | "aborted" = "open";
    const abort = async (reason?: unknown) => {
      if (state !== "open") return;
      state = "aborted";
      await out.abort(reason).catch(() => {});
      await removeTemp();
    };
    const onAbort = () => void abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const commit = async (): Promise<ObjectInfo> => {
      const parent = await this.#parent(parts, true);
      const name = parts.at(-1)!;
      const existing = await this.#file(key);
      if (mode === "create" && existing) throw new PreconditionFailedError(url, "an object already exists");
      if (typeof mode === "object") {
        if (!existing) throw new PreconditionFailedError(url, "there is no object to replace");
        if (info(key, existing).version !== mode.ifMatch) {
          throw new PreconditionFailedError(url, "it changed since it was read");
        }
      }
      await temp.move(parent, name);
      const file = await this.#file(key);
      if (!file) throw new Error(`Cannot write ${url}: the object vanished right after it was written`);
      return info(key, file);
    };
    return {
      write: async (chunk: Uint8Array) => {
        signal?.throwIfAborted();
        if (state !== "open") throw new TypeError(`Cannot write ${url}: the writer is ${state}`);
        // write() copies the bytes before it resolves, so the caller may reuse chunk afterwards.
        await out.write(chunk);
      },
      close: async () => {
        if (state !== "open") throw new TypeError(`Cannot write ${url}: the writer is ${state}`);
        signal?.removeEventListener("abort", onAbort);
        try {
          signal?.throwIfAborted();
          await out.close();
          state = "closed";
          return await underObjectLock(url, commit);
        } catch (e) {
          if (state === "open") await abort(e);
          else await removeTemp();
          throw e;
        }
      },
      abort,
    };
  }

  /** Deletes an object; an absent one is not an error. */
  async delete(key: string): Promise<void> {
    const parts = checkKey(key, this.url);
    try {
      const dir = await this.#parent(parts, false);
      await underObjectLock(this.url + key, () => dir.removeEntry(parts.at(-1)!));
    } catch (e) {
      if (!isMissing(e)) throw e;
    }
  }

  /** Every object whose key starts with `prefix`, in ascending key order. */
  async *list(prefix = ""): AsyncIterable<ObjectInfo> {
    checkPrefix(prefix, this.url);
    const found: ObjectInfo[] = [];
    const walk = async (dir: DirectoryEntry, at: string): Promise<void> => {
      for await (const [name, entry] of dir.entries()) {
        const key = at + name;
        if (at === "" && name === OPFS_TEMP_DIR) continue;
        if (entry.kind === "directory") {
          // Only descend where keys below can still start with the prefix.
          if (prefix.startsWith(key + "/") || (key + "/").startsWith(prefix)) await walk(entry, key + "/");
        } else if (!name.endsWith(SWAP_SUFFIX) && key.startsWith(prefix)) {
          try {
            found.push(info(key, await entry.getFile()));
          } catch (e) {
            if (!isMissing(e)) throw e; // deleted while listing
          }
        }
      }
    };
    await walk(this.#dir, "");
    found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    yield* found;
  }

  /**
   * Removes what interrupted writes left (`.ckpt-tmp/` files of a closed tab, the browser's
   * `.crswap` entries) and says how many it removed. Only while no write is in progress.
   */
  async sweep(prefix = ""): Promise<number> {
    checkPrefix(prefix, this.url);
    let removed = 0;
    if (prefix === "") {
      try {
        const temp = await this.#dir.getDirectoryHandle(OPFS_TEMP_DIR);
        for await (const [name] of temp.entries()) {
          await temp.removeEntry(name, { recursive: true });
          removed++;
        }
      } catch (e) {
        if (!isMissing(e)) throw e;
      }
    }
    const walk = async (dir: DirectoryEntry, at: string): Promise<void> => {
      for await (const [name, entry] of dir.entries()) {
        if (at === "" && name === OPFS_TEMP_DIR) continue;
        if (entry.kind === "directory") await walk(entry, at + name + "/");
        else if (name.endsWith(SWAP_SUFFIX) && (at + name).startsWith(prefix)) {
          await dir.removeEntry(name).catch(() => {});
          removed++;
        }
      }
    };
    await walk(this.#dir, "");
    return removed;
  }
}
