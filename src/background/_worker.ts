// The worker a BackgroundWriter runs: it saves each requested checkpoint with the core's
// saveCheckpoint (encode, SHA-256, optional gzip, atomic write), one at a time in arrival order,
// and sends the tensors back, transferring their buffers, whatever the outcome.
//
// The save code is imported dynamically, after the message listener is in place: its modules
// wait at the top level (the SHA-256 is chosen and, in a browser, a WebAssembly module compiled),
// and Chromium dispatches messages to a module worker whose top-level await has not finished
// yet, so a request posted right after the worker started was dropped there and its save never
// settled. Statically imported here, none of this module ran before those waits ended.

import type { saveCheckpoint as SaveCheckpoint } from "../io/save.ts";
import type { resolveDirectory as ResolveDirectory } from "../storage/resolve.ts";
import {
  rebuildError,
  type SaveReply,
  type SaveRequest,
  type SerializedError,
  serializeError,
  type TensorChunk,
  type WorkerSetup,
} from "./_protocol.ts";
import type { TensorInput } from "../format/types.ts";
import { SaveQueue } from "./_queue.ts";
import { buffersOf, reserveReceived } from "./_transfer.ts";
import { type WorkerMessage, workerScope } from "../runtime/workers.ts";
import { lowerThreadPriority } from "../runtime/_thread_priority.ts";

const port = workerScope;

function send(reply: SaveReply): void {
  try {
    port.postMessage(reply, buffersOf(reply.tensors));
  } catch {
    // The tensors could not be sent back (never expected): still report how the save went.
    port.postMessage({ ...reply, tensors: [] }, []);
  }
}

let modules: Promise<[typeof SaveCheckpoint, typeof ResolveDirectory]> | undefined;

/**
 * The save code, imported one graph after the other, never two `import()`s at once: under Node
 * 20 two concurrent dynamic imports whose graphs share modules that wait at the top level could
 * leave one promise never settled, and the worker's first save hung (1 resume in 4-7 here).
 */
async function loadSaveModules(): Promise<[typeof SaveCheckpoint, typeof ResolveDirectory]> {
  const { saveCheckpoint } = await import("../io/save.ts");
  const { resolveDirectory } = await import("../storage/resolve.ts");
  return [saveCheckpoint, resolveDirectory];
}

/**
 * The tensors of a streamed save, as their chunks arrive: handed to the encoder one by one, and
 * kept to be sent back once the stream has ended.
 */
class Inbox {
  readonly received: TensorInput[] = [];
  #taken = 0;
  #ended = false;
  #error: SerializedError | undefined;
  #wake: (() => void) | undefined;
  /** Settles when the last chunk (or the error) has arrived. */
  readonly closed: Promise<void>;
  #close!: () => void;

  constructor() {
    this.closed = new Promise((resolve) => this.#close = resolve);
  }

  add(chunk: TensorChunk): void {
    reserveReceived(chunk.tensors, chunk.headroom);
    this.received.push(...chunk.tensors);
    if (chunk.end) {
      this.#ended = true;
      this.#error = chunk.error;
      this.#close();
    }
    this.#wake?.();
  }

  async *tensors(): AsyncGenerator<TensorInput> {
    for (;;) {
      while (this.#taken < this.received.length) yield this.received[this.#taken++]!;
      if (this.#ended) break;
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = undefined;
    }
    if (this.#error) throw rebuildError(this.#error, "the snapshot failed");
  }
}

/** Streamed saves whose request has arrived, by id, until they are answered. */
const inboxes = new Map<number, Inbox>();

/** Settles once the worker is set up (its threads lowered, where they are): saves wait for it. */
let setUp: Promise<unknown> = Promise.resolve();

async function save(request: SaveRequest): Promise<void> {
  await setUp;
  const { id, path, object, metadata, headroom, options } = request;
  const inbox = request.stream ? inboxes.get(id) : undefined;
  const tensors = inbox ? inbox.received : request.tensors;
  reserveReceived(request.tensors, headroom);
  try {
    const [saveCheckpoint, resolveDirectory] = await (modules ??= loadSaveModules());
    // A store is opened here from its address: the page's store object cannot cross to a worker.
    const target = object ? { store: resolveDirectory(object.store), key: object.key } : path;
    const result = await saveCheckpoint(target, { metadata, tensors: inbox ? inbox.tensors() : tensors }, options);
    await inbox?.closed;
    send({ id, status: "saved", result, tensors });
  } catch (e) {
    await inbox?.closed; // every tensor goes back, in one reply after the last chunk
    send({ id, status: "failed", error: serializeError(e), tensors });
  } finally {
    inboxes.delete(id);
  }
}

const queue = new SaveQueue<SaveRequest>(save, (old, by) => {
  send({ id: old.id, status: "superseded", by: { step: by.metadata.step, path: by.path }, tensors: old.tensors });
});

port.addEventListener("message", (e: WorkerMessage<SaveRequest | TensorChunk | WorkerSetup>) => {
  const message = e.data;
  if ("setup" in message) {
    // The first message: the worker's thread is lowered now, before any save starts an async
    // operation, so that the threads its runtime makes for the save's writes and hashes inherit
    // the lower priority; saves wait until the pool threads made before are found and lowered
    // too. Where it cannot be lowered the worker saves at the priority it has.
    if (message.setup.nice !== undefined) setUp = lowerThreadPriority(message.setup.nice);
    return;
  }
  if ("chunk" in message) {
    inboxes.get(message.chunk)?.add(message);
    return;
  }
  if (message.stream) inboxes.set(message.id, new Inbox());
  queue.push(message, message.whenBusy === "coalesce");
});
