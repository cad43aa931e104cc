// The hash thread's worker: the SHA-256 of one region of a buffer transferred to it, sent back
// with the buffer, so a reader verifies one tensor here while its own thread hashes the next.
import { createHash } from "node:crypto";
import { type WorkerMessage, workerScope as scope } from "./workers.ts";

interface Job {
  seq: number;
  buffer: ArrayBuffer;
  offset: number;
  length: number;
}

scope.onmessage = (e: WorkerMessage<Job>) => {
  const { seq, buffer, offset, length } = e.data;
  const d = createHash("sha256").update(new Uint8Array(buffer, offset, length)).digest();
  const digest = new Uint8Array(d.buffer, d.byteOffset, d.byteLength).slice();
  scope.postMessage({ seq, digest, buffer }, [buffer]);
};
scope.postMessage({ ready: true });
