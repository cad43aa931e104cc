// Reading files in full-size pieces: a read may return fewer bytes than asked for, so every
// caller loops; this is that loop, once (the format core's, over any reader a file satisfies).
import { readerChunks, readFull } from "../format/_byte_reader.ts";

export { readFull };

/**
 * The rest of an open file as chunks of `size` bytes, each a fresh buffer (a consumer may keep
 * views into them). Closes the file at the end, or when the consumer stops early, if `close`.
 */
export function fileChunks(file: Deno.FsFile, size: number, close = false): AsyncGenerator<Uint8Array> {
  return readerChunks(file, size, close ? () => file.close() : undefined);
}
