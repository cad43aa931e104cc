// A second thread for SHA-256: a Worker that hashes a region of a buffer transferred to it and
// hands the buffer back (no copy, no SharedArrayBuffer: tensors a reader hands out stay plain
// ArrayBuffers). It takes work only once started (85–140 ms here with node:crypto), so a reader
// hashes on its own thread until then. An idle Worker keeps a Deno process alive until it is
// terminated, so it is closed by its owner when done and, in case an owner is abandoned without
// closing it, by itself after IDLE_MS without work (src/format/_worker_calls.ts).

import { WorkerCalls } from "./_worker_calls.ts";

/** A Worker that hashes regions of transferred buffers. */
export interface HashThread {
  /** Whether it has started and can take a job now (not failed, not closed). */
  readonly ready: boolean;
  /**
   * SHA-256 of `length` bytes of `buffer` from `offset`. The buffer is transferred to the thread
   * (detached here) and comes back with the digest.
   */
  digest(buffer: ArrayBuffer, offset: number, length: number): Promise<{ digest: Uint8Array; buffer: ArrayBuffer }>;
  /** Ends the thread; a job in flight rejects. */
  close(): void;
}

/** Without a job for this long, the thread ends itself. */
const IDLE_MS = 2000;

/** A Worker that hashes regions of transferred buffers. */
export class WorkerHashThread implements HashThread {
  #calls: WorkerCalls<{ seq: number; digest: Uint8Array; buffer: ArrayBuffer }>;
  #started = false;

  constructor(url: URL) {
    this.#calls = new WorkerCalls(url, {
      what: "the hash thread",
      idleMs: IDLE_MS,
      onOther: (data) => {
        if (!(data as { ready?: boolean }).ready) return;
        this.#started = true;
        this.#calls.idle();
      },
    });
  }

  get ready(): boolean {
    return this.#started && !this.#calls.failed && !this.#calls.busy;
  }

  digest(buffer: ArrayBuffer, offset: number, length: number): Promise<{ digest: Uint8Array; buffer: ArrayBuffer }> {
    return this.#calls.call({ buffer, offset, length }, [buffer]);
  }

  close(): void {
    this.#calls.close();
  }
}
