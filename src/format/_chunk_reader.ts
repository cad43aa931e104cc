// Pulls exact byte counts out of a sequence of chunks of any size: the one place where chunk
// boundaries are handled for every decoder. "Need more bytes" is a pull from the source; a
// source that ends early is a SyntaxError naming the offset and what was being read.
//
// The source may also be an open file: then small reads come in 64 KiB chunks and large bodies
// (readBody) are read straight into their final buffer, one piece ahead of the hashing.

import type { Hash } from "./_hash.ts";
import { fileChunks, readFull } from "../storage/_file_io.ts";

/** Chunk size for small reads from a file. */
const FILE_CHUNK = 64 * 1024;
/** Piece size for pipelined body reads from a file. */
const FILE_PIECE = 4 * 2 ** 20;

export class ChunkReader {
  #it: AsyncIterator<Uint8Array>;
  #chunks: Uint8Array[] = [];
  #buffered = 0;
  #head = 0; // offset into #chunks[0]
  #done = false;
  #position = 0;
  #label: string;
  #file: Deno.FsFile | undefined;
  #reuse: boolean;
  #tap: Hash | undefined;
  #body: ArrayBuffer | undefined;

  /**
   * With `reuseBuffers`, bodies that need a buffer of their own share one, grown as needed: each
   * body is valid only until the next readBody.
   */
  /**
   * With `tap`, every byte taken from the source is also fed to it, in order (the file's own
   * digest, computed in the same pass as decoding).
   */
  constructor(
    source: AsyncIterable<Uint8Array> | Deno.FsFile,
    label = "checkpoint",
    reuseBuffers = false,
    tap?: Hash,
  ) {
    this.#reuse = reuseBuffers;
    this.#tap = tap;
    if (source instanceof Deno.FsFile) {
      this.#file = source;
      this.#it = fileChunks(source, FILE_CHUNK);
    } else {
      this.#it = source[Symbol.asyncIterator]();
    }
    this.#label = label;
  }

  #scratch(n: number): Uint8Array {
    if (!this.#body || this.#body.byteLength < n) {
      this.#body = new ArrayBuffer(Math.max(n, (this.#body?.byteLength ?? 0) * 2));
    }
    return new Uint8Array(this.#body, 0, n);
  }

  /** Offset, from the start of the stream, of the next byte to be read. */
  get position(): number {
    return this.#position;
  }

  async #fill(): Promise<boolean> {
    if (this.#done) return false;
    for (;;) {
      const r = await this.#it.next();
      if (r.done) {
        this.#done = true;
        return false;
      }
      const c = r.value;
      if (!(c instanceof Uint8Array)) {
        throw new TypeError(`Cannot decode ${this.#label}: stream chunk is not a Uint8Array`);
      }
      if (c.byteLength === 0) continue;
      this.#tap?.update(c);
      this.#chunks.push(c);
      this.#buffered += c.byteLength;
      return true;
    }
  }

