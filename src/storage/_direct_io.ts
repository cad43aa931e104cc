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

import { addressOf, type Libc, libc } from "./_libc.ts";
import { filesReplaced } from "../runtime/files.ts";

/** Alignment of every direct write's buffer, length and offset (4 KiB: any device's logical block). */
export const DIRECT_ALIGN = 4096;

// O_DIRECT differs by architecture; O_WRONLY and O_CLOEXEC do not.
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
  if (!libc || DIRECT_FLAG === undefined || filesReplaced()) return undefined;
  const lib: Libc = libc;
  const cpath = new TextEncoder().encode(path + "\0");
  if (cpath.indexOf(0) !== cpath.length - 1) return undefined;
  let fd: number;
  try {
    fd = lib.symbols.open(cpath, O_WRONLY | O_CLOEXEC | DIRECT_FLAG);
  } catch {
    return undefined;
  }
  if (fd < 0) return undefined;
  let closed = false;
  return {
    accepts: aligned,
    async write(bytes, offset) {
      if (closed) return -1;
      const n = await lib.symbols.pwrite(fd, bytes, BigInt(bytes.byteLength), BigInt(offset));
      return Number(n);
    },
    close() {
      if (closed) return;
      closed = true;
      lib.symbols.close(fd);
    },
  };
}
