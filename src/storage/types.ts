/**
 * The storage interface that saving, loading, the manager and the CLI are written against: a
 * small object store in the manner of Rust's `object_store` crate (atomic put with a mode,
 * streaming put, get with a range, head, delete, list). One backend per file: the local file
 * system, S3-compatible object storage, HTTP(S) (read-only), the browser's OPFS and memory.
 *
 * Keys are relative to the store's root, `/`-separated, never empty, never starting with `/`
 * and never holding `.` or `..` segments. Every backend honours the same contract, so code above
 * it never asks which store it has:
 *
 * - **Atomic writes.** {@linkcode ObjectStore.put} and {@linkcode ObjectStore.writer} publish an
 *   object whole: a reader sees the previous object or the new one, never a partial one. A write
 *   that fails or is aborted leaves the previous object untouched and leaves nothing behind that
 *   the store itself would list (temporary files, incomplete multipart uploads).
 * - **Conditional writes** ({@linkcode PutMode}) where the store has them; a failed condition is
 *   a {@linkcode PreconditionFailedError}, never a silent overwrite.
 * - **Range reads**, including a suffix range, so a reader can fetch a footer without knowing the
 *   object's size.
 *
 * @module
 */
import type { FileHandle } from "../runtime/files.ts";

/** What a store knows about one object. */
export interface ObjectInfo {
  /** The object's key, relative to the store's root. */
  key: string;
  /** Size in bytes. */
  size: number;
  /**
   * An opaque token that changes whenever the object's content changes (an ETag on S3 and HTTP;
   * device, inode, size and modification time on a file system). Pass it back as
   * `{ ifMatch: version }` to replace the object only if nobody else has.
   */
  version: string;
  /** When the object was last written, where the store says. */
  lastModified?: Date;
}

/** A byte range: `length` bytes from `offset` (to the end when `length` is absent), or the last `suffix` bytes. */
export type ByteRange = { offset: number; length?: number } | { suffix: number };

/** Options for {@linkcode ObjectStore.get}. */
export interface GetOptions {
  /** Only these bytes. A range past the end is clipped to the object; an empty object gives an empty body. */
  range?: ByteRange;
  /** Cancels the request and the body. */
  signal?: AbortSignal;
}

/** An object's bytes, as a stream, and what the store said about the whole object. */
export interface GetResult {
  /** The whole object's description (its `size` is the whole size, not the range's). */
  info: ObjectInfo;
  /** Offset of the first byte of `body` within the object. */
  offset: number;
  /** Number of bytes `body` will produce. */
  length: number;
  /** The bytes. The caller must read it to the end or cancel it, or a connection or handle leaks. */
  body: ReadableStream<Uint8Array>;
}

/**
 * How {@linkcode ObjectStore.put} treats an existing object: `"overwrite"` replaces it,
 * `"create"` fails if one exists, `{ ifMatch }` replaces it only if its
 * {@linkcode ObjectInfo.version} is still the one given.
 */
export type PutMode = "overwrite" | "create" | { ifMatch: string };

/** Options for {@linkcode ObjectStore.put}. */
export interface PutOptions {
  /**
   * What to do when an object exists already.
   *
   * @default {"overwrite"}
   */
  mode?: PutMode;
  /** Cancels the write; the previous object stays. */
  signal?: AbortSignal;
}

/** Options for {@linkcode ObjectStore.writer}. */
export interface WriteOptions {
  /** Aborts the write; the previous object stays. */
  signal?: AbortSignal;
  /**
   * Durability: where the store can, flush the object (and the directory entry that names it)
   * to stable storage before `close()` resolves. Stores that are durable on acknowledgement
   * (S3) ignore it.
   *
   * @default {true}
   */
  sync?: boolean;
  /** The final size in bytes when known; a store may use it to size parts or preallocate. */
  sizeHint?: number;
  /**
   * The key of an object the caller is about to delete anyway. A store that can (the local file
   * system) recycles that object's storage for this write, so the save reuses pages and blocks
   * instead of allocating new ones; others ignore it. The recycled object is gone once the
   * writer is created, whether the write then succeeds or not, so only pass an object that is
   * already unreferenced.
   */
  reuse?: string;
}

