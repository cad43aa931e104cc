// The range hasher's worker: opens the file the reader reads, by path, and hashes the byte
// ranges it is sent (a record's prefix, then its body read from the file here) with node:crypto,
// so a verify hashes two tensors at once. A byte-grouped body is decoded here first (the record
// digest covers the decoded bytes), into a buffer reused from one job to the next for a verify,
// or into a fresh one sent back for a load. It answers its first message with the identity of the
// file it opened, which the reader compares with its own before it sends any range.
import { createHash } from "node:crypto";
import type { EncodedBody } from "../format/_byte_reader.ts";
import { decodeByteGroups, PlaneScratch } from "../format/codecs/_bytegroup.ts";
import { freshBuffer } from "./_huge_pages.ts";
import { files, SeekMode, type SyncFileHandle } from "../runtime/files.ts";
import { type WorkerMessage, workerScope as scope } from "../runtime/workers.ts";

interface Open {
  path: string;
}
interface Job {
  seq: number;
  prefix: Uint8Array;
  offset: number;
  length: number;
  decode?: EncodedBody;
}

const PIECE = 2 ** 20;
let file: SyncFileHandle | undefined;
const buf = new Uint8Array(PIECE);
/**
 * Reused by byte-grouped jobs (one at a time): the stored body (buffer 0), its inflated planes,
 * and a verify's decoded bytes (buffer 0); body and decoded bytes in huge pages where granted.
 */
const bodyScratch = new PlaneScratch(freshBuffer);
const planes = new PlaneScratch();
const decodedScratch = new PlaneScratch(freshBuffer);

/** Reads `length` bytes from `offset`, piece by piece into `into` (or `buf`), each given to `use`. */
function readRange(
  offset: number,
  length: number,
  use: (piece: Uint8Array, at: number) => void,
  into: Uint8Array = buf,
): void {
  file!.seekSync(offset, SeekMode.Start);
  for (let done = 0; done < length;) {
    const target = into === buf ? buf.subarray(0, Math.min(length - done, PIECE)) : into.subarray(done, length);
    const n = file!.readSync(target);
    if (n === null || n === 0) {
      throw new SyntaxError(`file ended at offset ${offset + done} with ${length - done} bytes missing`);
    }
    use(target.subarray(0, n), done);
    done += n;
  }
}

async function run(m: Job): Promise<void> {
  const h = createHash("sha256").update(m.prefix);
  if (!m.decode) {
    readRange(m.offset, m.length, (piece) => h.update(piece));
    scope.postMessage({ seq: m.seq, digest: new Uint8Array(h.digest()) });
    return;
  }
  const { name, dtype, count, keep } = m.decode;
  const body = bodyScratch.take(0, m.length);
  readRange(m.offset, m.length, () => {}, body);
  const alloc = keep ? freshBuffer : (n: number) => decodedScratch.take(0, n);
  const data = await decodeByteGroups(body, dtype, count, name, m.offset, { alloc, scratch: planes });
  const digest = new Uint8Array(h.update(data).digest()); // a copy: plain bytes, not a pooled Buffer
  if (!keep) scope.postMessage({ seq: m.seq, digest });
  else {
    const { buffer, byteOffset, byteLength } = data;
    scope.postMessage({ seq: m.seq, digest, data: { buffer, byteOffset, byteLength } }, [buffer as ArrayBuffer]);
  }
}

scope.onmessage = async (e: WorkerMessage<Open | Job>) => {
  const m = e.data;
  if ("path" in m) {
    try {
      file = files.openSync(m.path, { read: true });
      const st = file.statSync();
      scope.postMessage({ ready: true, dev: st.dev, ino: st.ino });
    } catch (err) {
      scope.postMessage({ ready: false, error: String((err as Error)?.message ?? err) });
    }
    return;
  }
  try {
    await run(m);
  } catch (err) {
    // A malformed byte-grouped body is the decoder's SyntaxError, passed on as one.
    const decoding = m.decode !== undefined && err instanceof SyntaxError && err.message.startsWith("Cannot decode");
    scope.postMessage({ seq: m.seq, error: String((err as Error)?.message ?? err), syntax: decoding });
  }
};
