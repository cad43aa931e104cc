/**
 * The lock a process holds on a file for as long as it lives, one interface for every runtime.
 *
 * - Deno: an exclusive `flock` on the file, which the kernel drops when the holder dies (even by
 *   SIGKILL).
 * - Node, which has no `flock`: the file's content names its holder (the caller writes its pid
 *   there, as the manager does), so a file that is new (created with `O_EXCL`), empty, or names a
 *   process that is no longer running is free, and one that names a live process, or that this
 *   process holds, is not. A holder killed by SIGKILL leaves its pid, and the next opener takes
 *   over once that pid is gone. Two processes taking over the same stale lock in the same instant
 *   could both succeed: Node gives no atomic way to tell them apart.
 *
 * @example
 * ```ts
 * import { tryLockFile } from "./locks.ts";
 * import { files } from "./files.ts";
 * import assert from "node:assert/strict";
 * const dir = await files.makeTempDir();
 * const held = await tryLockFile(`${dir}/x.lock`);
 * assert.ok(held);
 * assert.equal(await tryLockFile(`${dir}/x.lock`), undefined);
 * held.close();
 * await files.remove(dir, { recursive: true });
 * ```
 *
 * @module
 */
import { type FileHandle, type FileInfo, files, SeekMode, type SeekWhence } from "./files.ts";
import { OsErrors } from "./errors.ts";
import { thisProcess } from "./process.ts";
import { RUNTIME } from "./_which.ts";

/**
 * Opens `path` for reading and writing (creating it) and takes the lock; returns the open file,
 * whose `close()` lets go, or `undefined` when another holder has it.
 */
export async function tryLockFile(path: string): Promise<FileHandle | undefined> {
  return RUNTIME === "deno" ? await denoLock(path) : await pidLock(path);
}

async function denoLock(path: string): Promise<FileHandle | undefined> {
  const file = await Deno.open(path, { read: true, write: true, create: true });
  let kept = false;
  try {
    kept = await file.tryLock(true);
    return kept ? file : undefined;
  } finally {
    if (!kept) file.close();
  }
}

/** The files this process holds by pid, as `dev:ino`. */
const held = new Set<string>();

/**
 * The text at the start of a lock file (its first 4 KiB: a lock file holds one JSON line), read
 * from offset 0; the file's position is left at 0.
 *
 * @example
 * ```ts
 * import { readLockText, tryLockFile } from "./locks.ts";
 * import { files } from "./files.ts";
 * import assert from "node:assert/strict";
 * const dir = await files.makeTempDir();
 * const file = (await tryLockFile(`${dir}/x.lock`))!;
 * await file.write(new TextEncoder().encode('{"pid":1}'));
 * assert.equal(await readLockText(file), '{"pid":1}');
 * file.close();
 * await files.remove(dir, { recursive: true });
 * ```
 */
export async function readLockText(file: FileHandle): Promise<string> {
  await file.seek(0, SeekMode.Start);
  const buf = new Uint8Array(4096);
  let n = 0;
  while (n < buf.byteLength) {
    const r = await file.read(buf.subarray(n));
    if (r === null) break;
    n += r;
  }
  await file.seek(0, SeekMode.Start);
  return new TextDecoder().decode(buf.subarray(0, n));
}

