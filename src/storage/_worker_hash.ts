// An incremental SHA-256 computed on another thread, fed views of SharedArrayBuffers: a save's
// whole-file digest runs in parallel with the main thread's encoding and per-tensor digests.

interface Waiter {
  resolve(hex: string | undefined): void;
  reject(e: unknown): void;
}

export class WorkerHash {
  #worker: Worker;
  #seq = 0;
  #waiting = new Map<number, Waiter>();
  #failure: Error | undefined;

  constructor() {
    this.#worker = new Worker(new URL("./_hash_worker.ts", import.meta.url), { type: "module" });
    this.#worker.onmessage = (e: MessageEvent<{ seq: number; hex?: string }>) => {
      const w = this.#waiting.get(e.data.seq);
      this.#waiting.delete(e.data.seq);
      w?.resolve(e.data.hex);
    };
    this.#worker.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      this.#fail(new Error(`Cannot hash checkpoint: the hash worker failed (${e.message})`));
    };
  }

  #fail(e: Error): void {
    this.#failure ??= e;
    for (const w of this.#waiting.values()) w.reject(this.#failure);
    this.#waiting.clear();
  }

  #send(message: Record<string, unknown>): Promise<string | undefined> {
    if (this.#failure) return Promise.reject(this.#failure);
    const seq = ++this.#seq;
    return new Promise((resolve, reject) => {
      this.#waiting.set(seq, { resolve, reject });
      this.#worker.postMessage({ ...message, seq });
    });
  }

  /** Hashes `view` (a view from offset 0 of a SharedArrayBuffer); resolves once the worker is done with it. */
  async update(view: Uint8Array): Promise<void> {
    if (!(view.buffer instanceof SharedArrayBuffer) || view.byteOffset !== 0) {
      throw new TypeError("WorkerHash.update needs a view from the start of a SharedArrayBuffer");
    }
    await this.#send({ op: "update", buffer: view.buffer, length: view.byteLength });
  }

  /** The hex digest of everything given so far. */
  async digest(): Promise<string> {
    return (await this.#send({ op: "digest" }))!;
  }

  /** Ends the worker; pending calls reject. */
  close(): void {
    this.#worker.terminate();
    this.#fail(new Error("Cannot hash checkpoint: the hash worker was closed"));
  }
}
