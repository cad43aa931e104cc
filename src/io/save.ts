/**
 * Saving a checkpoint to a file (atomically) or to any byte stream, hashing in the same pass.
 *
 * @module
 */
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { type EncodeOptions, encodeWithDigest } from "../format/encode.ts";
import type { CheckpointInput } from "../format/types.ts";
import { concatBytes } from "../format/dtype.ts";
import { sha256 } from "../format/_hash.ts";
import { WorkerHash } from "../storage/_worker_hash.ts";
import { toPath } from "../storage/_path.ts";
import { checkStorageOptions } from "../storage/_storage_options.ts";
import { checkOptionNames, optionNames } from "../format/_options.ts";
import { WORKER_HASH } from "../storage/file.ts";
import { isAddress, type ResolveOptions, type StorageAddress } from "../storage/resolve.ts";
import { locate } from "./read.ts";
import type { ObjectStore, WriteOptions } from "../storage/types.ts";
import { streamIterator } from "../format/_streams.ts";
import { OsErrors } from "../runtime/errors.ts";
import { type FileHandle, files } from "../runtime/files.ts";
import { thisProcess } from "../runtime/process.ts";

export { toPath };

/**
 * Where a checkpoint goes: an address (a path, a `file:` URL, `s3://bucket/key`,
 * `{ store, key }`), or any byte sink such as `Deno.stdout.writable`.
 */
export type CheckpointTarget = StorageAddress | WritableStream<Uint8Array>;

/** Options for {@linkcode saveCheckpoint}. */
export interface SaveOptions extends EncodeOptions {
  /**
   * For addresses: make the object durable before resolving (on a file system, `fdatasync` of
   * the file and `fsync` of its directory). Turning it off keeps the atomic publish but not
   * durability across power loss.
   *
   * @default {true}
   */
  sync?: boolean;
  /** Settings for `s3://` stores (endpoint, credentials, part size). */
  storage?: ResolveOptions;
  /** Cancels the save; the previous object stays. */
  signal?: AbortSignal;
  /**
   * For a `WritableStream` target: leave it open when the checkpoint is written (and do not abort
   * it when the save fails), so the caller can go on writing to it or close it. By default the
   * stream is closed at the end of the checkpoint, as `pipeTo` does, which is what finishes an
   * HTTP body or a file's `writable`; pass `true` for `Deno.stdout.writable` or any stream the
   * caller keeps using. Paths ignore it (the file is always complete and closed).
   *
   * @default {false}
   */
  preventClose?: boolean;
  /**
   * Also compute the SHA-256 of every byte written (what `sha256sum` prints), returned as
   * {@linkcode SaveResult.sha256}: for a `sha256sum` sidecar, or to compare with a tool that
   * knows nothing of ckpt. For the binary codec it is a second pass over every byte (on another
   * thread for large saves to files); {@linkcode SaveResult.digest} needs none and proves as much
   * to a reader that verifies.
   *
   * @default {false}
   */
  sha256sum?: boolean;
  /**
   * For a path (or an object of a local store): a file the caller is about to delete anyway, in
   * the same directory tree as the target (not the target itself). It is renamed to the
   * temporary name and overwritten in place, then truncated to the new size, so the save reuses
   * its page-cache pages and disk blocks instead of allocating fresh ones, as databases recycle
   * log segments (on a VM where first-touching memory is slow, a save into recycled pages runs
   * like `dd` over an existing file). The file is gone once the save starts, whether the save
   * succeeds or not, and a reader that still has it open sees its bytes change (its verification
   * then fails; it never gets wrong data unnoticed). Ignored when the file is absent, and by
   * stores that cannot recycle (S3).
   */
  reuse?: string;
}

/** Every option {@linkcode saveCheckpoint} takes; any other name is a `TypeError`. */
export const SAVE_OPTION_NAMES = optionNames<SaveOptions>()([
  "codec",
  "compression",
  "sync",
  "preventClose",
  "sha256sum",
  "reuse",
  "storage",
  "signal",
]);

