// Pulls exact byte counts out of a sequence of chunks of any size: the one place where chunk
// boundaries are handled for every decoder. "Need more bytes" is a pull from the source; a
// source that ends early is a SyntaxError naming the offset and what was being read.
//
// The source may also be an open file (any ByteReader): then small reads come in 64 KiB chunks and large bodies
// (readBody) are read straight into their final buffer, one piece ahead of the hashing.

import type { Hash } from "./_hash.ts";
import { type ByteReader, isByteReader, readerChunks, readFull } from "./_byte_reader.ts";
import { iteratorOf } from "./_streams.ts";

/** Chunk size for small reads from a file. */
const FILE_CHUNK = 64 * 1024;
/** Piece size for body reads from a file that nothing on this thread hashes as they arrive. */
const FILE_PIECE = 4 * 2 ** 20;
/**
 * Piece size for bodies that are only hashed ({@linkcode ChunkReader.hashBody}): two such
 * buffers, reused for every body, are all the memory a verify needs, however large the tensor.
 * Also the piece size of a body read from a file and hashed on this thread as it arrives
 * ({@linkcode ChunkReader.readBody} with a hash or a tap): the next piece is read while one is
 * hashed, but a body's first piece has nothing to be hashed beside it, so the smaller the pieces,
 * the less of each body is read with this thread idle. 512 MiB loads of 16 MiB tensors without
 * FFI, each in its own process (6 each, alternating): 0.392 s median with 1 MiB pieces, 0.416 s
 * with 4 MiB, 0.384 s with 512 KiB; with nothing hashed here (FFI granted: the native thread
 * hashes whole bodies) 4 MiB pieces stay, as smaller ones only add calls (0.298 s median
 * against 0.314 s with 1 MiB, 0.345 s with 512 KiB).
 */
export const HASH_PIECE = 2 ** 20;
const EMPTY = new Uint8Array(0);

export class ChunkReader {
  #it: AsyncIterator<Uint8Array>;
  // Buffered chunks are #chunks[#first..]; consumed ones are dropped in batches, so taking a
  // chunk costs O(1) whatever the chunking (an Array.shift per chunk made small chunks quadratic).
  #chunks: Uint8Array[] = [];
  #first = 0;
  #buffered = 0; // bytes in #chunks[#first..]
  #head = 0; // offset into #chunks[#first]
  #done = false;
  #position = 0;
  #label: string;
  #file: ByteReader | undefined;
  #reuse: boolean;
  #tap: Hash | undefined;
  #body: Uint8Array | undefined;
  #pieces: [Uint8Array, Uint8Array] | undefined;
  /** The file's size when it was last asked for (a body that does not fit asks again). */
  #size: number | undefined;

  /**
   * With `reuseBuffers`, bodies that need a buffer of their own share one, grown as needed: each
   * body is valid only until the next readBody.
   */
  /**
   * With `tap`, every byte taken from the source is also fed to it, in order (the file's own
   * digest, computed in the same pass as decoding).
   */
  constructor(
    source: AsyncIterable<Uint8Array> | ByteReader,
    label = "checkpoint",
    reuseBuffers = false,
    tap?: Hash,
  ) {
    this.#reuse = reuseBuffers;
    this.#tap = tap;
    if (isByteReader(source)) {
      this.#file = source;
      this.#it = readerChunks(source, FILE_CHUNK);
    } else {
      this.#it = iteratorOf(source) as AsyncIterator<Uint8Array>;
    }
    this.#label = label;
  }