function ownerPid(text: string): number | undefined {
  try {
    const pid = JSON.parse(text)?.pid;
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function pidLock(path: string): Promise<FileHandle | undefined> {
  let file: FileHandle;
  let fresh = true;
  try {
    file = await files.open(path, { read: true, write: true, createNew: true, mode: 0o644 });
  } catch (e) {
    if (!(e instanceof OsErrors.AlreadyExists)) throw e;
    file = await files.open(path, { read: true, write: true });
    fresh = false;
  }
  let kept = false;
  try {
    const st = await file.stat();
    const key = `${st.dev}:${st.ino}`;
    if (held.has(key)) return undefined;
    if (!fresh) {
      const pid = ownerPid(await readLockText(file));
      if (pid !== undefined && pid !== thisProcess.pid && thisProcess.alive(pid) !== false) return undefined;
    }
    held.add(key);
    kept = true;
    return new PidLockedFile(file, key);
  } finally {
    if (!kept) file.close();
  }
}

/** A file held by pid: closing it lets go. */
class PidLockedFile implements FileHandle {
  #file: FileHandle;
  #key: string;

  constructor(file: FileHandle, key: string) {
    this.#file = file;
    this.#key = key;
  }
  read(p: Uint8Array): Promise<number | null> {
    return this.#file.read(p);
  }
  write(p: Uint8Array): Promise<number> {
    return this.#file.write(p);
  }
  seek(offset: number, whence: SeekWhence): Promise<number> {
    return this.#file.seek(offset, whence);
  }
  stat(): Promise<FileInfo> {
    return this.#file.stat();
  }
  truncate(len?: number): Promise<void> {
    return this.#file.truncate(len);
  }
  syncData(): Promise<void> {
    return this.#file.syncData();
  }
  sync(): Promise<void> {
    return this.#file.sync();
  }
  close(): void {
    held.delete(this.#key);
    this.#file.close();
  }
}

/**
 * Runs `fn` holding an exclusive lock on the directory `dir`, across processes of this machine,
 * waiting for it as long as another holder has it.
 *
 * - Deno: `flock` on the directory itself.
 * - Node: a lock file created with `O_EXCL` in the system's temporary directory, named by the
 *   directory's device and inode (never inside `dir`, where a listing would see it), holding the
 *   holder's pid and removed afterwards; one whose pid is no longer running, or left empty for
 *   more than {@linkcode STALE_EMPTY_LOCK_MS}, is stale and removed.
 *
 * @example
 * ```ts
 * import { withDirectoryLock } from "./locks.ts";
 * import { files } from "./files.ts";
 * import assert from "node:assert/strict";
 * const dir = await files.makeTempDir();
 * const order: number[] = [];
 * await Promise.all([1, 2].map((n) => withDirectoryLock(dir, async () => void order.push(n))));
 * assert.equal(order.length, 2);
 * await files.remove(dir, { recursive: true });
 * ```
 */
export async function withDirectoryLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  if (RUNTIME === "deno") {
    const d = await Deno.open(dir, { read: true });
    try {
      await d.lock(true);
      return await fn();
    } finally {
      d.close(); // releases the lock
    }
  }
  const st = await files.stat(dir);
  const { tmpdir } = await import("node:os");
  const lockPath = `${tmpdir()}/ckpt-dirlock-${st.dev}-${st.ino}`;
  const pid = new TextEncoder().encode(JSON.stringify({ pid: thisProcess.pid }));
  for (let wait = 1;; wait = Math.min(wait * 2, 50)) {
    let file: FileHandle;
    try {
      file = await files.open(lockPath, { write: true, createNew: true, mode: 0o644 });
    } catch (e) {
      if (!(e instanceof OsErrors.AlreadyExists)) throw e;
      if (await staleLockFile(lockPath)) await files.remove(lockPath).catch(() => {});
      else await new Promise((r) => setTimeout(r, wait));
      continue;
    }
    try {
      await file.write(pid);
      return await fn();
    } finally {
      file.close();
      await files.remove(lockPath).catch(() => {});
    }
  }
}

/** How long a lock file may stay empty (its creator about to write its pid) before it is stale. */
export const STALE_EMPTY_LOCK_MS = 5000;

async function staleLockFile(path: string): Promise<boolean> {
  try {
    const text = await files.readTextFile(path);
    const pid = ownerPid(text);
    if (pid !== undefined) return thisProcess.alive(pid) === false;
    const st = await files.stat(path);
    return Date.now() - (st.mtime?.getTime() ?? Date.now()) > STALE_EMPTY_LOCK_MS;
  } catch {
    return false; // gone meanwhile: try again
  }
}
