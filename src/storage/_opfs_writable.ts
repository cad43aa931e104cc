// Opens the stream an OpfsStore write goes through, the same in every engine:
// - in a dedicated Web Worker (the only place engines give them), a sync access handle: it
//   writes the file in place, where Chromium's createWritable() writes a swap file through one
//   Blob per write and moves it on close (48 MiB: ~60 ms against ~420 ms here). The file is the
//   store's fresh temporary one, moved over the key only once closed, so the previous object is
//   never written in place;
// - in a page, a sync access handle in a worker the page sends its bytes to, where the engine
//   lets it (Chromium, Firefox: src/storage/_opfs_worker_write.ts);
// - else createWritable() (a page: WebKit, Safari 26); a page with neither (Safari before 26)
//   gets a TypeError naming the missing API and what to do;
// - WebKitGTK 2.50's FileSystemWritableFileStream.write(view) writes the view's whole buffer,
//   not the view: probed once per realm, and there a view that is not its whole buffer is copied;
// - the browser's QuotaExceededError becomes a StorageFullError naming the quota and usage.
import { storageEstimate, StorageFullError } from "./quota.ts";
import { workerWriter, WriteFailure } from "./_opfs_worker_write.ts";
import { type ProbeDir, probeFile } from "./_opfs_probe.ts";

/** The parts of FileSystemWritableFileStream used here. */
export interface WritableFile {
  write(data: Uint8Array): Promise<void>;
  close(): Promise<void>;
  abort(reason?: unknown): Promise<void>;
}

interface SyncAccessHandle {
  write(data: Uint8Array, options: { at: number }): number;
  flush(): void;
  close(): void;
}

/** The parts of FileSystemFileHandle used here (both ways of writing may be absent). */
export interface WritableEntry {
  createWritable?(options?: { keepExistingData?: boolean }): Promise<WritableFile>;
  createSyncAccessHandle?(): Promise<SyncAccessHandle>;
}

type Dir = ProbeDir<WritableEntry & { getFile(): Promise<File> }>;

function isQuota(e: unknown): boolean {
  return e !== null && typeof e === "object" && (e as { name?: unknown }).name === "QuotaExceededError";
}

/** A StorageFullError for the browser's `QuotaExceededError` `e` after `written` bytes, else `e`. */
async function quotaError(e: unknown, url: string, needed: number, written: number): Promise<unknown> {
  if (!isQuota(e)) return e;
  const estimate = await storageEstimate().catch(() => undefined);
  return new StorageFullError(url, needed, { ...(estimate ? { estimate } : {}), cause: e, written });
}

let wholeBuffers: Promise<boolean> | undefined;
let syncHandles: Promise<boolean> | undefined;

/** Whether this engine's write(view) writes the view's whole buffer (WebKitGTK 2.50 does). */
function writesWholeBuffers(dir: Dir): Promise<boolean> {
  return wholeBuffers ??= probeFile(dir, async (file) => {
    const out = await file.createWritable!();
    await out.write(new Uint8Array([1, 2, 3, 4]).subarray(1, 3));
    await out.close();
    return (await file.getFile()).size !== 2;
  });
}

/** `run()`'s outcome as a promise: what it throws (QuotaExceededError) rejects, as createWritable()'s would. */
function settled(run: () => void): Promise<void> {
  try {
    run();
    return Promise.resolve();
  } catch (e) {
    return Promise.reject(e);
  }
}

/**
 * Whether this realm gets working sync access handles (a dedicated worker in Chromium and
 * Firefox; WebKitGTK 2.50 throws NotSupportedError there). Asked once, of a probe file: a file
 * whose createSyncAccessHandle() failed is left unwritable by createWritable() in WebKitGTK too
 * (InvalidStateError).
 */
function hasSyncHandles(dir: Dir): Promise<boolean> {
  return syncHandles ??= probeFile(dir, async (file) => {
    (await file.createSyncAccessHandle!()).close();
    return true;
  }).catch(() => false);
}

function syncWriter(handle: SyncAccessHandle): WritableFile {
  let at = 0;
  let open = true;
  const close = () => {
    if (open) handle.close();
    open = false;
  };
  return {
    write: (data) =>
      settled(() => {
        let done = 0;
        while (done < data.byteLength) {
          const n = handle.write(data.subarray(done), { at: at + done });
          if (!(n > 0)) throw new Error(`a sync access handle wrote ${n} of ${data.byteLength - done} bytes`);
          done += n;
        }
        at += done;
      }),
    close: () =>
      settled(() => {
        try {
          handle.flush();
        } finally {
          close();
        }
      }),
    abort: () => settled(close),
  };
}

/**
 * The writable stream for `file` (a fresh file in the store's temp directory `dir`) of the
 * object at `url`; `sizeHint` is the bytes the write expects, for quota messages.
 */
export async function openWritable(
  file: WritableEntry,
  dir: Dir,
  url: string,
  sizeHint = 0,
): Promise<WritableFile> {
  let out: WritableFile;
  let written = 0;
  const fail = async (e: unknown, pending = 0) => {
    // A write through the worker fails later than it was made: it says what was written before it.
    const done = e instanceof WriteFailure ? e.written : written;
    throw await quotaError(e, url, Math.max(sizeHint, done + pending), done);
  };
  let copyViews = false;
  const writable = typeof file.createWritable === "function";
  if (
    typeof file.createSyncAccessHandle === "function" && (!writable || await hasSyncHandles(dir))
  ) {
    try {
      out = syncWriter(await file.createSyncAccessHandle());
    } catch (e) {
      if (isQuota(e)) return await fail(e);
      const why = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      throw new TypeError(
        writable
          ? `Cannot write ${url}: this browser's OPFS createSyncAccessHandle() failed (${why})`
          : `Cannot write ${url}: this browser's OPFS has no createWritable() and its createSyncAccessHandle() failed (${why})`,
        { cause: e },
      );
    }
  } else if (writable) {
    const piped = await workerWriter(file, dir).catch(fail);
    if (piped) out = piped;
    else {
      copyViews = await writesWholeBuffers(dir);
      out = await file.createWritable!().catch(fail);
    }
  } else {
    throw new TypeError(
      `Cannot write ${url}: this browser's OPFS has no createWritable() (Safari before 26), and createSyncAccessHandle() ` +
        "works only in a Web Worker: save through a BackgroundWriter (its worker writes with sync access handles)",
    );
  }
  return {
    async write(chunk) {
      const data = copyViews && (chunk.byteOffset !== 0 || chunk.byteLength !== chunk.buffer.byteLength)
        ? chunk.slice()
        : chunk;
      await out.write(data).catch((e) => fail(e, chunk.byteLength));
      written += chunk.byteLength;
    },
    close: () => out.close().catch(fail),
    abort: (reason) => out.abort(reason),
  };
}
