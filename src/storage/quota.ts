/**
 * The browser's storage quota, for checkpoints in the Origin Private File System: the error a
 * save gets when the origin's quota cannot hold it, the estimate it is checked against, and the
 * request that asks the browser not to evict the origin's data.
 *
 * A save to OPFS ({@linkcode OpfsStore}, and so a manager or a background writer on `opfs:`)
 * compares the bytes it needs with `navigator.storage.estimate()` before it writes anything and
 * refuses early with a {@linkcode StorageFullError}; a write that still hits the browser's
 * `QuotaExceededError` fails with the same error, after its partial file is removed. Either way
 * what was saved before is untouched. Without {@linkcode persistStorage}, the browser may evict
 * the whole origin's storage (every checkpoint at once) under storage pressure: see
 * docs/browser.md.
 *
 * @example
 * ```ts
 * import { StorageFullError } from "./quota.ts";
 * import assert from "node:assert/strict";
 * const e = new StorageFullError("opfs:///runs/a.ckpt", 3000, { estimate: { quota: 5000, usage: 4000 } });
 * assert.ok(e instanceof RangeError);
 * assert.equal(e.message, "Cannot write opfs:///runs/a.ckpt: the origin's storage quota is full: 3000 bytes needed, 1000 free (4000 of 5000 bytes used)");
 * ```
 *
 * @module
 */

/** What `navigator.storage.estimate()` reports, in bytes. */
export interface StorageEstimate {
  /** The origin's quota. */
  quota: number;
  /** What the origin uses now. */
  usage: number;
}

/**
 * A write the origin's storage quota cannot hold: refused before it started, or stopped by the
 * browser's `QuotaExceededError` (then `cause`). Nothing was left behind and nothing saved before
 * was touched.
 *
 * @example
 * ```ts
 * import { StorageFullError } from "./quota.ts";
 * import assert from "node:assert/strict";
 * const e = new StorageFullError("opfs:///a.ckpt", 10, { written: 4, cause: new Error("QuotaExceededError") });
 * assert.equal(e.needed, 10);
 * assert.equal(e.message, "Cannot write opfs:///a.ckpt: the origin's storage quota is full: the browser stopped the write after 4 bytes; 10 bytes needed");
 * ```
 */
export class StorageFullError extends RangeError {
  /** The object that could not be written. */
  readonly url: string;
  /** Bytes the write needed (at least this many, when it was stopped part way). */
  readonly needed: number;
  /** The origin's quota in bytes, when the browser reports it. */
  readonly quota: number | undefined;
  /** The origin's usage in bytes when the write was refused, when the browser reports it. */
  readonly usage: number | undefined;
  /** Bytes written before the browser stopped the write; `undefined` for a write refused before it began. */
  readonly written: number | undefined;

  /**
   * An error for a write of `needed` bytes to `url` that the quota could not hold.
   *
   * @param url the object that could not be written
   * @param needed bytes the write needed
   * @param options the origin's quota and usage when known; for a write the browser stopped, its
   *   error and the bytes written by then
   */
  constructor(url: string, needed: number, options: StorageFullOptions = {}) {
    const { estimate, cause, written } = options;
    const used = estimate ? `${estimate.usage} of ${estimate.quota} bytes used` : "";
    const where = written !== undefined
      ? `the browser stopped the write after ${written} bytes; ${needed} bytes needed` +
        (estimate ? `, and navigator.storage.estimate() shows ${used}` : "")
      : estimate
      ? `${needed} bytes needed, ${Math.max(0, estimate.quota - estimate.usage)} free (${used})`
      : `${needed} bytes needed`;
    super(`Cannot write ${url}: the origin's storage quota is full: ${where}`, cause === undefined ? {} : { cause });
    this.name = "StorageFullError";
    this.url = url;
    this.needed = needed;
    this.quota = estimate?.quota;
    this.usage = estimate?.usage;
    this.written = written;
  }
}

/** Options for a {@linkcode StorageFullError}. */
export interface StorageFullOptions {
  /** The origin's quota and usage, when known. */
  estimate?: StorageEstimate;
  /** The browser's own error, for a write it stopped. */
  cause?: unknown;
  /** Bytes written before the browser stopped the write (a write refused before it began has none). */
  written?: number;
}

interface StorageManagerLike {
  estimate?(): Promise<{ quota?: number; usage?: number }>;
  persist?(): Promise<boolean>;
  persisted?(): Promise<boolean>;
}

function storageManager(): StorageManagerLike | undefined {
  return (globalThis.navigator as unknown as { storage?: StorageManagerLike } | undefined)?.storage;
}

/**
 * The origin's quota and usage from `navigator.storage.estimate()`, or `undefined` where the
 * runtime has no estimate (Deno, Node, a browser without the Storage API).
 *
 * @example
 * ```ts
 * import { storageEstimate } from "./quota.ts";
 * import assert from "node:assert/strict";
 * assert.equal(await storageEstimate(), undefined); // Deno has no navigator.storage
 * ```
 */
export async function storageEstimate(): Promise<StorageEstimate | undefined> {
  const s = storageManager();
  if (typeof s?.estimate !== "function") return undefined;
  const { quota, usage } = await s.estimate();
  if (typeof quota !== "number" || typeof usage !== "number") return undefined;
  return { quota, usage };
}

/**
 * Refuses a write of `needed` bytes to `url` that the origin's free quota cannot hold, with a
 * {@linkcode StorageFullError}; does nothing where there is no estimate.
 *
 * @example
 * ```ts
 * import { checkQuota } from "./quota.ts";
 * await checkQuota("opfs:///a.ckpt", 1e12); // no estimate in Deno: nothing to check
 * ```
 */
export async function checkQuota(url: string, needed: number): Promise<void> {
  if (!(needed > 0)) return;
  const estimate = await storageEstimate();
  if (estimate && needed > estimate.quota - estimate.usage) throw new StorageFullError(url, needed, { estimate });
}

/**
 * Asks the browser to keep this origin's storage (and so its checkpoints) under storage pressure:
 * `navigator.storage.persist()`. Resolves `true` when the storage is persistent; browsers decide
 * (Chromium grants it to installed or often-used sites, Firefox asks the user, Safari decides by
 * use). `false` where the runtime has no Storage API.
 *
 * @example
 * ```ts
 * import { persistStorage } from "./quota.ts";
 * import assert from "node:assert/strict";
 * assert.equal(await persistStorage(), false); // Deno has no navigator.storage
 * ```
 */
export async function persistStorage(): Promise<boolean> {
  const s = storageManager();
  if (typeof s?.persisted === "function" && await s.persisted()) return true;
  return typeof s?.persist === "function" ? await s.persist() : false;
}
