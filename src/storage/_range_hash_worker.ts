// The range hasher's worker: opens the file the reader reads, by path, and hashes the byte
// ranges it is sent (a record's prefix, then its body read from the file here) with node:crypto,
// so a verify hashes two tensors at once. It answers its first message with the identity of the
// file it opened, which the reader compares with its own before it sends any range.
import { createHash } from "node:crypto";

interface Open {
  path: string;
}
interface Job {
  seq: number;
  prefix: Uint8Array;
  offset: number;
  length: number;
}

const PIECE = 2 ** 20;
const scope = self as unknown as Worker;
let file: Deno.FsFile | undefined;
const buf = new Uint8Array(PIECE);

scope.onmessage = (e: MessageEvent<Open | Job>) => {
  const m = e.data;
  if ("path" in m) {
    try {
      file = Deno.openSync(m.path, { read: true });
      const st = file.statSync();
      scope.postMessage({ ready: true, dev: st.dev, ino: st.ino });
    } catch (err) {
      scope.postMessage({ ready: false, error: String((err as Error)?.message ?? err) });
    }
    return;
  }
  try {
    const h = createHash("sha256").update(m.prefix);
    file!.seekSync(m.offset, Deno.SeekMode.Start);
    for (let left = m.length; left > 0;) {
      const n = file!.readSync(buf.subarray(0, Math.min(left, PIECE)));
      if (n === null || n === 0) {
        throw new SyntaxError(`file ended at offset ${m.offset + m.length - left} with ${left} bytes missing`);
      }
      h.update(buf.subarray(0, n));
      left -= n;
    }
    const d = h.digest();
    scope.postMessage({ seq: m.seq, digest: new Uint8Array(d.buffer, d.byteOffset, d.byteLength).slice() });
  } catch (err) {
    scope.postMessage({ seq: m.seq, error: String((err as Error)?.message ?? err) });
  }
};
