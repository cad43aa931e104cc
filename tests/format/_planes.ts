// Byte planes for the deflate and inflate tests.
import { prng } from "../_util.ts";

/** The top byte of N(0, 0.02) float32 values: an exponent plane, about 2.7 bits per byte. */
export function exponentPlane(n: number, seed: number): Uint8Array {
  const rand = prng(seed);
  const f = new Float32Array(n);
  for (let i = 0; i < n; i++) f[i] = 0.02 * Math.sqrt(-2 * Math.log(rand() || 1e-12)) * Math.cos(2 * Math.PI * rand());
  const bytes = new Uint8Array(f.buffer);
  return new Uint8Array(n).map((_, i) => bytes[4 * i + 3]!);
}

/**
 * Symbol k about 2^-(k+1) of the time, for 41 symbols: a Huffman tree 40 deep, so codes run to
 * deflate's 15 bits (zlib) or to the cap an encoder sets (ours: 12).
 */
export function skewedPlane(n: number, seed: number): Uint8Array {
  const rand = prng(seed);
  return new Uint8Array(n).map(() => {
    let k = 0;
    while (rand() < 0.5 && k < 40) k++;
    return 5 * k + 1;
  });
}