  #scratch(n: number): Uint8Array {
    if (!this.#body || this.#body.byteLength < n) {
      this.#body = this.allocate(Math.max(n, (this.#body?.byteLength ?? 0) * 2));
    }
    return this.#body.subarray(0, n);
  }

  /**
   * A fresh, zeroed buffer of `n` bytes for a body: from the file's allocator where it has one
   * (possibly a view into a larger buffer, 8-byte aligned).
   */
  allocate(n: number): Uint8Array {
    return this.#file?.allocate?.(n) ?? new Uint8Array(n);
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
      this.#push(c);
      return true;
    }
  }

  /** Buffers a chunk taken from the source (and shows it to the tap). */
  #push(c: Uint8Array): void {
    this.#tap?.update(c);
    this.#chunks.push(c);
    this.#buffered += c.byteLength;
  }

  /** The stream ended `n - have` bytes short of a read of `n` that started at `start`. */
  #fail(n: number, what: string, start = this.#position, have = this.#buffered - this.#head): never {
    throw new SyntaxError(
      `Cannot decode ${this.#label}: truncated, stream ends at offset ${start + have} with ${
        n - have
      } bytes of ${what} missing (read from offset ${start})`,
    );
  }

  /**
   * Stops the source early: returns its iterator, so that a generator's `finally` (closing the
   * file it reads) runs now. For a reader left unfinished, after an error or on purpose; a source
   * already ended is left as is.
   */
  async close(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    this.#chunks = [];
    this.#first = this.#buffered = this.#head = 0;
    await this.#it.return?.();
  }

  /** True when no byte is left. */
  async atEnd(): Promise<boolean> {
    if (this.#buffered - this.#head > 0) return false;
    return !(await this.#fill());
  }

  /** Up to `max` bytes, whatever is buffered or arrives next; empty at the end. */
  async readSome(max: number): Promise<Uint8Array> {
    if (this.#buffered - this.#head === 0 && !(await this.#fill())) return new Uint8Array(0);
    return this.#take(max);
  }

  /** Up to `max` bytes of the first buffered chunk (there must be one). */
  #take(max: number): Uint8Array {
    const first = this.#chunks[this.#first]!;
    const n = Math.min(max, first.byteLength - this.#head);
    const out = first.subarray(this.#head, this.#head + n);
    this.#consume(n);
    return out;
  }

  #consume(n: number): void {
    this.#position += n;
    this.#head += n;
    const chunks = this.#chunks;
    while (this.#first < chunks.length && this.#head >= chunks[this.#first]!.byteLength) {
      const c = chunks[this.#first]!;
      chunks[this.#first++] = EMPTY; // let the chunk go now
      this.#head -= c.byteLength;
      this.#buffered -= c.byteLength;
    }
    if (this.#first === chunks.length) {
      chunks.length = 0;
      this.#first = 0;
    } else if (this.#first >= 1024 && this.#first * 2 >= chunks.length) {
      this.#chunks = chunks.slice(this.#first);
      this.#first = 0;
    }
  }

  /**
   * Exactly `n` bytes: a view into a chunk when they lie in one, else one joined copy (each piece
   * fed to `hash` as it is taken, if given). Memory
   * grows with the bytes that arrive, never with `n` alone: the copy is allocated once half of
   * the bytes have arrived (so a hostile length cannot make the reader allocate more than twice
   * what the source really sent), and later chunks are copied in as they come and let go.
   */
  async readExact(n: number, what: string, into?: (n: number) => Uint8Array, hash?: Hash): Promise<Uint8Array> {
    if (n === 0) return new Uint8Array(0);
    while (this.#buffered - this.#head < n && this.#buffered - this.#head < n / 2) {
      if (!(await this.#fill())) this.#fail(n, what);
    }
    const first = this.#chunks[this.#first];
    if (first !== undefined && first.byteLength - this.#head >= n) {
      const out = first.subarray(this.#head, this.#head + n);
      this.#consume(n);
      hash?.update(out);
      return out;
    }
    const start = this.#position;
    const out = into ? into(n) : new Uint8Array(n);
    let filled = 0;
    for (;;) {
      while (filled < n && this.#buffered - this.#head > 0) {
        const c = this.#chunks[this.#first]!;
        const take = Math.min(c.byteLength - this.#head, n - filled);
        const piece = c.subarray(this.#head, this.#head + take);
        out.set(piece, filled);
        // Hashed piece by piece, as it is copied: the bytes are still in cache, and the hashing
        // is spread over the body's arrival rather than done at its end.
        hash?.update(piece);
        filled += take;
        this.#consume(take);
      }
      if (filled === n) return out;
      if (!(await this.#fill())) this.#fail(n, what, start, filled);
    }
  }

  /**
   * Exactly `n` bytes like {@linkcode readExact}, each fed to `hash` if given. From a file, the bytes go
   * straight into one fresh buffer (allocated only once the file is known to hold them), and the
   * next piece is read while the current one is hashed. `into` says where bodies that need a
   * buffer of their own go: `"scratch"`, the reader's own buffer, valid until the next readBody
   * (for bodies decoded at once); a function giving a buffer of `n` bytes, or of up to `n + room`
   * when it may hold more (scratch memory: the bytes after the body are then read with its last
   * piece, saving the next small read a call of its own); or by default a fresh buffer (the
   * reader's own one with `reuseBuffers`). From a chunk sequence, a body that lies in one chunk
   * is a view into it whatever `into` says.
   */
  async readBody(
    n: number,
    what: string,
    hash?: Hash,
    into: "scratch" | ((n: number, room: number) => Uint8Array) | undefined = this.#reuse ? "scratch" : undefined,
  ): Promise<Uint8Array> {
    const alloc = into === "scratch" ? (k: number, room: number) => this.#scratch(k + room) : into;
    const buffered = this.#buffered - this.#head;
    if (!this.#file || n <= buffered + FILE_CHUNK) {
      return await this.readExact(n, what, alloc && ((k) => alloc(k, 0)), hash);
    }
    const file = this.#file;
    const start = this.#position;
    // Once the file's size is known, the first piece is asked for before this returns: a caller
    // can decode a body while the next one is read.
    if (this.#size === undefined || start + n > this.#size) await this.#holds(file, start, n, what);
    const whole = alloc ? alloc(n, FILE_CHUNK) : this.allocate(n);
    // Room past the body: the last piece reads on into it, and what it got there is buffered.
    const room = Math.min(FILE_CHUNK, whole.byteLength - n);
    const out = whole.subarray(0, n);
    let have = 0;
    while (this.#buffered - this.#head > 0) {
      const part = this.#take(n);
      out.set(part, have);
      have += part.byteLength;
    }
    hash?.update(out.subarray(0, have));
    file.target?.(out.subarray(have));
    const step = hash || this.#tap ? HASH_PIECE : FILE_PIECE;
    const end = (at: number) => Math.min(n, at + step);
    const piece = (at: number) => readFull(file, whole.subarray(at, end(at) === n ? n + room : end(at)));
    let pending: Promise<number> | undefined = piece(have);
    while (pending) {
      const at = have;
      const want = end(at) - at;
      const read = await pending;
      const got = Math.min(read, want);
      if (got < want) {
        this.#ended(start, at + got, n, what);
      }
      have += got;
      pending = have < n ? piece(have) : undefined;
      hash?.update(out.subarray(at, at + got));
      this.#tap?.update(out.subarray(at, at + got));
      // The bytes read past the body: a chunk of their own (the scratch they landed in is reused).
      if (read > got) this.#push(whole.slice(n, n + read - got));
    }
    this.#position = start + n;
    return out;
  }

  /** A file that ended `have` bytes into a body of `n` read from `start` (shorter than its size said). */
  #ended(start: number, have: number, n: number, what: string): never {
    throw new SyntaxError(
      `Cannot decode ${this.#label}: file ended at offset ${start + have} with ${
        n - have
      } bytes of ${what} missing (read from offset ${start})`,
    );
  }

  /** Throws the truncation error when `file` is too short to hold `n` bytes from `start`. */
  async #holds(file: ByteReader, start: number, n: number, what: string): Promise<void> {
    const size = this.#size = (await file.stat()).size;
    if (start + n > size) {
      throw new SyntaxError(
        `Cannot decode ${this.#label}: truncated, stream ends at offset ${size} with ${
          start + n - size
        } bytes of ${what} missing (read from offset ${start})`,
      );
    }
  }

  /**
   * Moves past the next `n` bytes of a file without reading them (another thread hashes them);
   * false where that cannot be done (a chunk sequence, a file that cannot seek, or a `tap` that
   * must see every byte), and nothing was taken. A file too short to hold them is a `SyntaxError`.
   */
  async skipBody(n: number, what: string): Promise<boolean> {
    const file = this.#file;
    if (!file?.seekTo || this.#tap) return false;
    const start = this.#position;
    await this.#holds(file, start, n, what);
    const buffered = this.#buffered - this.#head;
    if (buffered >= n) {
      this.#consume(n);
      return true;
    }
    // The file stands just past the buffered bytes: drop them and seek past the rest.
    this.#consume(buffered);
    await file.seekTo(start + n);
    this.#position = start + n;
    return true;
  }

  /**
   * Takes the next `n` bytes without keeping them: each piece goes to `hash` and then to `check`
   * (with its offset in the body), in order. From a file, the bytes are read through two
   * {@linkcode HASH_PIECE} buffers reused for every body, the next piece read while one is hashed
   * (or, from a source that lends its memory, {@linkcode ByteReader.borrow}, hashed there);
   * from a chunk sequence, the chunks themselves are hashed (no copy). The memory this takes does
   * not grow with `n`.
   */
  async hashBody(n: number, what: string, hash: Hash, check?: (piece: Uint8Array, at: number) => void): Promise<void> {
    const start = this.#position;
    let have = 0;
    const take = (piece: Uint8Array) => {
      hash.update(piece);
      check?.(piece, have);
      have += piece.byteLength;
    };
    // Bytes already buffered (or, from a chunk sequence, all of them) come from the chunks.
    while (have < n && (this.#buffered - this.#head > 0 || !this.#file)) {
      const part = await this.readSome(n - have);
      if (part.byteLength === 0) this.#fail(n, what, start, have);
      take(part);
    }
    if (have === n) return;
    const file = this.#file!;
    await this.#holds(file, start, n, what);
    if (file.borrow) {
      // Hashed where the source holds them: no copy, no piece buffers. A piece at a time, as
      // from a file: the thread stays free for the source's other work between pieces.
      while (have < n) {
        const lent = await file.borrow(Math.min(n - have, HASH_PIECE));
        if (!lent?.byteLength) this.#ended(start, have, n, what);
        take(lent);
        this.#tap?.update(lent);
      }
      this.#position = start + n;
      return;
    }
    this.#pieces ??= [new Uint8Array(HASH_PIECE), new Uint8Array(HASH_PIECE)];
    const pieces = this.#pieces;
    let turn = 0;
    const piece = (at: number) => readFull(file, pieces[turn]!.subarray(0, Math.min(HASH_PIECE, n - at)));
    let pending: Promise<number> | undefined = piece(have);
    try {
      while (pending) {
        const at = have;
        const got: number = await pending;
        const want = Math.min(HASH_PIECE, n - at);
        if (got < want) {
          this.#ended(start, at + got, n, what);
        }
        const current = pieces[turn]!.subarray(0, got);
        turn ^= 1;
        pending = at + got < n ? piece(at + got) : undefined;
        take(current);
        this.#tap?.update(current);
      }
    } catch (e) {
      // A piece may still be in flight (a check failed): let it land before the file is closed.
      await pending?.catch(() => {});
      throw e;
    }
    this.#position = start + n;
  }

  /**
   * The next line, `\n` included; `null` at the end of the stream. A last line without `\n` is a
   * truncated stream (SyntaxError); a line longer than `max` bytes is a RangeError.
   */
  async readLine(max: number, line: number): Promise<Uint8Array | null> {
    // Each buffered byte is searched once: the scan resumes where the last chunk left off.
    let i = this.#first;
    let seen = 0; // bytes of the line before #chunks[i]
    for (;;) {
      for (; i < this.#chunks.length; i++) {
        const c = this.#chunks[i]!;
        const from = i === this.#first ? this.#head : 0;
        const nl = c.indexOf(0x0a, from);
        if (nl >= 0) {
          const n = seen + (nl - from) + 1;
          if (n > max + 1) this.#tooLong(max, line);
          return await this.readExact(n, `line ${line}`);
        }
        seen += c.byteLength - from;
        if (seen > max) this.#tooLong(max, line);
      }
      if (!(await this.#fill())) {
        if (seen === 0) return null;
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