/** What {@linkcode saveCheckpoint} wrote. */
export interface SaveResult {
  /** Bytes written. */
  bytes: number;
  /**
   * The checkpoint's digest, lowercase hex: for ckpt's binary and JSON codecs (gzip or not) the
   * stream digest stored in the checkpoint itself (footer, end line), computed in the same pass
   * as the per-tensor digests; for codecs that store no digest (safetensors), the SHA-256 of the
   * bytes. `loadCheckpoint(source, { sha256: digest })` and `ckpt verify --sha256` check it, and
   * `ckpt inspect` prints it; a matching, fully verified read proves every byte is as saved.
   */
  digest: string;
  /**
   * SHA-256 of exactly the bytes written, lowercase hex: what `sha256sum FILE` prints. Present
   * when asked for with {@linkcode SaveOptions.sha256sum}, or when it cost nothing more (the JSON
   * codec; codecs that store no digest, where it equals `digest`).
   */
  sha256?: string;
}

/**
 * Writes `file` under a temporary name beside `path`, then fsyncs it, renames it over `path` and
 * fsyncs the directory: readers see the old file or the new one, never a partial one. On any
 * error the temporary file is removed and the previous file is untouched.
 *
 * @example
 * ```ts
 * import { writeFileAtomic } from "./save.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await writeFileAtomic(`${dir}/a.txt`, async (f) => { await f.write(new TextEncoder().encode("hi")); });
 * assert.equal(await Deno.readTextFile(`${dir}/a.txt`), "hi");
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeFileAtomic<T>(
  path: string,
  write: (file: FileHandle) => Promise<T>,
  options: { sync?: boolean } = {},
): Promise<T> {
  const sync = options.sync ?? true;
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.tmp-${thisProcess.pid}-${crypto.randomUUID().slice(0, 8)}`);
  const file = await files.open(tmp, { write: true, createNew: true, mode: 0o644 });
  let closed = false;
  try {
    const result = await write(file);
    if (sync) await file.syncData();
    file.close();
    closed = true;
    await files.rename(tmp, path);
    if (sync) await syncDir(dir);
    return result;
  } catch (e) {
    if (!closed) {
      try {
        file.close();
      } catch { /* already closed */ }
    }
    await files.remove(tmp).catch(() => {});
    throw e;
  }
}

async function syncDir(dir: string): Promise<void> {
  const d = await files.open(dir, { read: true });
  try {
    await d.sync();
  } finally {
    d.close();
  }
}

