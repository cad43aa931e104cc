// A page's OPFS write through a worker's sync access handle. A page has only createWritable(),
// which Chromium implements as a swap file fed one Blob per write over IPC and moved on close:
// 256 MiB took 1.8-2.2 s and 2.4-3.0 s of the machine's CPU here, against 0.36-0.45 s and
// 0.23-0.28 s of CPU for the same bytes copied into reused buffers and written by a worker
// through a sync access handle (Firefox: even, 0.42-0.50 s, with half the CPU, which a save's
// hash then has; `deno task bench:web`). So where the engine lets a page post a file handle to a
// worker and the worker open a sync access handle on it (Chromium, Firefox), a page's write
// copies each chunk into a few reused buffers of its own (the caller may reuse its chunk once
// `write()` resolves, and a caller's arrays are never detached) and the worker writes each
// buffer at its offset and sends it back. WebKitGTK cannot post the handle: createWritable()
// there, as before. The realm asks once, of a probe file (a file whose createSyncAccessHandle()
// failed stays unwritable by createWritable() in WebKitGTK).
//
// Durability is createWritable()'s, which a page's save had before: the bytes are in the file
// once `close()` resolves (they outlive the tab and the browser), and the handle is closed
// without `flush()`, which made the engine write them to the disk (fsync) and cost a 256 MiB
// save 250-330 ms more in Chromium and Firefox, a cost createWritable()'s close does not pay.
// A worker's own save (BackgroundWriter, CheckpointWriter) flushes its handle as before.
//
// A write the worker failed (QuotaExceededError) fails the next `write()` or the `close()`, under
// the engine's error name, with the bytes written before it; the worker writes the buffers in
// the order they are sent, so those are the bytes before the failed one.
import { PieceHasher } from "./_piece_hasher.ts";
import type { WritableFile } from "./_opfs_writable.ts";
import { type ProbeDir, probeFile } from "./_opfs_probe.ts";

/**
 * Bytes per buffer, and buffers per write: the memory a page's save adds (8 MiB, whatever the
 * checkpoint's size), enough for the page to copy in a record of up to 4 MiB while the worker
 * writes the one before. With four, Firefox's 256 MiB save ran at 0.79-0.85× the raw write
 * instead of 0.93-0.97× (alternating runs), the page waiting for buffers while it hashed.
 */
const BUFFER_BYTES = 2 ** 20;
const BUFFERS = 8;

/** The worker's slot ({@linkcode PieceHasher.acquire}): apart from the two a load reads with. */
const WRITE_SLOT = 2;

let works: Promise<boolean> | undefined;
/** Writes that went through the worker so far (tests tell the two paths apart by it). */
let writes = 0;

/**
 * Whether this realm's worker can write a file of `dir` through a sync access handle: asked
 * once, of a probe file.
 */
function workerWrites(dir: ProbeDir<unknown>): Promise<boolean> {
  return works ??= probeFile(dir, async (file) => {
    const hasher = PieceHasher.acquire(WRITE_SLOT);
    if (!hasher) return false;
    try {
      await hasher.closeHandle(await hasher.openWrite(file));
      return true;
    } finally {
      hasher.release();
    }
  }).catch(() => false);
}

/** The engine's failure of one write, and the bytes written before it. */
export class WriteFailure extends Error {
  constructor(cause: unknown, readonly written: number) {
    super(`the write at byte ${written} failed: ${(cause as Error).message}`, { cause });
    this.name = (cause as Error).name;
  }
}

/**
 * A writer for `file` (a fresh, empty file of `dir`) through the worker, where this realm can
 * write so (see the module comment); `undefined` where it cannot (then createWritable()).
 */
export async function workerWriter(file: unknown, dir: ProbeDir<unknown>): Promise<WritableFile | undefined> {
  const real = (globalThis as { FileSystemFileHandle?: abstract new () => unknown }).FileSystemFileHandle;
  if (typeof Worker !== "function" || !real || !(file instanceof real) || !await workerWrites(dir)) return undefined;
  const hasher = PieceHasher.acquire(WRITE_SLOT);
  if (!hasher) return undefined;
  let handle: number;
  try {
    handle = await hasher.openWrite(file);
  } catch (e) {
    hasher.release();
    throw e;
  }
  writes++;
  return new PipedWriter(hasher, handle);
}

class PipedWriter implements WritableFile {
  readonly #hasher: PieceHasher;
  readonly #handle: number;
  /** Buffers back from the worker, and how many exist. */
  #free: ArrayBuffer[] = [];
  #made = 0;
  /** The buffer being filled, and how much of it is. */
  #buffer: ArrayBuffer | undefined;
  #filled = 0;
  /** Where the next buffer sent goes in the file. */
  #at = 0;
  #failure: WriteFailure | undefined;
  #wake: (() => void) | undefined;
  #open = true;

  constructor(hasher: PieceHasher, handle: number) {
    this.#hasher = hasher;
    this.#handle = handle;
  }

  async write(data: Uint8Array): Promise<void> {
    this.#check();
    for (let done = 0; done < data.byteLength;) {
      this.#buffer ??= await this.#take();
      const n = Math.min(data.byteLength - done, BUFFER_BYTES - this.#filled);
      new Uint8Array(this.#buffer, this.#filled, n).set(data.subarray(done, done + n));
      this.#filled += n;
      done += n;
      if (this.#filled === BUFFER_BYTES) this.#send();
    }
  }

  async close(): Promise<void> {
    this.#check();
    if (this.#filled > 0) this.#send();
    while (this.#free.length < this.#made && !this.#failure) await this.#next();
    this.#check();
    await this.#end();
  }

  async abort(): Promise<void> {
    // Writes in flight end (or fail) before the handle closes: the worker answers in order.
    await this.#end();
  }

  /** A free buffer: one back from the worker, a new one while fewer than {@linkcode BUFFERS} exist, or the next back. */
  async #take(): Promise<ArrayBuffer> {
    for (;;) {
      this.#check();
      const free = this.#free.pop();
      if (free) return free;
      if (this.#made < BUFFERS) {
        this.#made++;
        return new ArrayBuffer(BUFFER_BYTES);
      }
      await this.#next();
    }
  }

  /** Sends the buffer being filled to the worker, to be written at its place. */
  #send(): void {
    const buffer = this.#buffer!;
    const at = this.#at;
    const length = this.#filled;
    this.#buffer = undefined;
    this.#filled = 0;
    this.#at += length;
    this.#hasher.write(this.#handle, at, buffer, length).then(
      (back) => this.#free.push(back),
      (e) => {
        this.#made--; // lost with the worker's failure
        this.#failure ??= new WriteFailure(e, at);
      },
    ).finally(() => {
      const wake = this.#wake;
      this.#wake = undefined;
      wake?.();
    });
  }

  #next(): Promise<void> {
    return new Promise((resolve) => this.#wake = resolve);
  }

  #check(): void {
    if (this.#failure) throw this.#failure;
    if (!this.#open) throw new TypeError("the write through the worker is closed");
  }

  async #end(): Promise<void> {
    if (!this.#open) return;
    this.#open = false;
    try {
      await this.#hasher.closeHandle(this.#handle);
    } finally {
      this.#hasher.release();
    }
  }
}

/** Test hook: how many writes went through the worker so far. */
export function opfsWorkerWritesForTests(): number {
  return writes;
}
