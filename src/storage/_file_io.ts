// Reading files in full-size pieces: a read may return fewer bytes than asked for, so every
// caller loops; this is that loop, once (the format core's, over any reader a file satisfies).
import { type ByteReader, readerChunks, readFull } from "../format/_byte_reader.ts";
import { freshBuffer } from "./_huge_pages.ts";

export { readFull };

/**
 * The rest of an open file as chunks of `size` bytes, each a fresh buffer (a consumer may keep
 * views into them). Closes the file at the end, or when the consumer stops early, if `close`.
 */
export function fileChunks(file: Deno.FsFile, size: number, close = false): AsyncGenerator<Uint8Array> {
  return readerChunks(file, size, close ? () => file.close() : undefined);
}

/**
 * An open file as a decoder's byte source: bodies read straight into their buffers, which are
 * allocated in huge pages where the platform allows it (`_huge_pages.ts`).
 */
export function fileReader(file: Deno.FsFile): ByteReader {
  return { read: (into) => file.read(into), stat: () => file.stat(), allocate: freshBuffer };
}