/**
 * Saves a checkpoint: encodes it (codec, optional gzip), hashes the bytes in the same pass, and
 * writes them to `target`. A path is written atomically (temporary file, fsync, rename, fsync of
 * the directory), so a crash or an error mid-save leaves the previous file intact. Tensors given
 * as an async iterable are pulled one at a time, so memory stays bounded.
 *
 * A `WritableStream` target is closed when the checkpoint ends (as `pipeTo` does) unless
 * `preventClose: true`; use that for `Deno.stdout.writable`, or the next `console.log` finds
 * stdout closed. A stream whose reader went away (`| head`) fails the save with a
 * `Deno.errors.BrokenPipe` that says so. An option name `saveCheckpoint` does not know is a
 * `TypeError`.
 *
 * @example
 * ```ts
 * import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const { bytes, digest } = await saveCheckpoint(`${dir}/step-10.ckpt`, {
 *   metadata: { step: 10, metrics: { loss: 0.25 } },
 *   tensors: [{ name: "dense/kernel", dtype: "float32", shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) }],
 * });
 * assert.equal(bytes, (await Deno.stat(`${dir}/step-10.ckpt`)).size);
 * assert.match(digest, /^[0-9a-f]{64}$/);
 * const back = await loadCheckpoint(`${dir}/step-10.ckpt`, { sha256: digest });
 * assert.deepEqual(back.tensors[0]!.data, new Float32Array([1, 2, 3, 4]));
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function saveCheckpoint(
  target: CheckpointTarget,
  checkpoint: CheckpointInput,
  options: SaveOptions = {},
): Promise<SaveResult> {
  checkOptionNames(options, SAVE_OPTION_NAMES, "Cannot save checkpoint");
  checkStorageOptions(options.storage, "Cannot save checkpoint");
  const askedFile = options.sha256sum ?? false;
  if (typeof askedFile !== "boolean") throw new TypeError("Cannot save checkpoint: sha256sum must be a boolean");
  if (options.reuse !== undefined && typeof options.reuse !== "string") {
    throw new TypeError("Cannot save checkpoint: reuse must be a path");
  }
  if (target instanceof WritableStream) {
    const { readable, sha256: codecFile, digest } = encodeWithDigest(checkpoint, options, { digest: askedFile });
    // Hash here only what the codec does not: the file when asked for (or gzip output), or
    // everything when the codec stores no digest of its own.
    const hash = codecFile === undefined && (askedFile || digest === undefined) ? sha256() : undefined;
    let bytes = 0;
    const counted = readable.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          hash?.update(chunk);
          bytes += chunk.byteLength;
          c.enqueue(chunk);
        },
      }),
    );
    const keepOpen = options.preventClose ?? false;
    if (typeof keepOpen !== "boolean") throw new TypeError("Cannot save checkpoint: preventClose must be a boolean");
    try {
      await counted.pipeTo(target, { preventClose: keepOpen, preventAbort: keepOpen });
    } catch (e) {
      if (!(e instanceof OsErrors.BrokenPipe)) throw e;
      throw new OsErrors.BrokenPipe(
        `Cannot save checkpoint: the stream's reader went away after ${bytes} bytes had been handed to it (broken pipe; e.g. piped into head)`,
        { cause: e },
      );
    }
    const file = codecFile ? await codecFile : hash?.digest("hex");
    return result(bytes, digest ? await digest : file!, file);
  }
  if (!isAddress(target)) {
    throw new TypeError(
      "Cannot save checkpoint: target must be a path, a file: URL, an s3: URL, { store, key } or a WritableStream",
    );
  }
  if (target instanceof URL && target.protocol !== "file:" && target.protocol !== "s3:") {
    // Kept from when only paths were accepted: name the scheme that cannot be written.
    throw new TypeError(`Cannot save checkpoint to ${target.href}: only file: and s3: URLs can be written`);
  }
  const { store, key } = locate(target, options, "save checkpoint to");
  // A file digest asked for of a large save to a file is computed on another thread, over the
  // writer's shared staging buffers, while this one encodes and computes the per-tensor digests;
  // small ones do both here (a worker costs ~0.1 s to start).
  const staged = store.files?.stagedWrites === true;
  const worker = askedFile && staged && knownBytes(checkpoint) >= WORKER_HASH_BYTES &&
      options.compression !== "gzip"
    ? new WorkerHash()
    : undefined;
  try {
    // A staging writer (a local file's) copies each chunk into its staging buffers before the next
    // is read (the loop below reads one chunk at a time), so the encoder may reuse its buffers.
    const transientChunks = staged;
    const encoded = encodeWithDigest(checkpoint, options, { digest: askedFile && !worker, transientChunks });
    const { readable } = encoded;
    const hash = !worker && encoded.sha256 === undefined && (askedFile || encoded.digest === undefined)
      ? sha256()
      : undefined;
    const writeOptions: WriteOptions & { [WORKER_HASH]?: WorkerHash } = { sync: options.sync ?? true };
    if (options.signal) writeOptions.signal = options.signal;
    const known = knownBytes(checkpoint);
    if (known > 0) writeOptions.sizeHint = known;
    if (worker) writeOptions[WORKER_HASH] = worker;
    if (options.reuse !== undefined) writeOptions.reuse = reuseKey(store, key, options.reuse);
    const writer = await store.writer(key, writeOptions);
    let bytes = 0;
    try {
      await writeChunks(readable, (chunk) => {
        hash?.update(chunk);
        bytes += chunk.byteLength;
        return writer.write(chunk);
      }, transientChunks);
    } catch (e) {
      await writer.abort(e);
      throw e;
    }
    // Closing flushes the last staging buffer (to the worker too); only then is the digest whole.
    await writer.close();
    const file = worker ? await worker.digest() : encoded.sha256 ? await encoded.sha256 : hash?.digest("hex");
    return result(bytes, encoded.digest ? await encoded.digest : file!, file);
  } finally {
    worker?.close();
  }
}

/** Chunks smaller than this are joined with the small ones next to them into one write (see {@linkcode writeChunks}). */
const SMALL_CHUNK = 64 * 1024;

