/**
 * An object store held in memory: the whole {@linkcode ObjectStore} contract (atomic writers,
 * conditional puts, versions, ranges, sorted listing) without a disk or a network. For tests, and
 * for code that wants a checkpoint's bytes without touching storage.
 *
 * @example
 * ```ts
 * import { MemoryStore } from "./memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore();
 * const first = await store.put("run/index.json", new TextEncoder().encode("[]"), { mode: "create" });
 * await store.put("run/index.json", new TextEncoder().encode("[1]"), { mode: { ifMatch: first.version } });
 * const { body } = await store.get("run/index.json", { range: { suffix: 2 } });
 * assert.equal(await new Response(body).text(), "1]");
 * ```
 *
 * @module
 */
import { checkOptionNames } from "../format/_options.ts";
import { MEMORY_STORE_OPTION_NAMES } from "./_storage_options.ts";
import { checkKey, checkPrefix, checkRange, clipRange } from "./_validate.ts";
import {
  type GetOptions,
  type GetResult,
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  type ObjectWriter,
  PreconditionFailedError,
  type PutMode,
  type PutOptions,
  type WriteOptions,
} from "./types.ts";

/** Size of the chunks {@linkcode MemoryStore.get} streams a body in. */
const BODY_CHUNK = 64 * 1024;

interface Stored {
  bytes: Uint8Array;
  info: ObjectInfo;
}

/** Options for {@linkcode MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Names the store in its {@linkcode MemoryStore.url} (`memory://name/`) and so in error
   * messages. Two stores with the same name are still two separate stores.
   *
   * @default {"store"}
   */
  name?: string;
}

/** Process-wide, so versions never repeat even across stores. */
let nextVersion = 1;

/** Runs `fn` now; its result or its exception becomes the promise's. */
function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e);
  }
}

function copy(bytes: Uint8Array): Uint8Array {
  return bytes.slice();
}

/**
 * An {@linkcode ObjectStore} in memory. Objects are copied in and out, so callers may reuse their
 * buffers. An open {@linkcode MemoryStore.writer} stands for what an interrupted write leaves on
 * a real store (an incomplete multipart upload): {@linkcode MemoryStore.list} does not show it,
 * and {@linkcode MemoryStore.sweep} discards it, after which its `close()` fails.
 *
 * @example
 * ```ts
 * import { MemoryStore } from "./memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore({ name: "demo" });
 * const w = await store.writer("a/b.bin");
 * await w.write(new Uint8Array([1, 2]));
 * await w.write(new Uint8Array([3]));
 * assert.equal(await store.head("a/b.bin"), undefined); // nothing visible before close
 * const info = await w.close();
 * assert.equal(info.size, 3);
 * assert.deepEqual((await Array.fromAsync(store.list("a/"))).map((o) => o.key), ["a/b.bin"]);
 * assert.equal(store.url, "memory://demo/");
 * ```
 */
export class MemoryStore implements ObjectStore {
  /** `memory://name/`. */
  readonly url: string;
  /** Always true. */
  readonly writable = true;
  #objects = new Map<string, Stored>();
  #open = new Map<MemoryWriter, string>();

  /** Makes an empty store. */
  constructor(options: MemoryStoreOptions = {}) {
    checkOptionNames(options, MEMORY_STORE_OPTION_NAMES, "Cannot make a MemoryStore");
    this.url = `memory://${encodeURIComponent(options.name ?? "store")}/`;
  }

