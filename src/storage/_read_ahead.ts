// Whole reads in pieces, a few ahead of the consumer (a load of a Blob, or of an OPFS file through
// the hash worker's sync access handle): the pieces come in order, each in fresh memory that a
// decoded tensor may view, with the digests the worker computed noted for their bytes.
import { noteDigest } from "../format/_known_digests.ts";
import type { Digested } from "./_piece_hasher.ts";

/** Pieces read ahead of the one the consumer works on (their hashing included). */
const PIECES_AHEAD = 2;

/** A piece back from the worker, each of its `ranges`' digests noted for its bytes ({@linkcode noteDigest}). */
export function notedPiece({ buffer, digests }: Digested, ranges: [number, number][]): Uint8Array {
  const piece = new Uint8Array(buffer);
  ranges.forEach(([at, n], k) => noteDigest(piece.subarray(at, at + n), digests[k]!));
  return piece;
}

/**
 * Pieces `0` to `count - 1` in order, each from `fetch(i)`, started {@linkcode PIECES_AHEAD}
 * ahead of the one the consumer works on; once the consumer stops, those still in flight land
 * before this ends (so what they hold can be let go).
 */
export async function* readAhead(count: number, fetch: (i: number) => Promise<Uint8Array>): AsyncGenerator<Uint8Array> {
  const pieces: Promise<Uint8Array>[] = [];
  const launch = (i: number) => {
    if (i >= count) return;
    const piece = fetch(i);
    piece.catch(() => {}); // awaited in turn; a failure meanwhile is not unhandled
    pieces[i] = piece;
  };
  for (let i = 0; i < PIECES_AHEAD; i++) launch(i);
  try {
    for (let i = 0; i < count; i++) {
      const piece = await pieces[i]!;
      delete pieces[i];
      launch(i + PIECES_AHEAD);
      yield piece;
    }
  } finally {
    await Promise.all(pieces.filter((p) => p !== undefined).map((p) => p.catch(() => {})));
  }
}
