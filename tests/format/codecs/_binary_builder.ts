// Builds binary checkpoints field by field, with correct digests unless told otherwise, so a test
// can make exactly one thing wrong and check that exactly that is reported.
import { createHash } from "node:crypto";

export interface RawRecord {
  kind: number;
  head: string;
  body?: Uint8Array;
  /** Declared body length, when it should differ from body.length. */
  bodyBytes?: bigint;
  /** Padding bytes override (default: zeros to the 64-byte boundary for kind 2). */
  pad?: Uint8Array;
  /** Corrupt the stored digest. */
  badDigest?: boolean;
  /** What the record digest covers instead of `body` (a byte-grouped tensor's decoded bytes). */
  digestBody?: Uint8Array;
}

export interface RawFile {
  magic?: number[];
  version?: number;
  flags?: number;
  records: RawRecord[];
  /** Index JSON; default: built from the tensor records. */
  index?: string;
  indexOffset?: bigint;
  badStreamDigest?: boolean;
  endMagic?: number[];
  trailing?: Uint8Array;
}

const enc = new TextEncoder();

export function buildRaw(f: RawFile): Uint8Array {
  const parts: Uint8Array[] = [];
  const stream = createHash("sha256"); // every byte before the footer except tensor bodies
  let pos = 0;
  const push = (b: Uint8Array, body = false) => {
    parts.push(b);
    if (!body) stream.update(b);
    pos += b.byteLength;
  };
  const header = new Uint8Array(16);
  header.set(f.magic ?? [0x89, 0x43, 0x4b, 0x50, 0x54, 0x0d, 0x0a, 0x1a]);
  new DataView(header.buffer).setUint32(8, f.version ?? 1, true);
  new DataView(header.buffer).setUint32(12, f.flags ?? 0, true);
  push(header);
  const entries: unknown[] = [];
  const record = (r: RawRecord) => {
    const start = pos;
    const head = enc.encode(r.head);
    const body = r.body ?? new Uint8Array(0);
    const rh = new Uint8Array(16);
    rh[0] = r.kind;
    new DataView(rh.buffer).setUint32(4, head.byteLength, true);
    new DataView(rh.buffer).setBigUint64(8, r.bodyBytes ?? BigInt(body.byteLength), true);
    const h = createHash("sha256");
    const out = (b: Uint8Array, isBody = false) => {
      h.update(b);
      push(b, isBody);
    };
    out(rh);
    out(head);
    if (r.kind === 2) out(r.pad ?? new Uint8Array((64 - (pos % 64)) % 64));
    if (r.digestBody) {
      h.update(r.digestBody);
      push(body, true);
    } else out(body, true);
    const d = new Uint8Array(h.digest());
    if (r.badDigest) d[0]! ^= 1;
    push(d);
    if (r.kind === 2) {
      try {
        entries.push({ ...JSON.parse(r.head), offset: start, length: pos - start });
      } catch { /* malformed heads make no entry */ }
    }
  };
  for (const r of f.records) record(r);
  const indexAt = pos;
  record({ kind: 3, head: f.index ?? JSON.stringify({ tensors: entries }) });
  const all = new Uint8Array(pos);
  let o = 0;
  for (const p of parts) {
    all.set(p, o);
    o += p.byteLength;
  }
  const footer = new Uint8Array(48);
  new DataView(footer.buffer).setBigUint64(0, f.indexOffset ?? BigInt(indexAt), true);
  const sd = new Uint8Array(stream.digest());
  if (f.badStreamDigest) sd[0]! ^= 1;
  footer.set(sd, 8);
  footer.set(f.endMagic ?? [0x43, 0x4b, 0x50, 0x54, 0x45, 0x4e, 0x44, 0x0a], 40);
  const trailing = f.trailing ?? new Uint8Array(0);
  const file = new Uint8Array(all.byteLength + 48 + trailing.byteLength);
  file.set(all);
  file.set(footer, all.byteLength);
  file.set(trailing, all.byteLength + 48);
  return file;
}

/** A metadata record. */
export function meta(json = '{"step":1}'): RawRecord {
  return { kind: 1, head: json };
}

/** A tensor record from a descriptor object and body. */
export function tensor(desc: Record<string, unknown>, body: Uint8Array, extra: Partial<RawRecord> = {}): RawRecord {
  return { kind: 2, head: JSON.stringify(desc), body, ...extra };
}
