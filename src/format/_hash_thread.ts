// A second thread for SHA-256: a Worker that hashes a region of a buffer transferred to it and
// hands the buffer back (no copy, no SharedArrayBuffer: tensors a reader hands out stay plain
// ArrayBuffers). It takes work only once started (85–140 ms here with node:crypto), so a reader
// hashes on its own thread until then. An idle Worker keeps a Deno process alive until it is
// terminated, so it is closed by its owner when done and, in case an owner is abandoned without
// closing it, by itself after IDLE_MS without work.

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

interface Waiter {
  resolve(r: { digest: Uint8Array; buffer: ArrayBuffer }): void;
  reject(e: unknown): void;
}

export class WorkerHashThread implements HashThread {
  #worker: Worker;
  #started = false;
  #failure: Error | undefined;
  #seq = 0;
  #waiting = new Map<number, Waiter>();
  #idle: ReturnType<typeof setTimeout> | undefined;

  constructor(url: URL) {
    this.#worker = new Worker(url, { type: "module" });
    this.#worker.onmessage = (
      e: MessageEvent<{ ready?: true; seq: number; digest: Uint8Array; buffer: ArrayBuffer }>,
    ) => {
      if (e.data.ready) {
        this.#started = true;
        this.#arm();
        return;
      }
      const w = this.#waiting.get(e.data.seq);
      this.#waiting.delete(e.data.seq);
      w?.resolve({ digest: e.data.digest, buffer: e.data.buffer });
      this.#arm();
    };
    this.#worker.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      this.#fail(new Error(`the hash thread failed (${e.message})`));
    };
  }

  get ready(): boolean {
    return this.#started && !this.#failure && this.#waiting.size === 0;
  }

  /** Ends the thread after IDLE_MS without work; the timer alone does not keep the process alive. */
  #arm(): void {
    if (this.#failure || this.#waiting.size > 0) return;
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => this.close(), IDLE_MS);
    (globalThis as { Deno?: { unrefTimer?(id: number): void } }).Deno?.unrefTimer?.(this.#idle as unknown as number);
  }

  #fail(e: Error): void {
    this.#failure ??= e;
    clearTimeout(this.#idle);
    this.#worker.terminate();
    for (const w of this.#waiting.values()) w.reject(this.#failure);
    this.#waiting.clear();
  }

  digest(buffer: ArrayBuffer, offset: number, length: number): Promise<{ digest: Uint8Array; buffer: ArrayBuffer }> {
    if (this.#failure) return Promise.reject(this.#failure);
    clearTimeout(this.#idle);
    const seq = ++this.#seq;
    return new Promise((resolve, reject) => {
      this.#waiting.set(seq, { resolve, reject });
      this.#worker.postMessage({ seq, buffer, offset, length }, [buffer]);
    });
  }

  close(): void {
    this.#fail(new Error("the hash thread was closed"));
  }
}
