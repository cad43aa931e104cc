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
import { type SaveReply, type SaveRequest, serializeError } from "./_protocol.ts";
import { SaveQueue } from "./_queue.ts";
import { buffersOf, reserveReceived } from "./_transfer.ts";
import { type WorkerMessage, workerScope } from "../runtime/workers.ts";

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

async function save(request: SaveRequest): Promise<void> {
  const { id, path, object, metadata, tensors, headroom, options } = request;
  reserveReceived(tensors, headroom);
  try {
    const [saveCheckpoint, resolveDirectory] = await (modules ??= loadSaveModules());
    // A store is opened here from its address: the page's store object cannot cross to a worker.
    const target = object ? { store: resolveDirectory(object.store), key: object.key } : path;
    const result = await saveCheckpoint(target, { metadata, tensors }, options);
    send({ id, status: "saved", result, tensors });
  } catch (e) {
    send({ id, status: "failed", error: serializeError(e), tensors });
  }
}

const queue = new SaveQueue<SaveRequest>(save, (old, by) => {
  send({ id: old.id, status: "superseded", by: { step: by.metadata.step, path: by.path }, tensors: old.tensors });
});

port.addEventListener("message", (e: WorkerMessage<SaveRequest>) => queue.push(e.data, e.data.whenBusy === "coalesce"));
