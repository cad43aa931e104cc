// SHA-256 on a second thread without a Worker: the system's libcrypto (OpenSSL 3) called through
// Deno's FFI, where the process was granted it (`--allow-ffi`, or `-A`). A `nonblocking` FFI call
// runs on Deno's blocking thread pool and returns a promise, so a large update hashes on another
// core while this thread goes on (decoding the next tensor, say), with no Worker to start (a
// Worker blocks its creator 18-48 ms here and is up only after 85-140 ms). Same digest, same
// speed as node:crypto (which is OpenSSL too): 32 MiB in 20.5 ms here on either, and two 32 MiB
// hashes at once, one each way, in 21 ms. The permission is queried, never prompted for; where
// FFI is not granted, or there is no libcrypto.so.3 (another OS, a musl system without it), there
// is no such thread and callers hash on their own (`offThreadSha256` gives `undefined`).
//
// A buffer being hashed there must stay alive and unchanged until the promise settles: callers
// pass only buffers they own (decoded tensors before they are handed out) and keep the promise,
// which holds the buffers, until it settles.

/** Updates below this size are hashed at once on the calling thread (a call to the pool costs ~30 µs). */
const SYNC_MAX = 64 * 1024;
const DIGEST_BYTES = 32;

interface Libcrypto {
  symbols: {
    EVP_sha256(): Deno.PointerValue;
    EVP_MD_CTX_new(): Deno.PointerValue;
    EVP_MD_CTX_free(ctx: Deno.PointerValue): void;
    EVP_DigestInit_ex(ctx: Deno.PointerValue, type: Deno.PointerValue, engine: Deno.PointerValue): number;
    EVP_DigestUpdate(ctx: Deno.PointerValue, data: Uint8Array, n: bigint): number;
    EVP_DigestUpdatePooled(ctx: Deno.PointerValue, data: Uint8Array, n: bigint): Promise<number>;
    EVP_DigestFinal_ex(ctx: Deno.PointerValue, md: Uint8Array, size: Deno.PointerValue): number;
  };
}

const SYMBOLS = {
  EVP_sha256: { parameters: [], result: "pointer" },
  EVP_MD_CTX_new: { parameters: [], result: "pointer" },
  EVP_MD_CTX_free: { parameters: ["pointer"], result: "void" },
  EVP_DigestInit_ex: { parameters: ["pointer", "pointer", "pointer"], result: "i32" },
  EVP_DigestUpdate: { parameters: ["pointer", "buffer", "usize"], result: "i32" },
  EVP_DigestUpdatePooled: {
    name: "EVP_DigestUpdate",
    parameters: ["pointer", "buffer", "usize"],
    result: "i32",
    nonblocking: true,
  },
  EVP_DigestFinal_ex: { parameters: ["pointer", "buffer", "pointer"], result: "i32" },
} as const;

function open(): { crypto: Libcrypto; sha256: Deno.PointerValue } | null {
  try {
    const deno = (globalThis as { Deno?: typeof Deno }).Deno;
    if (deno?.build.os !== "linux" || typeof deno.dlopen !== "function") return null;
    if (deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    const crypto = deno.dlopen("libcrypto.so.3", SYMBOLS) as unknown as Libcrypto;
    const sha256 = crypto.symbols.EVP_sha256();
    if (sha256 === null) return null;
    return { crypto, sha256 };
  } catch {
    return null;
  }
}

// Opened as the module loads (where FFI is granted; it stays open for the process): a library
// first opened inside a `deno test` test can be reported there as a leak by the resource
// sanitizer (tests/format/sha256_ffi_test.ts).
const lib = open();

/** Whether {@linkcode offThreadSha256} has a thread here (FFI granted, libcrypto found). */
export function offThreadSha256Available(): boolean {
  return lib !== null;
}

/**
 * SHA-256 of `parts` one after another, the large ones hashed on Deno's blocking thread pool;
 * `undefined` where that thread is not available (see the module comment). The parts must not
 * change until the promise settles. Parts from an async iterable (a decoder's, say) are asked for
 * one ahead: the next is made on this thread while the one before it is hashed on the pool.
 * Rejects only if libcrypto reports a failure, or with what the iterable throws.
 */
export function offThreadSha256(
  parts: readonly Uint8Array[] | AsyncIterable<Uint8Array>,
): Promise<Uint8Array> | undefined {
  if (!lib) return undefined;
  return digest(lib.crypto, lib.sha256, parts);
}

async function digest(
  crypto: Libcrypto,
  sha256: Deno.PointerValue,
  parts: readonly Uint8Array[] | AsyncIterable<Uint8Array>,
): Promise<Uint8Array> {
  const s = crypto.symbols;
  const ctx = s.EVP_MD_CTX_new();
  if (ctx === null) throw new Error("libcrypto could not allocate a SHA-256 context");
  const update = async (part: Uint8Array): Promise<void> => {
    const n = BigInt(part.byteLength);
    const ok = part.byteLength <= SYNC_MAX
      ? s.EVP_DigestUpdate(ctx, part, n)
      : await s.EVP_DigestUpdatePooled(ctx, part, n);
    if (ok !== 1) throw new Error("libcrypto failed a SHA-256 update");
  };
  try {
    if (s.EVP_DigestInit_ex(ctx, sha256, null) !== 1) throw new Error("libcrypto could not start a SHA-256");
    if (Symbol.asyncIterator in parts) {
      const it = parts[Symbol.asyncIterator]();
      let next = it.next();
      for (;;) {
        const got = await next;
        if (got.done) break;
        const hashing = update(got.value);
        next = it.next(); // runs on this thread now, while the pool hashes
        next.catch(() => {}); // awaited after the update, which must end first either way
        await hashing;
      }
    } else {
      for (const part of parts) await update(part);
    }
    const out = new Uint8Array(DIGEST_BYTES);
    if (s.EVP_DigestFinal_ex(ctx, out, null) !== 1) throw new Error("libcrypto could not end a SHA-256");
    return out;
  } finally {
    s.EVP_MD_CTX_free(ctx);
  }
}
