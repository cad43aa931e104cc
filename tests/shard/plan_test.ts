import assert from "node:assert/strict";
import { planShards, type ShardTensor, slicesOf } from "../../src/shard/plan.ts";
import { prng } from "../_util.ts";

const f32 = (name: string, shape: number[], rows?: [number, number]): ShardTensor => ({
  name,
  dtype: "float32",
  shape,
  ...(rows ? { rows } : {}),
});

Deno.test("planShards writes each tensor once when every writer holds a replica", () => {
  const replica = [f32("a", [10]), f32("b", [20]), f32("c", [30]), f32("d", [5])];
  for (const writers of [1, 2, 4]) {
    const plan = planShards(Array.from({ length: writers }, () => replica));
    for (const t of plan.tensors) {
      assert.equal(t.slices.length, 1, `${t.name} with ${writers} writers`);
      assert.deepEqual(t.slices[0]!.rows, [0, t.shape[0]]);
    }
    assert.equal(plan.bytes.reduce((a, b) => a + b, 0), 65 * 4);
  }
});

Deno.test("planShards balances parts by bytes, largest tensors first", () => {
  const replica = [f32("a", [100]), f32("b", [60]), f32("c", [50]), f32("d", [10])];
  const plan = planShards([replica, replica]);
  // a -> 0 (400), b -> 1 (240), c -> 1 (440), d -> 0 (440).
  assert.deepEqual(plan.bytes, [440, 440]);
  assert.deepEqual(slicesOf(plan, 0).map((s) => s.name), ["a", "d"]);
  assert.deepEqual(slicesOf(plan, 1).map((s) => s.name), ["b", "c"]);
});

Deno.test("planShards splits a tensor of splitBytes or more into row slices across the writers holding it", () => {
  const replica = [f32("big", [1000, 4]), f32("small", [3])];
  const plan = planShards([replica, replica, replica, replica], { splitBytes: 1024 });
  const big = plan.tensors.find((t) => t.name === "big")!;
  assert.deepEqual(big.slices.map((s) => [s.writer, s.rows]), [[0, [0, 250]], [1, [250, 500]], [2, [500, 750]], [
    3,
    [750, 1000],
  ]]);
  // Below the threshold, a tensor stays whole.
  assert.equal(planShards([replica, replica]).tensors.find((t) => t.name === "big")!.slices.length, 1);
  // Never more slices than rows.
  const rows2 = planShards(Array(4).fill([f32("w", [2, 1000])]), { splitBytes: 1 });
  assert.equal(rows2.tensors[0]!.slices.length, 2);
});

Deno.test("planShards keeps each writer's own rows when writers hold different slices (a model split across processes)", () => {
  const plan = planShards([
    [f32("w", [8, 2], [0, 4]), f32("bias", [2])],
    [f32("w", [8, 2], [4, 8]), f32("bias", [2])],
  ]);
  const w = plan.tensors.find((t) => t.name === "w")!;
  assert.deepEqual(w.slices.map((s) => [s.writer, s.rows]), [[0, [0, 4]], [1, [4, 8]]]);
  assert.equal(plan.tensors.find((t) => t.name === "bias")!.slices.length, 1);
});

Deno.test("planShards is the same whatever order writers list their tensors in", () => {
  const base = Array.from({ length: 40 }, (_, i) => f32(`t${i}`, [1 + ((i * 37) % 23), 3]));
  const rand = prng(5);
  const shuffled = () => [...base].sort(() => rand() - 0.5);
  const placed = (plan: ReturnType<typeof planShards>) =>
    Object.fromEntries(plan.tensors.map((t) => [t.name, t.slices.map((s) => [s.writer, s.rows])]));
  const a = planShards([shuffled(), shuffled(), shuffled()], { splitBytes: 100 });
  const b = planShards([shuffled(), shuffled(), shuffled()], { splitBytes: 100 });
  assert.deepEqual(placed(a), placed(b));
  assert.deepEqual(a.bytes, b.bytes);
  // The plan's order of tensors is writer 0's.
  const first = shuffled();
  assert.deepEqual(planShards([first, shuffled()]).tensors.map((t) => t.name), first.map((t) => t.name));
});

Deno.test("planShards refuses rows nobody holds, disagreeing writers, and bad options", () => {
  assert.throws(
    () => planShards([[f32("w", [8], [0, 4])], [f32("w", [8], [5, 8])]]),
    /no writer holds rows \[4, 5\) of tensor "w"/,
  );
  assert.throws(
    () => planShards([[f32("w", [8])], [{ name: "w", dtype: "int32", shape: [8] }]]),
    (e) => e instanceof RangeError && /another writer has it as float32/.test(e.message),
  );
  assert.throws(() => planShards([]), TypeError);
  assert.throws(() => planShards([[f32("w", [8])]], { splitBytes: 0 }), RangeError);
  assert.throws(() => planShards([[f32("w", [8])]], { splitbytes: 1 } as never), /unknown option "splitbytes"/);
  assert.throws(() => planShards([[f32("w", [8], [0, 9])]]), /outside \[0, 8\)/);
});

Deno.test("planShards places scalars and empty tensors", () => {
  const plan = planShards([[f32("s", []), f32("e", [0, 3])], [f32("s", []), f32("e", [0, 3])]]);
  assert.deepEqual(plan.tensors.find((t) => t.name === "s")!.slices.map((s) => s.rows), [[0, 1]]);
  assert.deepEqual(plan.tensors.find((t) => t.name === "e")!.slices, [{ writer: 0, rows: [0, 0], bytes: 0 }]);
});
