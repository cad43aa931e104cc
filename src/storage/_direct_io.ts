// Writes that bypass the page cache (`O_DIRECT`), for the staging buffers of a save to a local
// file. A buffered write copies every byte into page-cache pages the kernel first has to find and
// zero (fresh ones, for a new file), then writes them back; a direct write hands the buffer to the
// device as it is. 1 GiB with `dd bs=16M conv=fdatasync` on this project's VM, alternating: 0.63-
// 0.69 s with `oflag=direct` (0.07-0.12 s of system time) against 0.66-1.79 s (0.21-1.31 s)
// through the page cache. A save then leaves its cores to the hash and to training, and does not
// push the training process's own memory out of the page cache for a file nobody reads until a
// restart (as PyTorch's and Orbax's large-checkpoint writers do, by default or as an option).
//
// Linux only (x86_64 and aarch64), through libc where the process was granted FFI (`_libc.ts`:
// the permission is queried, never prompted for). A direct write needs its buffer, its length and
// its file offset aligned to the device's logical block size; callers write whole multiples of
// {@linkcode DIRECT_ALIGN} from buffers that start on one (the staging buffers, 2 MiB-aligned in
// huge pages), and the rest of a file through their ordinary handle. The calls run on Deno's
// blocking thread pool (`nonblocking`), as the runtime's own file writes do, so the buffer must
// stay alive and unchanged until the promise settles: only ckpt's own staging buffers are passed.
//
// Reads around the page cache too, for a file read once from start to end into buffers of the
// reader's own (a committed checkpoint replicated to a mirror): a file a save wrote directly is in
// no page-cache page, so a buffered read has the kernel allocate, fill and account a page-cache
// page for each 4 KiB and then copy it out; a direct read has the device fill the buffer. 64 MiB
// just saved, `dd bs=8M` on this project's VM: 0.02 s of system time buffered, 0.01 s with
// `iflag=direct`, and in a replication's profile the buffered read's copy and page-cache upkeep
// took more CPU than its SHA-256.

import { addressOf, type Libc, libc } from "./_libc.ts";
import { filesReplaced } from "../runtime/files.ts";

/** Alignment of every direct write's buffer, length and offset (4 KiB: any device's logical block). */
export const DIRECT_ALIGN = 4096;

// O_DIRECT differs by architecture; O_RDONLY, O_WRONLY and O_CLOEXEC do not.
const O_RDONLY = 0o0;
const O_WRONLY = 0o1;
const O_CLOEXEC = 0o2000000;
const O_DIRECT: Partial<Record<string, number>> = { x86_64: 0o40000, aarch64: 0o200000 };

/** This architecture's O_DIRECT (`undefined` on one ckpt does not know). */
const DIRECT_FLAG = O_DIRECT[globalThis.Deno?.build.arch ?? ""];

/** Whether `bytes` starts on a {@linkcode DIRECT_ALIGN} boundary (where FFI can tell). */
function aligned(bytes: Uint8Array): boolean {
  try {
    return addressOf(bytes) % BigInt(DIRECT_ALIGN) === 0n;
  } catch {
    return false;
  }
}

/** A second descriptor on an existing file, opened for direct writes. */
export interface DirectFile {
  /** Whether direct writes may come from `buffer` (it starts on a {@linkcode DIRECT_ALIGN} boundary). */
  accepts(buffer: Uint8Array): boolean;
  /**
   * Writes `bytes` (a multiple of {@linkcode DIRECT_ALIGN}, from an aligned buffer) at `offset`
   * (aligned too); resolves to how many bytes were written, or -1 where the system refused (the
   * caller then writes them through its ordinary handle, which reports the error if it is one).
   */
  write(bytes: Uint8Array, offset: number): Promise<number>;
  /** Closes the descriptor; call once, after the last write has settled. */
  close(): void;
}

/**
 * Opens the file at `path` (which must exist) for direct writes; `undefined` where FFI is not
 * granted, on another OS or architecture, where the file system refuses `O_DIRECT` (tmpfs
 * before Linux 6.6, some FUSE and overlay mounts), or while a test has replaced the file system
 * calls (`replaceFiles`: every write then goes through them, where it can be seen).
 */
