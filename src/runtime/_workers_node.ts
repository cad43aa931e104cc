// Threads on Node (./workers.ts): node:worker_threads behind the Web Worker API's shape. A
// worker's error goes to `onerror` (a listened-to 'error' event does not end the process).
import type { WorkerHandle, WorkerMessage, WorkerScope } from "./workers.ts";

const threads = await import("node:worker_threads");

class NodeWorker implements WorkerHandle {
  onmessage: ((e: WorkerMessage<never>) => void) | null = null;
  onerror: ((e: { message: string; preventDefault(): void }) => void) | null = null;
  onmessageerror: ((e: unknown) => void) | null = null;
  #worker: import("node:worker_threads").Worker;

  constructor(url: URL) {
    this.#worker = new threads.Worker(url);
    this.#worker.on("message", (data) => this.onmessage?.({ data } as WorkerMessage<never>));
    this.#worker.on("messageerror", (e) => this.onmessageerror?.(e));
    this.#worker.on("error", (e: Error) => this.onerror?.({ message: e?.message ?? String(e), preventDefault() {} }));
  }

  postMessage(message: unknown, transfer: Transferable[] = []): void {
    this.#worker.postMessage(message, transfer as never);
  }

  terminate(): void {
    void this.#worker.terminate();
  }
}

function scope(): WorkerScope {
  const port = threads.parentPort;
  let handler: ((e: WorkerMessage<never>) => void) | null = null;
  const listeners: ((e: WorkerMessage<never>) => void)[] = [];
  port?.on("message", (data) => {
    const message = { data } as WorkerMessage<never>;
    handler?.(message);
    for (const l of listeners) l(message);
  });
  return {
    get onmessage() {
      return handler;
    },
    set onmessage(f) {
      handler = f;
    },
    postMessage: (message, transfer = []) => port?.postMessage(message, transfer as never),
    addEventListener: (_type, listener) => void listeners.push(listener),
  };
}

/** node:worker_threads as ./workers.ts's implementation. */
export const nodeWorkers = { start: (url: URL): WorkerHandle => new NodeWorker(url), scope };
