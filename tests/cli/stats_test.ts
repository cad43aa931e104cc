import assert from "node:assert/strict";
import type { Tensor } from "../../mod.ts";
import { tensorStats } from "../../src/cli/_stats.ts";

const t = (dtype: Tensor["dtype"], data: Tensor["data"]): Tensor => ({
  name: "x",
  dtype,
  shape: [data.length],
  group: "params",
  data,
});

Deno.test("tensorStats ignores NaN, counts it, and has no min/max/mean for empty or all-NaN tensors", () => {
  assert.deepEqual(tensorStats(t("float32", new Float32Array([NaN, -2, 4, NaN]))), {
    min: -2,
    max: 4,
    mean: 1,
    nan: 2,
  });
  assert.deepEqual(tensorStats(t("float64", new Float64Array([NaN]))), { min: null, max: null, mean: null, nan: 1 });
  assert.deepEqual(tensorStats(t("int8", new Int8Array([]))), { min: null, max: null, mean: null, nan: 0 });
  assert.deepEqual(tensorStats(t("float32", new Float32Array([-Infinity, 1]))), {
    min: -Infinity,
    max: 1,
    mean: -Infinity,
    nan: 0,
  });
});

Deno.test("tensorStats widens float16 and bfloat16 bit patterns exactly", () => {
  // float16: 1, -2, 65504 (max), NaN; bfloat16: 1, -0.5, NaN.
  assert.deepEqual(tensorStats(t("float16", new Uint16Array([0x3c00, 0xc000, 0x7bff, 0x7e00]))), {
    min: -2,
    max: 65504,
    mean: (1 - 2 + 65504) / 3,
    nan: 1,
  });
  assert.deepEqual(tensorStats(t("bfloat16", new Uint16Array([0x3f80, 0xbf00, 0x7fc0]))), {
    min: -0.5,
    max: 1,
    mean: 0.25,
    nan: 1,
  });
});

Deno.test("tensorStats keeps 64-bit integer min and max exact and counts bools as 0 and 1", () => {
  const s = tensorStats(t("uint64", new BigUint64Array([2n ** 64n - 1n, 3n])));
  assert.equal(s.min, 3n);
  assert.equal(s.max, 2n ** 64n - 1n);
  assert.deepEqual(tensorStats(t("bool", new Uint8Array([1, 0, 1, 1]))), { min: 0, max: 1, mean: 0.75, nan: 0 });
});
