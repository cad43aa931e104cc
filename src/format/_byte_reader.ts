// A source that reads into buffers the caller gives (an open file is one): decoders read large
// bodies straight into their final buffers through it. Structural, so the format core names no
// platform type; storage backends hand in what they have.

import type { DType } from "./types.ts";

/** Reads into the caller's buffer, like `Deno.FsFile`: how many bytes, or `null` at the end. */
export interface ByteReader {
  /** Fills some of `into` from the current position; `null` at the end. */
  read(into: Uint8Array): Promise<number | null>;
  /** The source's total size. */
  stat(): Promise<{ size: number }>;
  /**
   * A fresh, zeroed buffer of `n` bytes for a body read from this source, if the platform has a
   * better one than `new Uint8Array(n)` (a file reader on Linux asks for huge pages).
   */
  allocate?(n: number): Uint8Array;
  /**
   * Says that the next `into.byteLength` bytes from the current position will be read into
   * `into` (a body's final buffer), so a source that fetches ahead (ranged GETs of an object) can
   * put them there directly, in parallel; the reads that follow still come, in order.
   */
  target?(into: Uint8Array): void;
  /**
   * The next bytes, up to `max` (at least one before the end), as a view of memory the source
   * holds them in, and moves past them; `null` at the end. The view is valid only until the next
   * call on the source: a body that is only hashed is hashed from it, with no copy (a replication
   * verifies the parts it sends from the part buffers themselves).
   */
  borrow?(max: number): Promise<Uint8Array | null>;
  /** Moves to `offset` from the start, for bodies another thread hashes ({@linkcode RangeHasher}). */
  seekTo?(offset: number): Promise<void>;
  /**
   * Starts a second thread that hashes byte ranges of this same source, reading them itself; a
   * file reader in Deno has one. `undefined` where it cannot start.
   */
  rangeHasher?(): Promise<RangeHasher | undefined>;
}

/** A byte-grouped tensor body for a {@linkcode RangeHasher} to decode before it hashes. */
export interface EncodedBody {
  /** The tensor's name, for messages. */
  name: string;
  /** Its dtype (a float dtype: only those are byte-grouped). */
  dtype: DType;
  /** Its element count, checked against its descriptor's shape and byte length. */
  count: number;
  /** Whether the decoded bytes come back (a load) or are dropped once hashed (a verify). */
  keep: boolean;
}

/** Hashes byte ranges of a reader's source on another thread, reading them there. */
export interface RangeHasher {
  /** Whether it is up and idle (it takes one range at a time). */
  readonly ready: boolean;
  /** Settles once it is up (true) or will never be (false). */
  readonly up: Promise<boolean>;
  /** SHA-256 of `prefix` followed by `length` bytes of the source from `offset`. */
  digest(prefix: Uint8Array, offset: number, length: number): Promise<Uint8Array>;
  /**
   * Reads the byte-grouped body of `length` bytes at `offset` there, decodes it (a malformed body
   * rejects with the `SyntaxError` the decoder on this thread would throw), and gives the SHA-256
   * of `prefix` followed by the decoded bytes, and those bytes when `body.keep`.
   */
  decode?(
    prefix: Uint8Array,
    offset: number,
    length: number,
    body: EncodedBody,
  ): Promise<{ digest: Uint8Array; data?: Uint8Array }>;
  /** Ends the thread; a range in flight rejects. */
  close(): void;
}

/** Whether `source` is a {@linkcode ByteReader} rather than a chunk sequence. */
export function isByteReader(source: unknown): source is ByteReader {
  return typeof source === "object" && source !== null && !(Symbol.asyncIterator in source) &&
    typeof (source as ByteReader).read === "function" && typeof (source as ByteReader).stat === "function";
}

/** Fills `into` from the current position; returns how many bytes it got (short only at the end). */
export async function readFull(source: ByteReader, into: Uint8Array): Promise<number> {
  let filled = 0;
  while (filled < into.byteLength) {
    const n = await source.read(into.subarray(filled));
    if (n === null) break;
    filled += n;
  }
  return filled;
}

/**
 * The rest of a source as chunks of `size` bytes, each a fresh buffer (a consumer may keep views
 * into them). Calls `close` at the end, or when the consumer stops early.
 */
export async function* readerChunks(source: ByteReader, size: number, close?: () => void): AsyncGenerator<Uint8Array> {
  try {
    for (;;) {
      const buf = new Uint8Array(size);
      const n = await readFull(source, buf);
      if (n > 0) yield buf.subarray(0, n);
      if (n < size) return;
    }
  } finally {
    close?.();
  }
}
