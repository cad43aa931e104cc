// The training demos' data: two interleaved spirals generated from a seed, and a batch order that
// depends only on the step, so a resumed run sees exactly the batches it would have seen.

/** mulberry32: a small seeded PRNG, so the data is the same on every run and machine. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Points in the data set. */
export const POINTS = 1024;

/**
 * Two interleaved spirals with a little noise: x is [points, 2], y is 0 or 1 (the Deno demos use
 * {@linkcode POINTS}, the browser demo fewer).
 */
export function spirals(seed: number, points = POINTS): { x: Float32Array; y: Float32Array } {
  const random = prng(seed);
  const x = new Float32Array(points * 2);
  const y = new Float32Array(points);
  for (let i = 0; i < points; i++) {
    const label = i % 2;
    const r = (i >> 1) / (points / 2) * 3 + 0.3;
    const angle = r * 2.2 + label * Math.PI;
    x[2 * i] = r * Math.cos(angle) + (random() - 0.5) * 0.2;
    x[2 * i + 1] = r * Math.sin(angle) + (random() - 0.5) * 0.2;
    y[i] = label;
  }
  return { x, y };
}

/** The example indices of step `step`: a seeded shuffle per epoch, so it depends on the step alone. */
export function batchIndices(step: number, batch: number, seed: number): Int32Array {
  const out = new Int32Array(batch);
  let epoch = -1;
  let order: Int32Array | undefined;
  for (let k = 0; k < batch; k++) {
    const position = (step - 1) * batch + k;
    const e = Math.floor(position / POINTS);
    if (e !== epoch) {
      epoch = e;
      order = Int32Array.from({ length: POINTS }, (_, i) => i);
      const random = prng(seed * 100_003 + e);
      for (let i = POINTS - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
    }
    out[k] = order![position % POINTS]!;
  }
  return out;
}
