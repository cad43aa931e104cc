/**
 * The file system as ckpt uses it, one interface for every runtime: Deno's own file API in Deno,
 * `node:fs` in Node (./_files_node.ts), and in a browser an object whose every call is a
 * TypeError naming the path (a page has no file paths: it uses a Blob, a stream or a store).
 * Chosen once, when the module loads. The handle and status types are the part of Deno's
 * `Deno.FsFile` and `Deno.FileInfo` that ckpt needs, so Deno's objects are used as they are.
 *
 * Errors are {@linkcode OsErrors} in every runtime (`NotFound`, `AlreadyExists`, ...).
 *
 * @example
 * ```ts
 * import { files, SeekMode } from "./files.ts";
 * import assert from "node:assert/strict";
 *
 * const dir = await files.makeTempDir();
 * const file = await files.open(`${dir}/a.bin`, { write: true, read: true, createNew: true, mode: 0o644 });
 * await file.write(new Uint8Array([1, 2, 3]));
 * await file.syncData();
 * await file.seek(1, SeekMode.Start);
 * const buf = new Uint8Array(8);
 * assert.equal(await file.read(buf), 2);
 * file.close();
 * assert.equal((await files.stat(`${dir}/a.bin`)).size, 3);
 * await files.remove(dir, { recursive: true });
 * ```
 *
 * @module
 */
import { RUNTIME } from "./_which.ts";

/** Where a seek counts from (the values of Deno's `Deno.SeekMode` and of `lseek`'s `whence`). */
export const SeekMode = Object.freeze({ Start: 0, Current: 1, End: 2 } as const);

/** Where a seek counts from: 0 the start, 1 the current position, 2 the end ({@linkcode SeekMode}'s values). */
export type SeekWhence = 0 | 1 | 2;

/** A file's status: the part of `Deno.FileInfo` ckpt reads. */
export interface FileInfo {
  /** Whether it is a regular file. */
  isFile: boolean;
  /** Whether it is a directory. */
  isDirectory: boolean;
  /** Whether it is a symbolic link (only from `lstat`). */
  isSymlink: boolean;
  /** Its size in bytes. */
  size: number;
  /** When its content last changed (`null` where the platform does not say). */
  mtime: Date | null;
  /** The inode number (`null` where the platform has none). */
  ino: number | null;
  /** The device the file is on (`null` where the platform has none). */
  dev: number | null;
}

/** An entry of a directory listing. */
export interface DirEntry {
  name: string;
  isFile: boolean;
  isDirectory: boolean;
  isSymlink: boolean;
}

/** How to open a file: the options of `Deno.open`, the same words as `open(2)`'s flags. */
export interface OpenOptions {
  read?: boolean;
  write?: boolean;
  append?: boolean;
  truncate?: boolean;
  create?: boolean;
  /** Create it, failing with `AlreadyExists` when it exists (`O_CREAT | O_EXCL`). */
  createNew?: boolean;
  /** Permission bits of a created file. */
  mode?: number;
}

/** An open file: the part of `Deno.FsFile` ckpt uses. */
export interface FileHandle {
  /** Reads into `p` at the file position; the count, or `null` at the end of the file. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes (part of) `p` at the file position; how many bytes were written. */
  write(p: Uint8Array): Promise<number>;
  /** Moves the file position; returns the new one. */
  seek(offset: number, whence: SeekWhence): Promise<number>;
  /** The file's status. */
  stat(): Promise<FileInfo>;
  /** Cuts (or extends) the file to `len` bytes (0 when left out). */
  truncate(len?: number): Promise<void>;
  /** Flushes the file's data to the disk (`fdatasync`). */
  syncData(): Promise<void>;
  /** Flushes the file's data and metadata to the disk (`fsync`). */
  sync(): Promise<void>;
  /** Closes the file. */
  close(): void;
}

/** A file open for blocking reads (a worker thread's, where blocking costs nobody). */
export interface SyncFileHandle {
  /** Reads into `p` at the file position; the count, or `null` at the end of the file. */
  readSync(p: Uint8Array): number | null;
  /** Moves the file position; returns the new one. */
  seekSync(offset: number, whence: SeekWhence): number;
  /** The file's status. */
  statSync(): FileInfo;
  /** Closes the file. */
  close(): void;
}

/** The file system calls ckpt makes: the part of Deno's API it uses, with the same signatures. */
export interface Files {
  open(path: string, options?: OpenOptions): Promise<FileHandle>;
  /** Opens a file for blocking reads. */
  openSync(path: string, options: { read: true }): SyncFileHandle;
  stat(path: string): Promise<FileInfo>;
  lstat(path: string): Promise<FileInfo>;
  rename(from: string, to: string): Promise<void>;
  /** Makes a hard link `to` naming `from`'s file; `AlreadyExists` when `to` exists. */
  link(from: string, to: string): Promise<void>;
  remove(path: string, options?: { recursive?: boolean }): Promise<void>;
  mkdir(path: string, options?: { recursive?: boolean; mode?: number }): Promise<void>;
  makeTempDir(options?: { dir?: string; prefix?: string; suffix?: string }): Promise<string>;
  readDir(path: string): AsyncIterable<DirEntry>;
  realPath(path: string): Promise<string>;
  readFile(path: string): Promise<Uint8Array>;
  readTextFile(path: string): Promise<string>;
  writeFile(path: string, data: Uint8Array, options?: { mode?: number; createNew?: boolean }): Promise<void>;
  writeTextFile(path: string, data: string, options?: { mode?: number; createNew?: boolean }): Promise<void>;
  truncate(path: string, len?: number): Promise<void>;
  chmod(path: string, mode: number): Promise<void>;
}

