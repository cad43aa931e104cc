// Writes a byte stream to an open file through two reused staging buffers: while one is being
// written by the runtime (off the JS thread), the other fills. Reusing the buffers avoids touching
// fresh memory for every chunk (slow on first touch) and keeps writes large, but not late: a buffer
// holding 1 MiB goes out as soon as no write is in flight. A durable write also
// flushes behind itself: once a buffer is written, an fdatasync starts (unless one is running), so
// the disk takes the bytes while the next ones are encoded, not all at once at the end (as
// RocksDB's bytes_per_sync and PostgreSQL's backend_flush_after do). It flushes through a second
// handle on the file: the runtime runs one operation at a time per handle, so through the same
// one the next write would wait for the flush (measured: an 8 MiB write 44-62 ms behind a flush
// of 64 MiB, 5 ms beside it). Where it can, a durable write goes around the page cache instead
// (`_direct_io.ts`): whole 4 KiB blocks straight from the staging buffers to the device, the
// file's last partial block through the handle; nothing is left dirty to flush behind.

import { freshBuffer } from "./_huge_pages.ts";
import { DIRECT_ALIGN, type DirectFile } from "./_direct_io.ts";
import type { Hash } from "../format/_hash.ts";
import type { WorkerHash } from "./_worker_hash.ts";
import { type FileHandle, SeekMode } from "../runtime/files.ts";

/** Staging buffer size: the most one write to the file takes. */
export const STAGING_BYTES = 8 * 2 ** 20;
/**
 * A buffer holding this much is written at once when no write is in flight (while one is, it
 * fills up to STAGING_BYTES): the file, and the flush behind it, then follow the encoder instead
 * of waiting for 8 MiB, so a save's last fdatasync has less left to do, and a save under 8 MiB is
 * not one write at its end. Atomic saves in one process, the two ways alternating which goes
 * first: 32 MiB of float32 (8 tensors, 21 each) 58.6 → 56.3 ms raw and 64.5 → 61.6 ms
 * byte-grouped, 512 MiB 732 → 588 ms (9 each); 1 GiB even within this VM's noise (1271 → 1485,
 * 1268 → 1169 and 1577 → 1424 ms in three runs of 5-9).
 */
export const WRITE_MIN = 2 ** 20;

async function writeAll(file: FileHandle, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.byteLength) off += await file.write(bytes.subarray(off));
}

/**
 * Staging pairs kept between saves, so periodic checkpoints reuse memory that is already touched
 * instead of faulting in fresh pages each time. A save takes a pair and gives it back when it
 * ends; concurrent saves get pairs of their own. At most this many pairs are kept.
 */
const KEPT_PAIRS = 2;
const freePairs: [Uint8Array, Uint8Array][] = [];

function takePair(size: number, shared: boolean): [Uint8Array, Uint8Array] {
  const i = freePairs.findIndex((p) =>
    p[0].byteLength === size && (p[0].buffer instanceof SharedArrayBuffer) === shared
  );
  if (i >= 0) return freePairs.splice(i, 1)[0]!;
  // Touched once, then reused: in huge pages where the platform allows it (fewer first-touch faults).
  const make = () => shared ? new Uint8Array(new SharedArrayBuffer(size)) : freshBuffer(size);
  return [make(), make()];
}

function givePair(pair: [Uint8Array, Uint8Array]): void {
  if (freePairs.length < KEPT_PAIRS) freePairs.push(pair);
}

/**
 * A sink that stages chunks into two reused buffers; counts bytes, optionally hashes them, and
 * optionally flushes them to disk as it goes.
 */
export class StagedFileSink implements UnderlyingSink<Uint8Array> {
  #file: FileHandle;
  #hash: Hash | undefined;
  #worker: WorkerHash | undefined;
  #buffers: [Uint8Array, Uint8Array];
  #current = 0;
  #fill = 0;
  #pending: Promise<void> | undefined;
  /** Whether a buffer's write is in flight (`#pending` may still be the flush that follows it). */
  #writing = false;
  #writeMin: number;
  #released = false;
  #flusher: FileHandle | undefined;
  #flushing: Promise<void> | undefined;
  #flushFailure: { error: unknown } | undefined;
  #direct: DirectFile | undefined;
  /** File offset of the current buffer's first byte. */
  #offset = 0;
  /** Where the file's handle writes next (direct writes do not move it). */
  #handleAt = 0;
  bytes = 0;

