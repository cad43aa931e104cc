// The C library through Deno's FFI, for the platform calls JavaScript has no API for: madvise
// (`_huge_pages.ts`) and direct writes and reads (`_direct_io.ts`). Linux only, where the process was
// granted FFI (`--allow-ffi`, or `-A`): the permission is queried, never prompted for, and
// anything else (another OS, another runtime, no libc) gives `null`, so callers keep to what the
// runtime does by itself.

/** The symbols ckpt calls. */
export interface Libc {
  symbols: {
    madvise(addr: Deno.PointerValue, length: bigint, advice: number): number;
    // open(2) is variadic; without O_CREAT the mode is never read, so two arguments suffice.
    open(path: Uint8Array, flags: number): number;
    /** On Deno's blocking thread pool: the buffer must stay alive and unchanged until it settles. */
    pwrite(fd: number, buf: Uint8Array, n: bigint, offset: bigint): Promise<number | bigint>;
    /** On Deno's blocking thread pool: the buffer must stay alive and unread until it settles. */
    pread(fd: number, buf: Uint8Array, n: bigint, offset: bigint): Promise<number | bigint>;
    close(fd: number): number;
  };
}

function load(): Libc | null {
  try {
    const deno = (globalThis as { Deno?: typeof Deno }).Deno;
    if (deno?.build.os !== "linux" || typeof deno.dlopen !== "function") return null;
    if (deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    return deno.dlopen("libc.so.6", {
      madvise: { parameters: ["pointer", "usize", "i32"], result: "i32" },
      open: { parameters: ["buffer", "i32"], result: "i32" },
      pwrite: { parameters: ["i32", "buffer", "usize", "i64"], result: "isize", nonblocking: true },
      pread: { parameters: ["i32", "buffer", "usize", "i64"], result: "isize", nonblocking: true },
      close: { parameters: ["i32"], result: "i32" },
    }) as unknown as Libc;
  } catch {
    return null;
  }
}

/**
 * libc where FFI is granted on Linux, else `null`. Opened as the module loads (see
 * src/runtime/_sha256_ffi.ts: a library first opened inside a `deno test` test can be reported
 * there as a leak).
 */
export const libc: Libc | null = load();

/** The address of the first byte of `bytes` (throws where the runtime cannot tell). */
export function addressOf(bytes: Uint8Array | ArrayBuffer): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes)));
}