/**
 * A streaming write in progress. Nothing is visible to readers until {@linkcode ObjectWriter.close}
 * resolves; then the whole object is.
 */
export interface ObjectWriter {
  /**
   * Appends `chunk`. When the promise resolves the writer holds no reference to `chunk`: the
   * caller may reuse its memory.
   */
  write(chunk: Uint8Array): Promise<void>;
  /** Publishes the object atomically and describes it. */
  close(): Promise<ObjectInfo>;
  /** Discards everything written; the previous object (if any) is untouched. Safe to call twice. */
  abort(reason?: unknown): Promise<void>;
}

/** An object store: the one interface every storage backend implements. */
export interface ObjectStore {
  /**
   * Where the store's root is, as a URL ending in `/` (`file:///runs/a/`, `s3://bucket/prefix/`,
   * `https://host/dir/`, `memory://name/`); error messages name objects as this plus the key.
   */
  readonly url: string;
  /**
   * Optional: an address from which another thread (a Web Worker) opens this same store with
   * `resolveDirectory`, such as `opfs:///runs/demo/` or `file:///runs/a/`. A `BackgroundWriter`
   * needs it to write `{ store, key }` from its worker, and a `CheckpointManager` on this store to
   * take a `writer`. Absent where a URL alone cannot reopen the store: a memory store, an S3 store
   * given credentials in code, an OPFS store on a directory handle of your own.
   */
  readonly address?: string;
  /** False for read-only stores (HTTP); their write methods throw a `TypeError`. */
  readonly writable: boolean;
  /**
   * Optional: present where the store's objects are files on this machine (the local file
   * system's store), for the fast paths of readers and writers above storage: reads into reused
   * buffers from an open file, the writer's staging buffers. Callers test for it; they never ask
   * which store they have.
   */
  readonly files?: LocalFiles;
  /**
   * Optional: how a whole-object read may split into ranged GETs (`S3Store`, from
   * `S3StoreOptions.readConcurrency` and `partSize`): with a `concurrency` above 1, loads fetch
   * large tensor bodies that many ranges at a time, straight into their buffers; otherwise, and
   * for stores without it, in one GET.
   */
  readonly ranged?: { readonly concurrency: number; readonly partSize: number };
  /**
   * Optional: the object as a `Blob` (`OpfsStore`: the OPFS file's `File`), for reads by slices
   * that land in fresh memory of their own: a load reads each large record with one
   * `slice().arrayBuffer()`, its body becoming the tensor without a copy. An absent object is an
   * {@linkcode ObjectNotFoundError}.
   */
  blob?(key: string): Promise<Blob>;
  /** Reads an object, or a range of it. An absent object is an {@linkcode ObjectNotFoundError}. */
  get(key: string, options?: GetOptions): Promise<GetResult>;
  /** Describes an object, or gives `undefined` when there is none. */
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Writes a small object atomically in one request, honouring `mode`. */
  put(key: string, data: Uint8Array, options?: PutOptions): Promise<ObjectInfo>;
  /** Starts a streaming atomic write of an object of any size, in bounded memory. */
  writer(key: string, options?: WriteOptions): Promise<ObjectWriter>;
  /** Deletes an object; deleting an absent object is not an error. */
  delete(key: string): Promise<void>;
  /** Every object whose key starts with `prefix` (all when empty), in ascending key order. */
  list(prefix?: string): AsyncIterable<ObjectInfo>;
  /**
   * Optional: removes what interrupted writes under `prefix` left behind that {@linkcode list}
   * does not show (incomplete multipart uploads on S3, temporary files of a killed process), and
   * says how many it removed. Only call it where no other writer is active under `prefix`.
   */
  sweep?(prefix?: string): Promise<number>;
}

/** What a store whose objects are local files offers beyond the interface ({@linkcode ObjectStore.files}). */
export interface LocalFiles {
  /** The directory keys are relative to, absolute. */
  readonly root: string;
  /** The path of the object `key`. */
  path(key: string): string;
  /**
   * Opens the object's file for reading (positional reads into the caller's buffers); errors are
   * the file system's (`OsErrors.NotFound` for an absent file). The caller closes it.
   */
  open(key: string): Promise<FileHandle>;
  /**
   * Whether the store's writer copies each chunk into staging buffers of its own before `write`
   * resolves (so a caller may reuse a chunk's buffer), and hashes those buffers on a second
   * thread when given one.
   */
  readonly stagedWrites: boolean;
}

