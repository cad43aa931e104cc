// Pulls exact byte counts out of a sequence of chunks of any size: the one place where chunk
// boundaries are handled for every decoder. "Need more bytes" is a pull from the source; a
// source that ends early is a SyntaxError naming the offset and what was being read.

export class ChunkReader {
  #it: AsyncIterator<Uint8Array>;
  #chunks: Uint8Array[] = [];
  #buffered = 0;
  #head = 0; // offset into #chunks[0]
  #done = false;
  #position = 0;
  #label: string;

  constructor(source: AsyncIterable<Uint8Array>, label = "checkpoint") {
    this.#it = source[Symbol.asyncIterator]();
    this.#label = label;
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
  async readExact(n: number, what: string): Promise<Uint8Array> {
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
    const out = new Uint8Array(n);
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

  /** Stops the source early (for example after an error). */
  async cancel(reason?: unknown): Promise<void> {
    this.#chunks = [];
    this.#done = true;
    await this.#it.return?.(reason);
  }
}
