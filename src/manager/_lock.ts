// The directory lock: a file `ckpt.lock` holding the owner's pid, held with an exclusive flock for
// as long as the manager is open. The kernel drops the flock when the owner dies (even by
// SIGKILL), so a lock file whose flock is free is stale: it is taken over with a warning that
// names the dead owner. The pid in the file is what the error shown to a second manager names.

import { join } from "node:path";
import { OsErrors } from "../runtime/errors.ts";
import { type FileHandle, files, SeekMode } from "../runtime/files.ts";
import { thisProcess } from "../runtime/process.ts";
import { readLockText, tryLockFile } from "../runtime/locks.ts";

/** The lock file's name inside a checkpoint directory. */
export const LOCK_FILE = "ckpt.lock";

/** What the lock file says about its owner. */
export interface LockOwner {
  pid: number;
  hostname?: string;
  since?: string;
}

/**
 * Thrown when a checkpoint directory is already open for writing by another manager, in this
 * process or another one.
 *
 * @example
 * ```ts
 * import { CheckpointManager, DirectoryLockedError } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const first = await CheckpointManager.open(dir);
 * await assert.rejects(() => CheckpointManager.open(dir), DirectoryLockedError);
 * await first.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class DirectoryLockedError extends Error {
  /** The lock file. */
  readonly lockPath: string;
  /** The pid recorded by the owner, when the lock file could be read. */
  readonly pid: number | undefined;

  /**
   * An error naming the lock file and its owner.
   *
   * @param lockPath The lock file.
   * @param owner What the lock file says about its owner, when readable.
   */
  constructor(lockPath: string, owner: LockOwner | undefined) {
    const who = owner ? `pid ${owner.pid}${owner.hostname ? ` on ${owner.hostname}` : ""}` : "an unknown process";
    super(
      `Cannot open checkpoint directory for writing: it is locked by ${who} (lock file ${lockPath}); ` +
        `close that manager or open this one with readOnly: true`,
    );
    this.name = "DirectoryLockedError";
    this.lockPath = lockPath;
    this.pid = owner?.pid;
  }
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const v = JSON.parse(text);
    if (typeof v === "object" && v !== null && Number.isSafeInteger(v.pid) && v.pid > 0) {
      return {
        pid: v.pid,
        ...(typeof v.hostname === "string" ? { hostname: v.hostname } : {}),
        ...(typeof v.since === "string" ? { since: v.since } : {}),
      };
    }
  } catch { /* not ours, or half written by an owner that died */ }
  return undefined;
}

/**
 * Whether a process with this pid runs on this machine: `true`, `false`, or `undefined` when it
 * cannot be told.
 */
export function processAlive(pid: number): boolean | undefined {
  return thisProcess.alive(pid);
}

/** An acquired directory lock; `release()` removes the lock file and lets go of it. */
export class DirectoryLock {
  #file: FileHandle | undefined;
  #path: string;

  private constructor(file: FileHandle, path: string) {
    this.#file = file;
    this.#path = path;
  }

  /** The lock file. */
  get path(): string {
    return this.#path;
  }

  /**
   * Takes the lock of `dir`, or throws {@linkcode DirectoryLockedError} when a live manager holds
   * it. A stale lock file (its owner died) is taken over, and `onWarning` told whose it was.
   */
  static async acquire(dir: string, onWarning: (message: string) => void): Promise<DirectoryLock> {
    const path = join(dir, LOCK_FILE);
    for (let attempt = 0; attempt < 16; attempt++) {
      const file = await tryLockFile(path);
      if (!file) throw new DirectoryLockedError(path, parseOwner(await files.readTextFile(path).catch(() => "")));
      let kept = false;
      try {
        // The holder we waited on may have removed the file before we got its flock: then our
        // lock is on an unlinked file, and we must try again on the new one.
        const [held, now] = [await file.stat(), await files.stat(path).catch(() => undefined)];
        if (!now || now.ino !== held.ino || now.dev !== held.dev) continue;
        const stale = parseOwner(await readLockText(file));
        if (stale || held.size > 0) {
          const alive = stale ? processAlive(stale.pid) : undefined;
          onWarning(
            `Taking over stale lock ${path}: ${
              stale ? `pid ${stale.pid}${stale.since ? ` (since ${stale.since})` : ""}` : "an unknown process"
            } ${alive === false ? "is no longer running" : "no longer holds it"}; ` +
              "its interrupted work is cleaned up",
          );
        }
        const me: LockOwner = { pid: thisProcess.pid, since: new Date().toISOString() };
        const host = thisProcess.hostname();
        if (host !== undefined) me.hostname = host;
        await file.truncate(0);
        await file.seek(0, SeekMode.Start);
        const bytes = new TextEncoder().encode(JSON.stringify(me) + "\n");
        let off = 0;
        while (off < bytes.byteLength) off += await file.write(bytes.subarray(off));
        await file.syncData();
        kept = true;
        return new DirectoryLock(file, path);
      } finally {
        if (!kept) file.close();
      }
    }
    throw new DirectoryLockedError(path, undefined);
  }

  /** Removes the lock file, then lets go of the lock. Safe to call twice. */
  async release(): Promise<void> {
    const file = this.#file;
    if (!file) return;
    this.#file = undefined;
    try {
      await files.remove(this.#path).catch((e) => {
        if (!(e instanceof OsErrors.NotFound)) throw e;
      });
    } finally {
      file.close();
    }
  }
}
