// Fresh memory for loaded tensors in 2 MiB pages, as numpy asks for its arrays: on Linux with
// transparent huge pages in `madvise` mode (the common default), memory comes in 4 KiB pages
// unless the program calls `madvise(MADV_HUGEPAGE)` on it, and first-touching a large buffer
// then costs one page fault per 4 KiB instead of one per 2 MiB. JavaScript cannot madvise; Deno's
// FFI can call libc's. It is used only where the process was granted FFI (`--allow-ffi`, or
// `-A`): the permission is queried, never prompted for, and anything else (another OS, no libc,
// a failed call) leaves buffers as the runtime allocates them.

/** Buffers from this size on are advised (numpy's threshold for its arrays). */
export const HUGE_PAGE_MIN = 4 * 2 ** 20;
const HUGE_PAGE = 2 * 2 ** 20;
const MADV_HUGEPAGE = 14;

interface Libc {
  symbols: { madvise(addr: Deno.PointerValue, length: bigint, advice: number): number };
}

let libc: Libc | null | undefined;

function open(): Libc | null {
  try {
    const deno = (globalThis as { Deno?: typeof Deno }).Deno;
    if (deno?.build.os !== "linux" || typeof deno.dlopen !== "function") return null;
    if (deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    return deno.dlopen("libc.so.6", {
      madvise: { parameters: ["pointer", "usize", "i32"], result: "i32" },
    }) as unknown as Libc;
  } catch {
    return null;
  }
}

/**
 * Asks the kernel to back the whole 2 MiB pages inside `bytes` with huge pages, before anything
 * touches them; returns whether it could ask. Buffers under {@linkcode HUGE_PAGE_MIN} are left
 * alone, as are all buffers where FFI is not granted.
 */
export function adviseHugePages(bytes: Uint8Array): boolean {
  if (bytes.byteLength < HUGE_PAGE_MIN) return false;
  libc ??= open();
  if (!libc) return false;
  try {
    const base = Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes));
    const start = (BigInt(base) + BigInt(HUGE_PAGE - 1)) & ~BigInt(HUGE_PAGE - 1);
    const end = (BigInt(base) + BigInt(bytes.byteLength)) & ~BigInt(HUGE_PAGE - 1);
    if (end <= start) return false;
    return libc.symbols.madvise(Deno.UnsafePointer.create(start), end - start, MADV_HUGEPAGE) === 0;
  } catch {
    return false;
  }
}

/** A fresh buffer of `n` bytes, advised to use huge pages where {@linkcode adviseHugePages} can. */
export function freshBuffer(n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  adviseHugePages(bytes);
  return bytes;
}
