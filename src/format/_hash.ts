// The one place that chooses the SHA-256 implementation, once, when the module loads:
// - Deno and Node: node:crypto (native, ~1.5 GB/s here);
// - browsers (and any other runtime): hash-wasm's WebAssembly SHA-256 (219-282 MB/s incremental
//   in headless Chromium; crypto.subtle has no incremental mode).
// Both are behind the small Hash interface below, so no Node-only behaviour (Buffer results,
// hash.copy()) reaches the codecs. Both imports are dynamic: a browser never asks for
// node:crypto, and Deno never loads the WebAssembly module.
//
// It also says whether a reader may hash on a second thread ({@linkcode startHashThread}): a
// Worker in Deno (node:crypto inside it). crypto.subtle.digest, which hashes on the runtime's
// thread pool, was measured first and lost: it copies its input, and each copy lands in fresh
// memory, which this VM first-touches at 0.15-0.4 GB/s (a 512 MiB streaming verify took
// 0.85-1.06 s with it against 0.58-0.72 s on one thread, and 50 MiB more peak RSS).

import { type HashThread, WorkerHashThread } from "./_hash_thread.ts";
import { offThreadSha256, offThreadSha256Available } from "../runtime/_sha256_ffi.ts";

export type { HashThread };

/** An incremental SHA-256. */
export interface Hash {
  /** Feeds bytes; returns the same hash. */
  update(data: Uint8Array): Hash;
  /** Ends the hash: its digest as 32 bytes. */
  digest(): Uint8Array;
  /** Ends the hash: its digest as lowercase hex. */
  digest(encoding: "hex"): string;
}

interface NodeHash {
  update(data: Uint8Array): unknown;
  digest(): Uint8Array;
  digest(encoding: "hex"): string;
  copy(): NodeHash;
}

interface Runtime {
  fresh(): Hash;
  peek(hash: Hash): Uint8Array;
}

function isServerRuntime(): boolean {
  const g = globalThis as { Deno?: { version?: { deno?: unknown } }; process?: { versions?: { node?: unknown } } };
  return typeof g.Deno?.version?.deno === "string" || typeof g.process?.versions?.node === "string";
}

async function nodeRuntime(): Promise<Runtime> {
  const { createHash } = await import("node:crypto");
  class Native implements Hash {
    readonly h: NodeHash = createHash("sha256") as unknown as NodeHash;
    update(data: Uint8Array): Hash {
      this.h.update(data);
      return this;
    }
    digest(): Uint8Array;
    digest(encoding: "hex"): string;
    digest(encoding?: "hex"): Uint8Array | string {
      if (encoding === "hex") return this.h.digest("hex");
      const b = this.h.digest();
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    }
  }
  return {
    fresh: () => new Native(),
    peek: (hash) => {
      const b = (hash as Native).h.copy().digest();
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    },
  };
}

async function wasmRuntime(): Promise<Runtime> {
  // Through a module of ours that imports only createSHA256, so a bundle keeps just that part.
  const { createSHA256 } = await import("./_sha256_wasm.ts");
  // One WebAssembly instance serves every hash: each keeps its own saved state, and the instance
  // switches to it (load) only when a different hash than the last one is fed. Feeding is
  // synchronous, so no two hashes can interleave inside one update.
  const wasm = await createSHA256();
  wasm.init();
  const initial = wasm.save();
  let active: Wasm | undefined;
  class Wasm implements Hash {
    state: Uint8Array | undefined = initial;
    activate(): void {
      if (active === this) return;
      if (!this.state) throw new TypeError("Cannot use a SHA-256 hash after its digest was taken");
      if (active) active.state = wasm.save();
      wasm.load(this.state);
      this.state = undefined;
      active = this;
    }
    update(data: Uint8Array): Hash {
      this.activate();
      wasm.update(data);
      return this;
    }
    digest(): Uint8Array;
    digest(encoding: "hex"): string;
    digest(encoding?: "hex"): Uint8Array | string {
      this.activate();
      active = undefined;
      return encoding === "hex" ? wasm.digest("hex") : wasm.digest("binary");
    }
  }
  return {
    fresh: () => new Wasm(),
    peek: (hash) => {
      const h = hash as Wasm;
      h.activate();
      const saved = wasm.save();
      const out = wasm.digest("binary");
      wasm.load(saved);
      return out;
    },
  };
}

const runtime: Runtime = isServerRuntime() ? await nodeRuntime() : await wasmRuntime();

/** A fresh incremental SHA-256. */
export function sha256(): Hash {
  return runtime.fresh();
}

/** The digest of a hash as bytes, without ending the hash (it can go on being updated). */
export function peekDigest(hash: Hash): Uint8Array {
  return runtime.peek(hash);
}

/**
 * Bytes of large tensor bodies a reader hashes on its own before it starts a second thread:
 * starting a Worker blocks the calling thread 50-70 ms here (470 ms under heavy load), which
 * only a large checkpoint wins back.
 */
const HASH_THREAD_AFTER = 32 * 2 ** 20;