  /**
   * Reads an object or a range of it, streamed in 64 KiB chunks.
   *
   * @example
   * ```ts
   * import { MemoryStore } from "./memory.ts";
   * import assert from "node:assert/strict";
   * const store = new MemoryStore();
   * await store.put("x", new Uint8Array([0, 1, 2, 3, 4]));
   * const got = await store.get("x", { range: { offset: 1, length: 2 } });
   * assert.deepEqual([got.offset, got.length, got.info.size], [1, 2, 5]);
   * assert.deepEqual(new Uint8Array(await new Response(got.body).arrayBuffer()), new Uint8Array([1, 2]));
   * ```
   */
  get(key: string, options: GetOptions = {}): Promise<GetResult> {
    return settle(() => this.#get(key, options));
  }

  #get(key: string, options: GetOptions): GetResult {
    checkKey(key, this.url);
    checkRange(options.range);
    options.signal?.throwIfAborted();
    const stored = this.#objects.get(key);
    if (stored === undefined) throw new ObjectNotFoundError(this.url + key);
    const { offset, length } = clipRange(options.range, stored.bytes.byteLength);
    const start = offset;
    const end = offset + length;
    // The stored array is never mutated (a write replaces it), so the body may read it lazily.
    const bytes = stored.bytes;
    const signal = options.signal;
    let at = start;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (signal?.aborted) {
          controller.error(signal.reason);
          return;
        }
        if (at >= end) {
          controller.close();
          return;
        }
        const n = Math.min(BODY_CHUNK, end - at);
        controller.enqueue(bytes.slice(at, at + n));
        at += n;
      },
    }, { highWaterMark: 0 });
    return { info: { ...stored.info }, offset: start, length: end - start, body };
  }

  /**
   * Describes an object, or gives `undefined`.
   *
   * @example
   * ```ts
   * import { MemoryStore } from "./memory.ts";
   * import assert from "node:assert/strict";
   * const store = new MemoryStore();
   * assert.equal(await store.head("x"), undefined);
   * await store.put("x", new Uint8Array(3));
   * assert.equal((await store.head("x"))?.size, 3);
   * ```
   */
  head(key: string): Promise<ObjectInfo | undefined> {
    return settle(() => {
      checkKey(key, this.url);
      const stored = this.#objects.get(key);
      return stored === undefined ? undefined : { ...stored.info };
    });
  }

  /**
   * Writes an object in one step, honouring `mode`; a failed condition is a
   * {@linkcode PreconditionFailedError} and changes nothing.
   *
   * @example
   * ```ts
   * import { MemoryStore } from "./memory.ts";
   * import { PreconditionFailedError } from "./types.ts";
   * import assert from "node:assert/strict";
   * const store = new MemoryStore();
   * await store.put("x", new Uint8Array([1]), { mode: "create" });
   * await assert.rejects(store.put("x", new Uint8Array([2]), { mode: "create" }), PreconditionFailedError);
   * ```
   */
  put(key: string, data: Uint8Array, options: PutOptions = {}): Promise<ObjectInfo> {
    return settle(() => {
      checkKey(key, this.url);
      if (!(data instanceof Uint8Array)) {
        throw new TypeError(`Cannot write ${this.url + key}: data must be a Uint8Array`);
      }
      options.signal?.throwIfAborted();
      return this.#publish(key, copy(data), options.mode ?? "overwrite");
    });
  }

  /**
   * Starts a streaming write; nothing is visible until `close()`, and `abort()` leaves the
   * previous object as it was.
   *
   * @example
   * ```ts
   * import { MemoryStore } from "./memory.ts";
   * import assert from "node:assert/strict";
   * const store = new MemoryStore();
   * await store.put("x", new Uint8Array([1]));
   * const w = await store.writer("x");
   * await w.write(new Uint8Array([9, 9]));
   * await w.abort();
   * assert.equal((await store.head("x"))?.size, 1);
   * ```
   */
  writer(key: string, options: WriteOptions = {}): Promise<ObjectWriter> {
    return settle(() => {
      checkKey(key, this.url);
      options.signal?.throwIfAborted();
      const writer: MemoryWriter = new MemoryWriter(this.url + key, options.signal, {
        publish: (bytes) => this.#publish(key, bytes, "overwrite"),
        forget: () => this.#open.delete(writer),
      });
      this.#open.set(writer, key);
      return writer;
    });
  }

  /**
   * Deletes an object; an absent one is not an error.
   *
   * @example
   * ```ts
   * import { MemoryStore } from "./memory.ts";
   * import assert from "node:assert/strict";
   * const store = new MemoryStore();
   * await store.put("x", new Uint8Array(1));
   * await store.delete("x");
   * await store.delete("x");
   * assert.equal(await store.head("x"), undefined);
   * ```
   */
  delete(key: string): Promise<void> {
    return settle(() => {
      checkKey(key, this.url);
      this.#objects.delete(key);
    });
  }

  /**
   * Every object whose key starts with `prefix`, in ascending key order (code unit order, as S3
   * sorts by UTF-8 bytes for ASCII keys), as the store was when listing began.
   *
   * @example
   * ```ts
   * import { MemoryStore } from "./memory.ts";
   * import assert from "node:assert/strict";
   * const store = new MemoryStore();
   * for (const k of ["b/2", "a/1", "b/1"]) await store.put(k, new Uint8Array());
   * assert.deepEqual((await Array.fromAsync(store.list("b/"))).map((o) => o.key), ["b/1", "b/2"]);
   * ```
   */
  async *list(prefix = ""): AsyncIterable<ObjectInfo> {
    checkPrefix(prefix, this.url);
    const infos = [...this.#objects.values()]
      .filter((s) => s.info.key.startsWith(prefix))
      .map((s) => ({ ...s.info }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    yield* infos;
  }

  /**
   * Discards the open writers under `prefix` (what a killed process leaves on a real store) and
   * says how many; their `close()` then fails and publishes nothing.
   *
   * @example
   * ```ts
   * import { MemoryStore } from "./memory.ts";
   * import assert from "node:assert/strict";
   * const store = new MemoryStore();
   * const w = await store.writer("run/a");
   * await w.write(new Uint8Array([1]));
   * assert.equal(await store.sweep("run/"), 1);
   * await assert.rejects(w.close());
   * assert.equal(await store.head("run/a"), undefined);
   * ```
   */
  sweep(prefix = ""): Promise<number> {
    checkPrefix(prefix, this.url);
    let n = 0;
    for (const [writer, key] of this.#open) {
      if (!key.startsWith(prefix)) continue;
      writer.discard(`it was swept from ${this.url}${prefix} before it closed`);
      this.#open.delete(writer);
      n++;
    }
    return Promise.resolve(n);
  }

  #publish(key: string, bytes: Uint8Array, mode: PutMode): ObjectInfo {
    const current = this.#objects.get(key);
    if (mode === "create") {
      if (current !== undefined) throw new PreconditionFailedError(this.url + key, "it already exists");
    } else if (typeof mode === "object" && mode !== null && typeof mode.ifMatch === "string") {
      if (current === undefined) {
        throw new PreconditionFailedError(this.url + key, "it was deleted since it was read");
      }
      if (current.info.version !== mode.ifMatch) {
        throw new PreconditionFailedError(this.url + key, "it changed since it was read");
      }
    } else if (mode !== "overwrite") {
      throw new TypeError(
        `Cannot write ${this.url + key}: mode must be "overwrite", "create" or { ifMatch: version }`,
      );
    }
    const info: ObjectInfo = {
      key,
      size: bytes.byteLength,
      version: `m${nextVersion++}`,
      lastModified: new Date(),
    };
    this.#objects.set(key, { bytes, info });
    return { ...info };
  }
}

/** What a writer needs from its store. */
interface WriterHooks {
  publish(bytes: Uint8Array): ObjectInfo;
  forget(): void;
}

/** A streaming write into a {@linkcode MemoryStore}: chunks are copied, published whole on close. */
class MemoryWriter implements ObjectWriter {
  #where: string;
  #store: WriterHooks;
  #signal: AbortSignal | undefined;
  #chunks: Uint8Array[] = [];
  #size = 0;
  #state: "open" | "closed" | "aborted" = "open";
  #discarded: string | undefined;

  constructor(where: string, signal: AbortSignal | undefined, store: WriterHooks) {
    this.#where = where;
    this.#store = store;
    this.#signal = signal;
  }

  #check(verb: string): void {
    const where = this.#where;
    if (this.#discarded !== undefined) throw new TypeError(`Cannot ${verb} ${where}: ${this.#discarded}`);
    if (this.#state !== "open") throw new TypeError(`Cannot ${verb} ${where}: the writer is already ${this.#state}`);
    if (this.#signal?.aborted) {
      this.#state = "aborted";
      this.#chunks = [];
      this.#store.forget();
      throw this.#signal.reason;
    }
  }

  write(chunk: Uint8Array): Promise<void> {
    return settle(() => {
      this.#check("write");
      if (!(chunk instanceof Uint8Array)) {
        throw new TypeError(`Cannot write ${this.#where}: chunks must be Uint8Arrays`);
      }
      this.#chunks.push(copy(chunk));
      this.#size += chunk.byteLength;
    });
  }

  close(): Promise<ObjectInfo> {
    return settle(() => {
      this.#check("close");
      const bytes = new Uint8Array(this.#size);
      let at = 0;
      for (const c of this.#chunks) {
        bytes.set(c, at);
        at += c.byteLength;
      }
      this.#chunks = [];
      this.#state = "closed";
      this.#store.forget();
      return this.#store.publish(bytes);
    });
  }

  abort(): Promise<void> {
    if (this.#state === "open") this.#state = "aborted";
    this.#chunks = [];
    this.#store.forget();
    return Promise.resolve();
  }

  /** Drops the write, as a sweep does. */
  discard(why: string): void {
    this.#discarded = why;
    this.#chunks = [];
  }
}
