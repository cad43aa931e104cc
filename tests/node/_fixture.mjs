// The checkpoint both runtimes write for the byte-for-byte comparison: built from plain
// JavaScript only, so Deno (tests/node/harness.ts, before the Node run) and Node (io_test.mjs)
// build exactly the same input. Also the corruptions both must refuse alike.

/** Weights-like floats from a fixed linear congruential generator. */
function weights(n, seed) {
  const w = new Float32Array(n);
  for (let i = 0, x = seed; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    w[i] = ((x >>> 8) / 16777216 - 0.5) * 0.05;
  }
  return w;
}

/** The fixture checkpoint: every dtype family, a scalar, an optimizer group, odd values. */
export function fixtureCheckpoint() {
  return {
    metadata: { step: 1234, metrics: { loss: 0.125, acc: 0.5 }, custom: { note: "fixture" } },
    tensors: [
      { name: "dense/kernel", dtype: "float32", shape: [64, 32], data: weights(64 * 32, 7) },
      { name: "dense/bias", dtype: "float32", shape: [4], data: new Float32Array([1, -0, NaN, 1e-45]) },
      { name: "emb", dtype: "float16", shape: [3], data: new Uint16Array([0x3c00, 0x7e01, 0x8001]) },
      { name: "ids", dtype: "int32", shape: [2, 2], data: new Int32Array([1, -2, 2147483647, -2147483648]) },
      { name: "mask", dtype: "bool", shape: [3], data: new Uint8Array([1, 0, 1]) },
      { name: "optimizer/iter", dtype: "int64", shape: [], data: new BigInt64Array([1234n]), group: "optimizer" },
    ],
  };
}

/** The codec and compression pairs the comparison covers (file names: `fixture.<codec>.<compression>.ckpt`). */
export const FIXTURE_FORMATS = [
  ["binary", "none"],
  ["binary", "gzip"],
  ["binary", "bytegroup"],
  ["json", "none"],
  ["json", "gzip"],
];

/** Corruptions of the binary fixture (no compression): name to a function of its bytes. */
export const CORRUPTIONS = {
  "a flipped byte in a tensor": (b) => {
    const c = b.slice();
    c[c.length >> 1] ^= 0x01;
    return c;
  },
  "truncated by one byte": (b) => b.slice(0, b.length - 1),
  "truncated in the header": (b) => b.slice(0, 20),
  "a wrong magic": (b) => {
    const c = b.slice();
    c[0] ^= 0xff;
    return c;
  },
  "a trailing byte": (b) => {
    const c = new Uint8Array(b.length + 1);
    c.set(b);
    return c;
  },
};