let threadAfter = HASH_THREAD_AFTER;
let hashThreadFactory: (() => HashThread | undefined) | undefined;

/** Whether a reader that has read `bytes` of large tensor bodies so far should start a second thread. */
export function hashThreadDue(bytes: number): boolean {
  return bytes >= threadAfter;
}

/**
 * A second thread for SHA-256 where the runtime has Workers and node:crypto (Deno), starting
 * now; `undefined` elsewhere (browsers and Node keep to one thread) or when it cannot start.
 */
export function startHashThread(): HashThread | undefined {
  if (hashThreadFactory) return hashThreadFactory();
  if (!isServerRuntime() || typeof Worker !== "function") return undefined;
  try {
    return new WorkerHashThread(new URL("../runtime/_hash_thread_worker.ts", import.meta.url));
  } catch {
    return undefined;
  }
}

let nativeFactory:
  | ((parts: readonly Uint8Array[] | AsyncIterable<Uint8Array>) => Promise<Uint8Array>)
  | null
  | undefined;

/**
 * SHA-256 of `parts`, one after another, on a thread that needs no start-up (libcrypto through
 * Deno's FFI, where the process was granted it: `../runtime/_sha256_ffi.ts`); `undefined` where there is
 * none. The parts must stay unchanged until the promise settles. An async iterable's parts are
 * made on this thread (decoded, say) while the one before is hashed there.
 */
export function nativeDigest(
  parts: readonly Uint8Array[] | AsyncIterable<Uint8Array>,
): Promise<Uint8Array> | undefined {
  if (nativeFactory !== undefined) return nativeFactory?.(parts);
  return hashThreadFactory ? undefined : offThreadSha256(parts);
}

/** Whether {@linkcode nativeDigest} has a thread here. */
export function hasNativeDigest(): boolean {
  if (nativeFactory !== undefined) return nativeFactory !== null;
  return !hashThreadFactory && offThreadSha256Available();
}

/**
 * Test hook: what {@linkcode nativeDigest} runs (`null`: no such thread, as without FFI);
 * `"restore"` goes back to libcrypto where granted. (While a test injects a Worker hash thread
 * with {@linkcode setHashThreadForTests}, there is no native one unless set here.)
 */
export function setNativeDigestForTests(
  digest: ((parts: readonly Uint8Array[] | AsyncIterable<Uint8Array>) => Promise<Uint8Array>) | null | "restore",
): void {
  nativeFactory = digest === "restore" ? undefined : digest;
}

/**
 * Test hook: what {@linkcode startHashThread} gives (a spy, a failing thread, none) and after how
 * many bytes {@linkcode hashThreadDue} says to start it; `"restore"` undoes both.
 */
export function setHashThreadForTests(
  factory: (() => HashThread | undefined) | "restore",
  after = 0,
): void {
  hashThreadFactory = factory === "restore" ? undefined : factory;
  threadAfter = factory === "restore" ? HASH_THREAD_AFTER : after;
}

let webFactory: ((bytes: Uint8Array) => Promise<Uint8Array>) | null | undefined;

/** The page's WebCrypto, where this runs in one that has it (a secure context); not in Deno or Node. */
function pageSubtle(): SubtleCrypto | undefined {
  if (isServerRuntime()) return undefined;
  const subtle = (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto?.subtle;
  return typeof subtle?.digest === "function" ? subtle : undefined;
}

/**
 * SHA-256 of one contiguous run of bytes by the page's own implementation (WebCrypto's
 * `crypto.subtle.digest`: native, off this thread), for a record whose bytes lie whole in memory:
 * one call instead of the incremental WebAssembly hash (100-320 MB/s). WebCrypto copies its
 * input when called, so the bytes may change as soon as this returns. `undefined` where there
 * is none: in Deno and Node, which hash natively already (node:crypto, and the FFI thread:
 * {@linkcode nativeDigest}), and in a page that is not a secure context.
 */
export function webDigest(bytes: Uint8Array): Promise<Uint8Array> | undefined {
  if (webFactory !== undefined) return webFactory?.(bytes);
  const subtle = pageSubtle();
  return subtle?.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>).then((d) => new Uint8Array(d));
}

/** Whether {@linkcode webDigest} has an implementation here. */
export function hasWebDigest(): boolean {
  if (webFactory !== undefined) return webFactory !== null;
  return pageSubtle() !== undefined;
}

/**
 * Test hook: what {@linkcode webDigest} runs (`null`: none, as outside a page); `"restore"` goes
 * back to the page's WebCrypto where there is one.
 */
export function setWebDigestForTests(digest: ((bytes: Uint8Array) => Promise<Uint8Array>) | null | "restore"): void {
  webFactory = digest === "restore" ? undefined : digest;
}

/** Lowercase hex of bytes. */
export function toHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** Whether two byte arrays hold the same bytes. */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Test hook: a WebAssembly-backed hash factory, whatever the runtime (to test that path under Deno). */
export async function wasmSha256ForTests(): Promise<{ fresh(): Hash; peek(hash: Hash): Uint8Array }> {
  return await wasmRuntime();
}
