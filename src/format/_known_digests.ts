// SHA-256 digests of exact byte ranges, computed ahead by whoever read the bytes (a Blob read in
// a page: src/storage/_piece_hasher.ts hashes each large record in a Web Worker before the
// decoder sees it). Keyed by the memory itself (its ArrayBuffer, offset and length), so a digest
// is found only for the very bytes it was computed over: the decoder checks a record's prefix
// itself, then takes the digest of that record's bytes from here instead of hashing them again.

/** Digests by buffer, then by `offset:length`; a buffer's entries go with it. */
const known = new WeakMap<ArrayBufferLike, Map<string, Uint8Array>>();

/** Notes that `digest` is the SHA-256 of `bytes` (which must not change afterwards). */
export function noteDigest(bytes: Uint8Array, digest: Uint8Array): void {
  let ranges = known.get(bytes.buffer);
  if (!ranges) known.set(bytes.buffer, ranges = new Map());
  ranges.set(`${bytes.byteOffset}:${bytes.byteLength}`, digest);
}

/** The SHA-256 noted for exactly these bytes, taken (each is used once); `undefined` if none was. */
export function takeDigest(bytes: Uint8Array): Uint8Array | undefined {
  const ranges = known.get(bytes.buffer);
  const key = `${bytes.byteOffset}:${bytes.byteLength}`;
  const digest = ranges?.get(key);
  ranges?.delete(key);
  return digest;
}
