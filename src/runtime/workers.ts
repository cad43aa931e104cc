/**
 * Threads, one interface for every runtime: a module Worker (Deno, browsers) or a
 * `node:worker_threads` Worker (Node, ./_workers_node.ts) behind the part of the Web Worker API
 * ckpt uses, and inside a worker the scope it talks through ({@linkcode workerScope}). Chosen
 * once, when the module loads. Worker modules are named by URL
 * (`new URL("./x.ts", import.meta.url)`; the npm build names the `.js` beside it).
 *
 * @example
 * ```ts
 * import { startWorker } from "./workers.ts";
 * import assert from "node:assert/strict";
 * const url = "data:text/javascript," + encodeURIComponent(
 *   `import { workerScope } from ${JSON.stringify(new URL("./workers.ts", import.meta.url).href)};
 *    workerScope.onmessage = (e) => workerScope.postMessage(e.data * 2);`,
 * );
 * const worker = startWorker(new URL(url));
 * const reply = await new Promise((resolve) => {
 *   worker.onmessage = (e) => resolve(e.data);
 *   worker.postMessage(21);
 * });
 * assert.equal(reply, 42);
 * worker.terminate();
 * ```
 *
 * @module
 */
import { RUNTIME } from "./_which.ts";

/** A message as a worker's handler gets it (handlers name their `T`; the slots take any). */
export interface WorkerMessage<T = unknown> {
  readonly data: T;
}

/** A worker's failure as its owner's `onerror` gets it; `preventDefault()` says it was handled. */
export interface WorkerFailure {
  readonly message: string;
  preventDefault(): void;
}

/** A started worker: the part of the Web Worker API ckpt uses. */
export interface WorkerHandle {
  onmessage: ((e: WorkerMessage<never>) => void) | null;
  onerror: ((e: WorkerFailure) => void) | null;
  onmessageerror: ((e: unknown) => void) | null;
  postMessage(message: unknown, transfer?: Transferable[]): void;
  terminate(): void;
}

/** What code inside a worker talks through: its `self` (Deno, browsers) or `parentPort` (Node). */
export interface WorkerScope {
  onmessage: ((e: WorkerMessage<never>) => void) | null;
  postMessage(message: unknown, transfer?: Transferable[]): void;
  addEventListener(type: "message", listener: (e: WorkerMessage<never>) => void): void;
}

interface Impl {
  start(url: URL): WorkerHandle;
  scope(): WorkerScope;
}

const webImpl: Impl = {
  start: (url) => new Worker(url, { type: "module" }) as unknown as WorkerHandle,
  scope: () => globalThis as unknown as WorkerScope,
};

const impl: Impl = RUNTIME === "node" ? (await import("./_workers_node.ts")).nodeWorkers : webImpl;

/**
 * Starts the module at `url` in a new thread.
 *
 * @example
 * ```ts
 * import { startWorker } from "./workers.ts";
 * const w = startWorker(new URL("data:text/javascript,"));
 * w.terminate();
 * ```
 */
export function startWorker(url: URL): WorkerHandle {
  return impl.start(url);
}

/**
 * Inside a worker: the scope it receives and posts messages through. (On the main thread it is
 * the global scope, where posting means nothing.)
 */
export const workerScope: WorkerScope = impl.scope();
