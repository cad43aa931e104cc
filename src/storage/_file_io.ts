// Reading files in full-size pieces: a read may return fewer bytes than asked for, so every
// caller loops; this is that loop, once (the format core's, over any reader a file satisfies).
import { type ByteReader, type RangeHasher, readerChunks, readFull } from "../format/_byte_reader.ts";
import { FileRangeHasher } from "./_range_hash.ts";
import { freshBuffer } from "./_huge_pages.ts";
import { type FileHandle, SeekMode } from "../runtime/files.ts";

export { readFull };

/**
 * The rest of an open file as chunks of `size` bytes, each a fresh buffer (a consumer may keep
 * views into them). Closes the file at the end, or when the consumer stops early, if `close`.
 */
export function fileChunks(file: FileHandle, size: number, close = false): AsyncGenerator<Uint8Array> {
  return readerChunks(file, size, close ? () => file.close() : undefined);
}

/**
 * An open file as a decoder's byte source: bodies read straight into their buffers, which are
 * allocated in huge pages where the platform allows it (`_huge_pages.ts`); with its `path`, a
 * verify may hash every other large body on a second thread that reads it from the file itself.
 */
export function fileReader(file: FileHandle, path?: string): ByteReader {
  return {
    read: (into) => file.read(into),
    stat: () => file.stat(),
    allocate: freshBuffer,
    seekTo: async (offset) => void await file.seek(offset, SeekMode.Start),
    ...(path === undefined ? {} : { rangeHasher: () => startRangeHasher(path, file) }),
  };
}

/** A {@linkcode FileRangeHasher} for the file open as `file` at `path`; `undefined` where Workers cannot start. */
export async function startRangeHasher(path: string, file: FileHandle): Promise<RangeHasher | undefined> {
  try {
    const { dev, ino } = await file.stat();
    return new FileRangeHasher(path, { dev, ino });
  } catch {
    return undefined;
  }
}