export function openDirect(path: string): DirectFile | undefined {
  const fd = openFd(path, O_WRONLY);
  if (fd === undefined) return undefined;
  const { lib, close, closed } = descriptor(fd);
  return {
    accepts: aligned,
    async write(bytes, offset) {
      if (closed()) return -1;
      const n = await lib.symbols.pwrite(fd, bytes, BigInt(bytes.byteLength), BigInt(offset));
      return Number(n);
    },
    close,
  };
}

/**
 * A fresh, zeroed buffer of `n` bytes that starts on a {@linkcode DIRECT_ALIGN} boundary, for
 * direct reads: a view into a buffer one block larger, where FFI can tell addresses; elsewhere
 * a plain `Uint8Array` (there are no direct reads there).
 */
export function alignedBuffer(n: number): Uint8Array {
  if (!libc) return new Uint8Array(n);
  try {
    const buffer = new ArrayBuffer(n + DIRECT_ALIGN);
    const skip = Number((BigInt(DIRECT_ALIGN) - addressOf(buffer) % BigInt(DIRECT_ALIGN)) % BigInt(DIRECT_ALIGN));
    return new Uint8Array(buffer, skip, n);
  } catch {
    return new Uint8Array(n);
  }
}

/** A second descriptor on an existing file, opened for direct reads. */
export interface DirectReader {
  /** Whether direct reads may go into `buffer` (it starts on a {@linkcode DIRECT_ALIGN} boundary). */
  accepts(buffer: Uint8Array): boolean;
  /**
   * Reads into `into` (a multiple of {@linkcode DIRECT_ALIGN} bytes, an aligned buffer) from
   * `offset` (aligned too); resolves to how many bytes it read, fewer only where the file ends,
   * or -1 where the system refused (the caller then reads them through its ordinary handle, which
   * reports the error if it is one).
   */
  read(into: Uint8Array, offset: number): Promise<number>;
  /** Closes the descriptor; call once, after the last read has settled. */
  close(): void;
}

/**
 * Opens the file at `path` for direct reads; `undefined` where {@linkcode openDirect} would give
 * none (no FFI, another platform, a file system without `O_DIRECT`, replaced file system calls)
 * or the file cannot be opened (the caller's ordinary handle says why).
 */
export function openDirectRead(path: string): DirectReader | undefined {
  const fd = openFd(path, O_RDONLY);
  if (fd === undefined) return undefined;
  const { lib, close, closed } = descriptor(fd);
  return {
    accepts: aligned,
    async read(into, offset) {
      let got = 0;
      // A regular file reads short only at its end; a count off the block grid is that end.
      while (got < into.byteLength) {
        if (closed()) return -1;
        const part = into.subarray(got);
        const n = Number(await lib.symbols.pread(fd, part, BigInt(part.byteLength), BigInt(offset + got)));
        if (n < 0) return -1;
        got += n;
        if (n === 0 || n % DIRECT_ALIGN !== 0) break;
      }
      return got;
    },
    close,
  };
}

/** A descriptor on the existing file `path` with `O_DIRECT` and `flags`; `undefined` where there is none. */
function openFd(path: string, flags: number): number | undefined {
  if (!libc || DIRECT_FLAG === undefined || filesReplaced()) return undefined;
  const cpath = new TextEncoder().encode(path + "\0");
  if (cpath.indexOf(0) !== cpath.length - 1) return undefined;
  try {
    const fd = libc.symbols.open(cpath, flags | O_CLOEXEC | DIRECT_FLAG);
    return fd < 0 ? undefined : fd;
  } catch {
    return undefined;
  }
}

/** Closing `fd` once (a second close is harmless), and whether it is closed. */
function descriptor(fd: number): { lib: Libc; close(): void; closed(): boolean } {
  const lib = libc!;
  let closed = false;
  return {
    lib,
    close() {
      if (closed) return;
      closed = true;
      lib.symbols.close(fd);
    },
    closed: () => closed,
  };
}