  #fail(n: number, what: string): never {
    throw new SyntaxError(
      `Cannot decode ${this.#label}: stream ends at offset ${this.#position + this.#buffered - this.#head} with ${
        n - (this.#buffered - this.#head)
      } bytes of ${what} missing (read from offset ${this.#position})`,
    );
  }

  /** True when no byte is left. */
  async atEnd(): Promise<boolean> {
    if (this.#buffered - this.#head > 0) return false;
    return !(await this.#fill());
  }

  /** Up to `max` bytes, whatever is buffered or arrives next; empty at the end. */
  async readSome(max: number): Promise<Uint8Array> {
    if (this.#buffered - this.#head === 0 && !(await this.#fill())) return new Uint8Array(0);
    const first = this.#chunks[0]!;
    const n = Math.min(max, first.byteLength - this.#head);
    const out = first.subarray(this.#head, this.#head + n);
    this.#consume(n);
    return out;
  }

  #consume(n: number): void {
    this.#position += n;
    this.#head += n;
    while (this.#chunks.length > 0 && this.#head >= this.#chunks[0]!.byteLength) {
      const c = this.#chunks.shift()!;
      this.#head -= c.byteLength;
      this.#buffered -= c.byteLength;
    }
  }

  /**
   * Exactly `n` bytes: a view into a chunk when they lie in one, else one joined copy. Memory
   * grows with the bytes that arrive, never with `n` alone, so a hostile length cannot make the
   * reader allocate before the bytes exist.
   */
  async readExact(n: number, what: string, into?: (n: number) => Uint8Array): Promise<Uint8Array> {
    if (n === 0) return new Uint8Array(0);
    while (this.#buffered - this.#head < n) {
      if (!(await this.#fill())) this.#fail(n, what);
    }
    const first = this.#chunks[0]!;
    if (first.byteLength - this.#head >= n) {
      const out = first.subarray(this.#head, this.#head + n);
      this.#consume(n);
      return out;
    }
    const out = into ? into(n) : new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const c = this.#chunks[0]!;
      const take = Math.min(c.byteLength - this.#head, n - filled);
      out.set(c.subarray(this.#head, this.#head + take), filled);
      filled += take;
      this.#consume(take);
    }
    return out;
  }

  /**
   * Exactly `n` bytes like {@linkcode readExact}, each fed to `hash` if given. From a file, the bytes go
   * straight into one fresh buffer (allocated only once the file is known to hold them), and the
   * next piece is read while the current one is hashed.
   */
  async readBody(n: number, what: string, hash?: Hash): Promise<Uint8Array> {
    const buffered = this.#buffered - this.#head;
    if (!this.#file || n <= buffered + FILE_CHUNK) {
      const b = await this.readExact(n, what, this.#reuse ? (k) => this.#scratch(k) : undefined);
      hash?.update(b);
      return b;
    }
    const file = this.#file;
    const size = (await file.stat()).size;
    const start = this.#position;
    if (start + n > size) {
      throw new SyntaxError(
        `Cannot decode ${this.#label}: stream ends at offset ${size} with ${
          start + n - size
        } bytes of ${what} missing (read from offset ${start})`,
      );
    }
    const out = this.#reuse ? this.#scratch(n) : new Uint8Array(n);
    let have = 0;
    while (this.#buffered - this.#head > 0) {
      const part = await this.readSome(n);
      out.set(part, have);
      have += part.byteLength;
    }
    hash?.update(out.subarray(0, have));
    const piece = (at: number) => readFull(file, out.subarray(at, Math.min(n, at + FILE_PIECE)));
    let pending: Promise<number> | undefined = piece(have);
    while (pending) {
      const at = have;
      const got = await pending;
      const want = Math.min(n, at + FILE_PIECE) - at;
      if (got < want) {
        throw new SyntaxError(
          `Cannot decode ${this.#label}: file ended at offset ${start + at + got} with ${
            n - at - got
          } bytes of ${what} missing (read from offset ${start})`,
        );
      }
      have += got;
      pending = have < n ? piece(have) : undefined;
      hash?.update(out.subarray(at, at + got));
      this.#tap?.update(out.subarray(at, at + got));
    }
    this.#position = start + n;
    return out;
  }

  /**
   * The next line, `\n` included; `null` at the end of the stream. A last line without `\n` is a
   * truncated stream (SyntaxError); a line longer than `max` bytes is a RangeError.
   */
  async readLine(max: number, line: number): Promise<Uint8Array | null> {
    let scanned = 0; // bytes after #head already searched
    for (;;) {
      let seen = 0;
      for (let i = 0; i < this.#chunks.length; i++) {
        const c = this.#chunks[i]!;
        const from = i === 0 ? this.#head : 0;
        const len = c.byteLength - from;
        if (seen + len > scanned) {
          const start = Math.max(0, scanned - seen);
          const nl = c.indexOf(0x0a, from + start);
          if (nl >= 0) {
            const n = seen + (nl - from) + 1;
            if (n > max + 1) this.#tooLong(max, line);
            return await this.readExact(n, `line ${line}`);
          }
        }
        seen += len;
      }
      scanned = seen;
      if (scanned > max) this.#tooLong(max, line);
      if (!(await this.#fill())) {
        if (scanned === 0) return null;
        throw new SyntaxError(
          `Cannot decode ${this.#label}: line ${line} at offset ${this.#position} ends without a newline (truncated stream)`,
        );
      }
    }
  }

  #tooLong(max: number, line: number): never {
    throw new RangeError(
      `Cannot decode ${this.#label}: line ${line} at offset ${this.#position} is longer than maxLineBytes ${max}`,
    );
  }
}
