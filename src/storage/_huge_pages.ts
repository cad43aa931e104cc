// Fresh memory for loaded tensors in 2 MiB pages, as numpy asks for its arrays: on Linux with
// transparent huge pages in `madvise` mode (the common default), memory comes in 4 KiB pages
// unless the program calls `madvise(MADV_HUGEPAGE)` on it, and first-touching a large buffer
// then costs one page fault per 4 KiB instead of one per 2 MiB. JavaScript cannot madvise; Deno's
// FFI can call libc's (`_libc.ts`). It is used only where the process was granted FFI
// (`--allow-ffi`, or `-A`): the permission is queried, never prompted for, and anything else
// (another OS, no libc, a failed call) leaves buffers as the runtime allocates them.

import { addressOf, type Libc, libc } from "./_libc.ts";

/** Buffers from this size on are advised (numpy's threshold for its arrays). */
export const HUGE_PAGE_MIN = 4 * 2 ** 20;
const HUGE_PAGE = 2 * 2 ** 20;
const MADV_HUGEPAGE = 14;

/** Start and end (exclusive) of the whole 2 MiB pages inside `length` bytes from `address`. */
function wholePages(address: bigint, length: number): [bigint, bigint] {
  const page = BigInt(HUGE_PAGE);
  const start = (address + page - 1n) / page * page;
  const end = (address + BigInt(length)) / page * page;
  return [start, end];
}

function advise(libc: Libc, start: bigint, end: bigint): boolean {
  if (end <= start) return false;
  return libc.symbols.madvise(Deno.UnsafePointer.create(start), end - start, MADV_HUGEPAGE) === 0;
}

/**
 * Asks the kernel to back the whole 2 MiB pages inside `bytes` with huge pages, before anything
 * touches them; returns whether it could ask. Buffers under {@linkcode HUGE_PAGE_MIN} are left
 * alone, as are all buffers where FFI is not granted.
 */
export function adviseHugePages(bytes: Uint8Array): boolean {
  if (bytes.byteLength < HUGE_PAGE_MIN) return false;
  if (!libc) return false;
  try {
    const [start, end] = wholePages(addressOf(bytes), bytes.byteLength);
    return advise(libc, start, end);
  } catch {
    return false;
  }
}

/**
 * A fresh, zeroed buffer of `n` bytes. Where {@linkcode adviseHugePages} can advise, it is a view
 * that starts on a 2 MiB boundary inside a buffer 2 MiB larger (the room past it is never
 * touched, so it costs address space, not memory), so that every 2 MiB of it can be a huge page:
 * a large allocation starts 4 KiB past a page boundary, which would leave its first and last
 * 2 MiB (1/8 of a 16 MiB tensor) in 4 KiB pages. Elsewhere a plain `Uint8Array`.
 */
export function freshBuffer(n: number): Uint8Array {
  if (n < HUGE_PAGE_MIN) return new Uint8Array(n);
  if (!libc) return new Uint8Array(n);
  try {
    const buffer = new ArrayBuffer(n + HUGE_PAGE);
    const base = addressOf(buffer);
    const [start, end] = wholePages(base, n + HUGE_PAGE);
    if (!advise(libc, start, end)) return new Uint8Array(buffer, 0, n);
    return new Uint8Array(buffer, Number(start - base), n);
  } catch {
    return new Uint8Array(n);
  }
}
