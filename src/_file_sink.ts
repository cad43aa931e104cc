// Writes a byte stream to an open file through two reused staging buffers: while one is being
// written by the runtime (off the JS thread), the other fills. Reusing the buffers avoids touching
// fresh memory for every chunk (slow on first touch) and keeps writes large.

import type { Hash } from "./_hash.ts";

/** Staging buffer size; each write to the file is this large except the last. */
export const STAGING_BYTES = 8 * 2 ** 20;

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.byteLength) off += await file.write(bytes.subarray(off));
}

/** A sink that stages chunks into two reused buffers; counts bytes and optionally hashes them. */
export class StagedFileSink implements UnderlyingSink<Uint8Array> {
  #file: Deno.FsFile;
  #hash: Hash | undefined;
  #buffers: [Uint8Array, Uint8Array];
  #current = 0;
  #fill = 0;
  #pending: Promise<void> | undefined;
  bytes = 0;

  constructor(file: Deno.FsFile, hash?: Hash, staging = STAGING_BYTES) {
    this.#file = file;
    this.#hash = hash;
    this.#buffers = [new Uint8Array(staging), new Uint8Array(staging)];
  }

  async #flushCurrent(): Promise<void> {
    if (this.#fill === 0) return;
    await this.#pending; // the other buffer must be free before we hand this one off
    const buf = this.#buffers[this.#current]!.subarray(0, this.#fill);
    this.#pending = writeAll(this.#file, buf);
    this.#current ^= 1;
    this.#fill = 0;
    // Avoid an unhandled rejection while nobody awaits; the error surfaces at the next await.
    this.#pending.catch(() => {});
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.#hash?.update(chunk);
    this.bytes += chunk.byteLength;
    let off = 0;
    while (off < chunk.byteLength) {
      const buf = this.#buffers[this.#current]!;
      if (this.#fill === 0) await this.#pending; // reuse only after the runtime let go of it
      const n = Math.min(buf.byteLength - this.#fill, chunk.byteLength - off);
      buf.set(chunk.subarray(off, off + n), this.#fill);
      this.#fill += n;
      off += n;
      if (this.#fill === buf.byteLength) await this.#flushCurrent();
    }
  }

  async close(): Promise<void> {
    await this.#flushCurrent();
    await this.#pending;
  }

  async abort(): Promise<void> {
    await this.#pending?.catch(() => {});
  }
}