  /**
   * `hash` is updated on this thread with every chunk; `worker` instead hashes each staged
   * buffer on its own thread (the buffers are then SharedArrayBuffers). With `flushBehind` (a
   * second handle on the same file, opened for writing, which the sink closes when it closes or
   * aborts), each written buffer starts an fdatasync through it unless one is still running;
   * `close` waits for it, and a failed one fails the next write or the close. The caller still
   * flushes the end of the file itself (what was written after the last flush began). A buffer
   * is written once it holds `writeMin` bytes (default {@linkcode WRITE_MIN}) while no other
   * write is in flight, or once it is full. With `direct` (a descriptor on the same file, which
   * the sink closes) and staging buffers it accepts, every whole DIRECT_ALIGN block goes through
   * it, at its offset, and only the file's last partial block through `file`; a write it refuses
   * sends that one and the rest of the file through `file` (whose write reports a real error). A
   * flush behind follows only writes through `file`, never the last one.
   */
  constructor(
    file: FileHandle,
    options: {
      hash?: Hash;
      worker?: WorkerHash;
      staging?: number;
      writeMin?: number;
      flushBehind?: FileHandle;
      direct?: DirectFile;
    } = {},
  ) {
    this.#file = file;
    this.#hash = options.hash;
    this.#worker = options.worker;
    this.#flusher = options.flushBehind;
    const staging = options.staging ?? STAGING_BYTES;
    this.#writeMin = options.writeMin ?? WRITE_MIN;
    this.#buffers = takePair(staging, this.#worker !== undefined);
    const direct = options.direct;
    if (direct && staging % DIRECT_ALIGN === 0 && this.#buffers.every((b) => direct.accepts(b))) this.#direct = direct;
    else direct?.close();
  }

  /**
   * Hands the current buffer to the runtime and switches to the other one. Writing direct, all
   * but the last one hand off whole multiples of DIRECT_ALIGN: the bytes past the last such
   * boundary move to the start of the other buffer (free by then) and go out with it.
   */
  async #flushCurrent(last = false): Promise<void> {
    if (this.#fill === 0) return;
    await this.#pending; // the other buffer must be free before we hand this one off
    const current = this.#buffers[this.#current]!;
    const carry = this.#direct && !last ? this.#fill % DIRECT_ALIGN : 0;
    const buf = current.subarray(0, this.#fill - carry);
    const written = this.#worker
      ? Promise.all([this.#write(buf, this.#offset), this.#worker.update(buf)]).then(([dirty]) => dirty)
      : this.#write(buf, this.#offset);
    this.#writing = true;
    const done = written.finally(() => {
      this.#writing = false;
    });
    // Only bytes that went through the page cache have anything for a flush behind to push.
    // The caller flushes the end of a file written direct (see the constructor).
    this.#pending = this.#flusher
      ? done.then((dirty) => void (dirty && !(last && this.#direct) && this.#startFlush()))
      : done.then(() => {});
    this.#current ^= 1;
    this.#buffers[this.#current]!.set(current.subarray(buf.byteLength, this.#fill));
    this.#offset += buf.byteLength;
    this.#fill = carry;
    // Avoid an unhandled rejection while nobody awaits; the error surfaces at the next await.
    this.#pending.catch(() => {});
  }

  /**
   * Writes `buf` at `offset`: its whole multiples of DIRECT_ALIGN direct where that is on, the
   * rest (the end of the file, or everything once a direct write was refused) through the file's
   * handle. Resolves to whether any byte went through the page cache.
   */
  async #write(buf: Uint8Array, offset: number): Promise<boolean> {
    let done = 0;
    const aligned = buf.byteLength - buf.byteLength % DIRECT_ALIGN;
    while (this.#direct && done < aligned) {
      const n = await this.#direct.write(buf.subarray(done, aligned), offset + done);
      if (n > 0) done += n;
      else {
        // Refused (an alignment this file system does not take, or an error the handle's own
        // write will report): the rest of this save goes through the handle.
        this.#direct.close();
        this.#direct = undefined;
      }
    }
    if (done === buf.byteLength) return false;
    if (this.#handleAt !== offset + done) await this.#file.seek(offset + done, SeekMode.Start);
    await writeAll(this.#file, buf.subarray(done));
    this.#handleAt = offset + buf.byteLength;
    return true;
  }

  /** Starts an fdatasync of what is written so far, unless one is running. */
  #startFlush(): void {
    if (this.#flushing || this.#flushFailure || !this.#flusher) return;
    this.#flushing = this.#flusher.syncData().then(
      () => {
        this.#flushing = undefined;
      },
      (error) => {
        this.#flushing = undefined;
        this.#flushFailure = { error };
      },
    );
  }

  /** Throws what a flush behind the writes failed with, if one did. */
  #checkFlush(): void {
    if (this.#flushFailure) throw this.#flushFailure.error;
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.#checkFlush();
    this.#hash?.update(chunk);
    this.bytes += chunk.byteLength;
    let off = 0;
    while (off < chunk.byteLength) {
      // Free: the one write in flight is always the other buffer's (#flushCurrent waits for it
      // before handing this one off), so this one fills while that one is written.
      const buf = this.#buffers[this.#current]!;
      const n = Math.min(buf.byteLength - this.#fill, chunk.byteLength - off);
      buf.set(chunk.subarray(off, off + n), this.#fill);
      this.#fill += n;
      off += n;
      if (this.#fill === buf.byteLength || (this.#fill >= this.#writeMin && !this.#writing)) await this.#flushCurrent();
    }
  }

  async close(): Promise<void> {
    try {
      await this.#flushCurrent(true);
      await this.#pending;
      await this.#flushing;
      this.#checkFlush();
    } finally {
      await this.#release();
    }
  }

  async abort(): Promise<void> {
    await this.#release();
  }

  /** Gives the staging pair back once the runtime has let go of both buffers; closes the flusher. */
  async #release(): Promise<void> {
    await this.#pending?.catch(() => {});
    await this.#flushing;
    if (this.#released) return;
    this.#released = true;
    givePair(this.#buffers);
    this.#flusher?.close();
    this.#direct?.close();
  }
}