/**
 * A local file says what the CLI and the file system say (`Cannot read "/a/b.ckpt": No such file
 * or directory`); any other store names the address.
 */
function notFoundMessage(url: string): string {
  if (url.startsWith("file:")) {
    try {
      return `Cannot read ${JSON.stringify(decodeURIComponent(new URL(url).pathname))}: No such file or directory`;
    } catch { /* not a well-formed file URL: name it as it is */ }
  }
  return `Cannot read ${url}: no such object`;
}

/**
 * An object that is not there. A local file's message is the file system's wording,
 * `Cannot read "PATH": No such file or directory`; other stores say `Cannot read URL: no such object`.
 *
 * @example
 * ```ts
 * import { ObjectNotFoundError } from "./types.ts";
 * import assert from "node:assert/strict";
 * const e = new ObjectNotFoundError("s3://bucket/run/a.ckpt");
 * assert.equal(e.url, "s3://bucket/run/a.ckpt");
 * assert.equal(e.message, "Cannot read s3://bucket/run/a.ckpt: no such object");
 * assert.equal(new ObjectNotFoundError("file:///run/a.ckpt").message, 'Cannot read "/run/a.ckpt": No such file or directory');
 * ```
 */
export class ObjectNotFoundError extends Error {
  /** The object's full address. */
  readonly url: string;
  /**
   * Names the missing object.
   *
   * @param url the object's full address
   */
  constructor(url: string, options?: ErrorOptions) {
    super(notFoundMessage(url), options);
    this.name = "ObjectNotFoundError";
    this.url = url;
  }
}

/**
 * A conditional write whose condition did not hold: the object exists (`"create"`), or changed
 * since it was read (`{ ifMatch }`). Another writer got there first; nothing was written.
 *
 * @example
 * ```ts
 * import { PreconditionFailedError } from "./types.ts";
 * import assert from "node:assert/strict";
 * const e = new PreconditionFailedError("s3://bucket/run/index.json", "it changed since it was read");
 * assert.match(e.message, /^Cannot write s3:\/\/bucket\/run\/index\.json: it changed since it was read$/);
 * ```
 */
export class PreconditionFailedError extends Error {
  /** The object's full address. */
  readonly url: string;
  /**
   * Names the object and the condition that did not hold.
   *
   * @param url the object's full address
   * @param why what did not hold
   */
  constructor(url: string, why: string, options?: ErrorOptions) {
    super(`Cannot write ${url}: ${why}`, options);
    this.name = "PreconditionFailedError";
    this.url = url;
  }
}

/**
 * A store that could not be reached: no connection could be made to `endpoint` (refused, no
 * such host, no route, connect timeout). The same class for every store that talks to a server
 * (S3, HTTP), so a caller catches one thing; `cause` holds the runtime's own error.
 *
 * @example
 * ```ts
 * import { StoreUnreachableError } from "./types.ts";
 * import assert from "node:assert/strict";
 * const e = new StoreUnreachableError("s3://ckpt/a.ckpt", "http://127.0.0.1:65000", "connection refused");
 * assert.equal(e.message, "Cannot reach http://127.0.0.1:65000 for s3://ckpt/a.ckpt: connection refused");
 * assert.equal(e.endpoint, "http://127.0.0.1:65000");
 * ```
 */
export class StoreUnreachableError extends Error {
  /** The object's (or the store's) address. */
  readonly url: string;
  /** The server that was tried: scheme, host and port. */
  readonly endpoint: string;
  /**
   * Names the server, the object and why no connection was made.
   *
   * @param url the object's address
   * @param endpoint the server tried (`https://host:port`)
   * @param why why no connection was made (`connection refused`, `no such host`)
   */
  constructor(url: string, endpoint: string, why: string, options?: ErrorOptions) {
    super(`Cannot reach ${endpoint} for ${url}: ${why}`, options);
    this.name = "StoreUnreachableError";
    this.url = url;
    this.endpoint = endpoint;
  }
}