/**
 * Writes each chunk of `readable` with `write`. Where the encoder reuses its buffers
 * (`transient`: a staging writer copies each chunk before the next is read) a chunk is written
 * before the next is read. Elsewhere the next chunk is made while this one is written: the
 * binary encoder hashes a tensor's slice once it has been handed on, so in a page the
 * incremental SHA-256 runs during the slice's OPFS write instead of between two writes. There,
 * consecutive small chunks (a record's digest and the next record's prefix) are joined into one
 * write, made while the write before them is in flight, and written once it is done: each
 * `write()` is a round trip to the browser's file thread, and the large chunk after them then
 * starts at once (queued behind them, it would start only once this thread is free again,
 * after its hash). The chunk read ahead is a view of the caller's tensor (or a small record
 * part), not a copy, so this adds no memory but the joined small chunks.
 */
async function writeChunks(
  readable: ReadableStream<Uint8Array>,
  write: (chunk: Uint8Array) => Promise<void>,
  transient: boolean,
): Promise<void> {
  const it = streamIterator(readable);
  // The write in flight; seen (awaited) before the next starts, or below if it fails first.
  let writing: Promise<void> | undefined;
  const start = (chunk: Uint8Array) => {
    writing = write(chunk);
    writing.catch(() => {});
  };
  try {
    let r = await it.next();
    while (!r.done) {
      if (!transient && r.value.byteLength < SMALL_CHUNK) {
        const parts = [r.value];
        let size = r.value.byteLength;
        for (
          r = await it.next();
          !r.done && r.value.byteLength < SMALL_CHUNK && size < SMALL_CHUNK;
          r = await it.next()
        ) {
          parts.push(r.value);
          size += r.value.byteLength;
        }
        await writing;
        start(parts.length === 1 ? parts[0]! : concatBytes(parts));
        if (r.done) break;
        if (r.value.byteLength < SMALL_CHUNK) continue;
      }
      await writing;
      start(r.value);
      if (transient) await writing;
      r = await it.next();
    }
    await writing;
  } catch (e) {
    // The encoder's own error ended the iterator already; a failed write cancels it here. No
    // write is left in flight when the caller aborts the writer.
    await writing?.catch(() => {});
    await it.return?.().catch(() => {});
    throw e;
  }
}

function result(bytes: number, digest: string, sha256: string | undefined): SaveResult {
  return sha256 === undefined ? { bytes, digest } : { bytes, digest, sha256 };
}

/** The `reuse` option as a key of the target's store: a path made relative to a local store's root. */
function reuseKey(store: ObjectStore, key: string, reuse: string): string {
  const root = store.files?.root;
  if (root === undefined) return reuse;
  const rel = relative(root, resolve(reuse)).split(sep).join("/");
  if (rel === "" || rel.startsWith("../") || rel === ".." || isAbsolute(rel)) {
    throw new TypeError(`Cannot save checkpoint: reuse ${JSON.stringify(reuse)} is outside ${root}`);
  }
  if (rel === key) throw new TypeError(`Cannot save checkpoint: reuse must name another file than the target`);
  return rel;
}

/** Saves of at least this many bytes (when known up front) hash the file on a worker thread. */
const WORKER_HASH_BYTES = 64 * 2 ** 20;

/** The bytes of tensor data when the tensors are an array; 0 when they come lazily. */
/** The bytes of a checkpoint's tensor data, when its tensors are an array (else 0): a size hint for stores. */
export function knownBytes(checkpoint: CheckpointInput): number {
  const tensors = checkpoint?.tensors;
  if (!Array.isArray(tensors)) return 0;
  return tensors.reduce((n: number, t) => n + (t?.data?.byteLength ?? 0), 0);
}
