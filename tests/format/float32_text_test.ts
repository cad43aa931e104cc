import assert from "node:assert/strict";
import { encodeCheckpoint, loadCheckpoint } from "../../mod.ts";
import { float32ToString } from "../../src/format/_float32_text.ts";
import { assertSameCheckpoint, collect, prng } from "../_util.ts";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const fromBits = (bits: number): number => {
  u32[0] = bits;
  return f32[0]!;
};

/** The reference: the fewest significant digits (toPrecision) whose float64 reading rounds to x as a float32. */
function reference(x: number): string {
  for (let p = 1; p <= 9; p++) {
    const v = Number(x.toPrecision(p));
    if (Math.fround(v) === x) return String(v);
  }
  throw new Error(`no 9-digit decimal reads back as ${x}`);
}

function check(bits: number): void {
  const x = fromBits(bits);
  if (!Number.isFinite(x) || x === 0) return;
  const text = float32ToString(x);
  // Exact: the text reads back as the same float32, bit for bit.
  f32[0] = Number(text);
  assert.equal(
    u32[0]! >>> 0,
    bits >>> 0,
    `${text} reads back as bits ${(u32[0]! >>> 0).toString(16)}, not ${bits.toString(16)}`,
  );
  // Shortest, and in Number.prototype.toString's notation.
  assert.equal(text, reference(x), `bits ${bits.toString(16)}`);
}

Deno.test("float32 shortest digits: 300 000 random bit patterns read back bit for bit, and are the shortest", () => {
  const rand = prng(2026);
  for (let i = 0; i < 300_000; i++) check((rand() * 2 ** 32) >>> 0);
});

Deno.test("float32 shortest digits: every exponent's edges, subnormals, powers of two and weight-like values", () => {
  for (let e = 0; e < 255; e++) {
    for (const sign of [0, 0x80000000]) {
      for (const mant of [0, 1, 2, 3, 0x3fffff, 0x400000, 0x400001, 0x7ffffd, 0x7ffffe, 0x7fffff]) {
        check((sign | (e << 23) | mant) >>> 0);
      }
    }
  }
  // Around every power of ten a float32 reaches: where the decimal exponent estimated from the
  // binary one is corrected, up or not.
  for (let k = -45; k <= 38; k++) {
    f32[0] = Number(`1e${k}`);
    const at = u32[0]!;
    for (let d = -3; d <= 3; d++) check(at + d);
  }
  for (let m = 1; m < 20_000; m++) check(m); // the smallest subnormals
  for (let m = 0x7fffff; m > 0x7fffff - 20_000; m--) check(m); // the largest subnormals
  const rand = prng(5);
  for (let i = 0; i < 100_000; i++) {
    const r = Math.sqrt(-2 * Math.log(rand() || 1e-12)) * 0.02 * Math.cos(2 * Math.PI * rand());
    f32[0] = r;
    check(u32[0]!);
  }
  for (
    const [x, text] of [
      [0.1, "0.1"],
      [1 / 3, "0.33333334"],
      [16777216, "16777216"],
      [1e-7, "1e-7"],
      [
        3.4028234663852886e38,
        "3.4028235e+38",
      ],
      [1.401298464324817e-45, "1e-45"],
      [123456.7890625, "123456.79"],
      [1e21, "1e+21"],
      [1e20, "100000000000000000000"],
    ] as const
  ) {
    assert.equal(float32ToString(Math.fround(x)), text);
  }
});

Deno.test("JSON codec round-trips 200 000 random float32 bit patterns bit for bit, NaN payloads and subnormals included", async () => {
  const rand = prng(9);
  const data = new Float32Array(200_000);
  const bits = new Uint32Array(data.buffer);
  for (let i = 0; i < bits.length; i++) bits[i] = (rand() * 2 ** 32) >>> 0;
  for (let i = 0; i < 2000; i++) bits[Math.floor(rand() * bits.length)] = Math.floor(rand() * 0x800000); // subnormals
  const ckpt = { metadata: { step: 1 }, tensors: [{ name: "w", dtype: "float32" as const, shape: [200_000], data }] };
  const bytes = await collect(encodeCheckpoint(ckpt, { codec: "json" }));
  assertSameCheckpoint(await loadCheckpoint(bytes), ckpt);
});

Deno.test("JSON files written before shortest float32 digits (exact float64 expansions) read back the same", async () => {
  const old = [
    '{"ckpt":"jsonl","version":1}',
    '{"metadata":{"step":1}}',
    "",
    '{"tensor":{"name":"w","dtype":"float32","shape":[3],"group":"params"}}',
    '{"data":[0.10000000149011612,1.401298464324817e-45,-3.4028234663852886e+38]}',
    "",
  ];
  // Fill in the digests the way the writer does.
  const { createHash } = await import("node:crypto");
  const stream = createHash("sha256");
  const hex = (s: string) => createHash("sha256").update(s).digest("hex");
  const lines: string[] = [];
  const push = (l: string) => {
    lines.push(l);
    stream.update(l + "\n");
  };
  push(old[0]!);
  push(old[1]!);
  push(`{"sha256":"${hex(old[1] + "\n")}"}`);
  push(old[3]!);
  push(old[4]!);
  push(`{"sha256":"${hex(old[3] + "\n" + old[4] + "\n")}"}`);
  lines.push(`{"end":{"tensors":1,"sha256":"${stream.digest("hex")}"}}`);
  const back = await loadCheckpoint(new TextEncoder().encode(lines.join("\n") + "\n"));
  assert.deepEqual(back.tensors[0]!.data, new Float32Array([0.1, 1e-45, -3.4028234663852886e38]));
});
