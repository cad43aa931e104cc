import assert from "node:assert/strict";
import type { Tensor } from "../../mod.ts";
import { compareTensors, tensorStats } from "../../src/cli/_stats.ts";

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

Deno.test("compareTensors measures absolute and relative differences and the tolerance", () => {
  const a = t("float32", new Float32Array([1, 2, 0, -4]));
  const b = t("float32", new Float32Array([1, 2.5, 0, -3]));
  assert.deepEqual(compareTensors(a, b, { atol: 0, rtol: 0 }), { maxAbs: 1, maxRel: 0.25, changed: 2, outside: 2 });
  assert.equal(compareTensors(a, b, { atol: 0.5, rtol: 0 }).outside, 1);
  assert.equal(compareTensors(a, b, { atol: 0.5, rtol: 0.2 }).outside, 0);
  const z = compareTensors(t("float64", new Float64Array([0, -0])), t("float64", new Float64Array([0, 0])), {
    atol: 0,
    rtol: 0,
  });
  assert.equal(z.changed, 0, "-0 equals 0");
});

Deno.test("compareTensors treats NaN as equal to NaN and infinitely far from anything else", () => {
  const a = t("float32", new Float32Array([NaN, Infinity, -Infinity, 1]));
  const same = compareTensors(a, t("float32", new Float32Array([NaN, Infinity, -Infinity, 1])), { atol: 0, rtol: 0 });
  assert.equal(same.changed, 0);
  const d = compareTensors(a, t("float32", new Float32Array([0, -Infinity, -Infinity, 1])), { atol: 1e9, rtol: 1 });
  assert.deepEqual(d, { maxAbs: Infinity, maxRel: Infinity, changed: 2, outside: 2 });
});

Deno.test("compareTensors subtracts 64-bit integers exactly and widens 16-bit floats", () => {
  const a = t("int64", new BigInt64Array([2n ** 62n, -(2n ** 62n)]));
  const b = t("int64", new BigInt64Array([2n ** 62n + 3n, 2n ** 62n]));
  const d = compareTensors(a, b, { atol: 3, rtol: 0 });
  assert.equal(d.changed, 2);
  assert.equal(d.maxAbs, 2 ** 63);
  assert.equal(d.outside, 1, "a difference of exactly 3 is within atol 3");
  const h = compareTensors(t("float16", new Uint16Array([0x3c00])), t("float16", new Uint16Array([0x4000])), {
    atol: 0,
    rtol: 0,
  });
  assert.deepEqual(h, { maxAbs: 1, maxRel: 0.5, changed: 1, outside: 1 });
});

Deno.test("compareTensors compares tensors of different dtypes as numbers", () => {
  const f32 = t("float32", new Float32Array([1, 2, 0.1]));
  const f16 = t("float16", new Uint16Array([0x3c00, 0x4000, 0x2e66])); // 1, 2, 0.0999755859375
  const d = compareTensors(f32, f16, { atol: 1e-4, rtol: 0 });
  assert.equal(d.changed, 1);
  assert.ok(Math.abs(d.maxAbs - (Math.fround(0.1) - 0.0999755859375)) < 1e-12);
  assert.equal(d.outside, 0);
  const ints = compareTensors(t("int64", new BigInt64Array([5n, -7n])), t("int32", new Int32Array([5, -8])), {
    atol: 0,
    rtol: 0,
  });
  assert.deepEqual([ints.changed, ints.maxAbs], [1, 1]);
});
