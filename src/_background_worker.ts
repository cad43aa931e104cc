// The worker a BackgroundWriter runs: it saves one checkpoint per message with the core's
// saveCheckpoint (encode, SHA-256, optional gzip, atomic write) and sends the tensors back,
// transferring their buffers, whether the save succeeded or not.

import { saveCheckpoint } from "./save.ts";
import { type SaveReply, type SaveRequest, serializeError } from "./_background_protocol.ts";
import { buffersOf } from "./_background_transfer.ts";

const port = globalThis as unknown as {
  postMessage(message: SaveReply, transfer: Transferable[]): void;
  addEventListener(type: "message", listener: (e: MessageEvent<SaveRequest>) => void): void;
};

async function save(request: SaveRequest): Promise<SaveReply> {
  const { id, path, metadata, tensors, options } = request;
  try {
    const result = await saveCheckpoint(path, { metadata, tensors }, options);
    return { id, ok: true, result, tensors };
  } catch (e) {
    return { id, ok: false, error: serializeError(e), tensors };
  }
}

port.addEventListener("message", async (e) => {
  const reply = await save(e.data);
  try {
    port.postMessage(reply, buffersOf(reply.tensors));
  } catch {
    // The tensors could not be sent back (never expected): still report how the save went.
    port.postMessage({ ...reply, tensors: [] }, []);
  }
});
