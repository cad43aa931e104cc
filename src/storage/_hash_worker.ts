// The hash worker: SHA-256 over staged bytes in SharedArrayBuffers, in the order they come, so
// the thread that encodes a checkpoint does not also hash every byte it writes.
import { createHash } from "node:crypto";
import { type WorkerMessage, workerScope as scope } from "../runtime/workers.ts";

type Message =
  | { op: "update"; seq: number; buffer: SharedArrayBuffer; length: number }
  | { op: "digest"; seq: number };

const hash = createHash("sha256");
scope.onmessage = (e: WorkerMessage<Message>) => {
  const m = e.data;
  if (m.op === "update") {
    hash.update(new Uint8Array(m.buffer, 0, m.length));
    scope.postMessage({ seq: m.seq });
  } else {
    scope.postMessage({ seq: m.seq, hex: hash.digest("hex") });
  }
};