/**
 * Every entry of the directory `path`, in the order the system lists them (`Array.fromAsync`
 * over `readDir`, which Node 20 lacks).
 *
 * @example
 * ```ts
 * import { files, readDirAll } from "./files.ts";
 * import assert from "node:assert/strict";
 * const dir = await files.makeTempDir();
 * await files.writeTextFile(`${dir}/a`, "x");
 * assert.deepEqual((await readDirAll(dir)).map((e) => e.name), ["a"]);
 * await files.remove(dir, { recursive: true });
 * ```
 */
export async function readDirAll(path: string): Promise<DirEntry[]> {
  const out: DirEntry[] = [];
  for await (const e of files.readDir(path)) out.push(e);
  return out;
}

/** Whether this runtime has file paths (Deno and Node do; browsers do not). */
export const HAS_FILES: boolean = RUNTIME !== "browser";

/**
 * Throws a TypeError unless file paths can be opened here.
 *
 * @example
 * ```ts
 * import { requireFiles } from "./files.ts";
 * requireFiles("/tmp/x.ckpt", "load"); // Deno and Node have files: no error
 * ```
 */
export function requireFiles(path: string, verb: string): void {
  if (HAS_FILES) return;
  throw new TypeError(
    `Cannot ${verb} ${
      JSON.stringify(path)
    }: file paths need Deno or Node; here use a Blob, a Response, a stream, bytes or an ObjectStore`,
  );
}

function browserFiles(): Files {
  const refuse = (path: unknown): never => {
    requireFiles(String(path), "open");
    throw new TypeError("unreachable");
  };
  return new Proxy({} as Files, {
    get: (_t, name) => name === "then" ? undefined : (path: unknown) => new Promise<never>(() => refuse(path)),
  });
}

/** Deno's own API, checked against {@linkcode Files} here (it is used as it is). */
function denoFiles(): Files {
  return Deno;
}

/** The calls of {@linkcode Files}, each a property of {@linkcode files} that {@linkcode replaceFiles} swaps. */
const CALLS = [
  "open",
  "openSync",
  "stat",
  "lstat",
  "rename",
  "link",
  "remove",
  "mkdir",
  "makeTempDir",
  "readDir",
  "realPath",
  "readFile",
  "readTextFile",
  "writeFile",
  "writeTextFile",
  "truncate",
  "chmod",
] as const satisfies readonly (keyof Files)[];

/** The runtime's own file system. */
const native: Files = RUNTIME === "deno"
  ? denoFiles()
  : RUNTIME === "node"
  ? (await import("./_files_node.ts")).nodeFiles
  : browserFiles();

function callsOf(from: Files): Files {
  const calls: Record<string, unknown> = {};
  for (const name of CALLS) calls[name] = (from[name] as (...args: never[]) => unknown).bind(from);
  return calls as unknown as Files;
}

/**
 * The file system of this runtime: an object of its own whose calls are the runtime's (bound
 * once, so a call costs what the runtime's does), which {@linkcode replaceFiles} can swap.
 */
export const files: Files = callsOf(native);

const nativeOpen = files.open;

/**
 * Sends every call through {@linkcode files} to `replacement` until the returned function is
 * called, which puts the runtime's own calls back. For tests that record or fail file system
 * calls (the crash-state enumerator records every call a save makes). While replaced, writes
 * that would go around the page cache go through `replacement` too (see
 * {@linkcode filesReplaced}).
 *
 * @example
 * ```ts
 * import { files, replaceFiles } from "./files.ts";
 * import assert from "node:assert/strict";
 * const renamed: string[] = [];
 * const restore = replaceFiles({ ...files, rename: async (from, to) => void renamed.push(`${from}>${to}`) });
 * try {
 *   await files.rename("/nowhere/a", "/nowhere/b");
 * } finally {
 *   restore();
 * }
 * assert.deepEqual(renamed, ["/nowhere/a>/nowhere/b"]);
 * ```
 */
export function replaceFiles(replacement: Files): () => void {
  const before = callsOf(files);
  Object.assign(files, callsOf(replacement));
  return () => void Object.assign(files, before);
}

/**
 * Whether {@linkcode replaceFiles} has replaced the runtime's calls: code that would reach the
 * file system some other way (direct writes through FFI) then goes through {@linkcode files}.
 *
 * @example
 * ```ts
 * import { filesReplaced } from "./files.ts";
 * import assert from "node:assert/strict";
 * assert.equal(filesReplaced(), false);
 * ```
 */
export function filesReplaced(): boolean {
  return files.open !== nativeOpen;
}
