// An incremental SHA-256 computed on another thread, fed views of SharedArrayBuffers: a save's
// whole-file digest runs in parallel with the main thread's encoding and per-tensor digests.

import { WorkerCalls } from "../format/_worker_calls.ts";

export class WorkerHash {
  #calls = new WorkerCalls<{ seq: number; hex?: string }>(new URL("./_hash_worker.ts", import.meta.url), {
    what: "Cannot hash checkpoint: the hash worker",
  });

  /** Hashes `view` (a view from offset 0 of a SharedArrayBuffer); resolves once the worker is done with it. */
  async update(view: Uint8Array): Promise<void> {
    if (!(view.buffer instanceof SharedArrayBuffer) || view.byteOffset !== 0) {
      throw new TypeError("WorkerHash.update needs a view from the start of a SharedArrayBuffer");
    }
    await this.#calls.call({ op: "update", buffer: view.buffer, length: view.byteLength });
  }

  /** The hex digest of everything given so far. */
  async digest(): Promise<string> {
    return (await this.#calls.call({ op: "digest" })).hex!;
  }

  /** Ends the worker; pending calls reject. */
  close(): void {
    this.#calls.close();
  }
}
