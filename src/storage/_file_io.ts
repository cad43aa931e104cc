// Reading files in full-size pieces: a read may return fewer bytes than asked for, so every
// caller loops; this is that loop, once.

/** Fills `into` from the file's current position; returns how many bytes it got (short only at the end). */
export async function readFull(file: Deno.FsFile, into: Uint8Array): Promise<number> {
  let filled = 0;
  while (filled < into.byteLength) {
    const n = await file.read(into.subarray(filled));
    if (n === null) break;
    filled += n;
  }
  return filled;
}

/**
 * The rest of an open file as chunks of `size` bytes, each a fresh buffer (a consumer may keep
 * views into them). Closes the file at the end, or when the consumer stops early, if `close`.
 */
export async function* fileChunks(file: Deno.FsFile, size: number, close = false): AsyncGenerator<Uint8Array> {
  try {
    for (;;) {
      const buf = new Uint8Array(size);
      const n = await readFull(file, buf);
      if (n > 0) yield buf.subarray(0, n);
      if (n < size) return;
    }
  } finally {
    if (close) file.close();
  }
}
