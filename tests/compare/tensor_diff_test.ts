import assert from "node:assert/strict";
import type { Tensor } from "../../mod.ts";
import { compareTensors } from "../../src/compare/tensor_diff.ts";

const t = (dtype: Tensor["dtype"], data: Tensor["data"]): Tensor => ({
  name: "x",
  dtype,
  shape: [data.length],
  group: "params",
  data,
});

Deno.test("compareTensors measures absolute and relative differences and the tolerance", () => {
  const a = t("float32", new Float32Array([1, 2, 0, -4]));
  const b = t("float32", new Float32Array([1, 2.5, 0, -3]));
  assert.deepEqual(compareTensors(a, b, { atol: 0, rtol: 0 }), {
    maxAbs: 1,
    maxRel: 0.25,
    changed: 2,
    outside: 2,
    first: { index: 1, actual: 2, expected: 2.5 },
  });
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
  assert.deepEqual(d, {
    maxAbs: Infinity,
    maxRel: Infinity,
    changed: 2,
    outside: 2,
    first: { index: 0, actual: NaN, expected: 0 },
  });
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
  assert.deepEqual(h, { maxAbs: 1, maxRel: 0.5, changed: 1, outside: 1, first: { index: 0, actual: 1, expected: 2 } });
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

Deno.test("compareTensors: exactly at atol is within, the next float above is outside", () => {
  const a = t("float64", new Float64Array([1, 1]));
  const b = t("float64", new Float64Array([1.5, 1.5000000000000002]));
  const d = compareTensors(a, b, { atol: 0.5 });
  assert.equal(d.changed, 2);
  assert.equal(d.outside, 1);
  assert.deepEqual(d.first, { index: 1, actual: 1, expected: 1.5000000000000002 });
});

Deno.test("compareTensors: equalNaN false makes NaN against NaN a difference; signedZero makes -0 against 0 one", () => {
  const nan = compareTensors(t("float32", new Float32Array([NaN])), t("float32", new Float32Array([NaN])), {
    equalNaN: false,
    atol: 1,
  });
  assert.deepEqual([nan.changed, nan.outside, nan.maxAbs], [1, 1, Infinity]);
  const z = compareTensors(t("float32", new Float32Array([0, -0])), t("float32", new Float32Array([-0, -0])), {
    signedZero: true,
    atol: 1,
  });
  assert.deepEqual([z.changed, z.outside, z.maxAbs, z.first], [1, 1, 0, { index: 0, actual: 0, expected: -0 }]);
});

Deno.test("compareTensors keeps int64 extremes exact in the first difference, and compares bools as 0 and 1", () => {
  const max = 2n ** 63n - 1n;
  const min = -(2n ** 63n);
  const d = compareTensors(t("int64", new BigInt64Array([max, min])), t("int64", new BigInt64Array([max - 1n, min])));
  assert.deepEqual([d.changed, d.outside, d.maxAbs], [1, 1, 1]);
  assert.deepEqual(d.first, { index: 0, actual: max, expected: max - 1n });
  const b = compareTensors(t("bool", new Uint8Array([1, 0, 1])), t("bool", new Uint8Array([1, 1, 1])));
  assert.deepEqual(b.first, { index: 1, actual: 0, expected: 1 });
});
