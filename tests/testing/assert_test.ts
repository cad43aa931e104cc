import assert from "node:assert/strict";
import { saveCheckpoint, type TensorInput } from "../../mod.ts";
import { assertCheckpointEquals, AssertionError } from "../../src/testing/mod.ts";
import { tempDir } from "../cli/_run.ts";

const f32 = (name: string, values: number[], shape = [values.length]): TensorInput => ({
  name,
  dtype: "float32",
  shape,
  data: new Float32Array(values),
});

async function failure(p: Promise<void>): Promise<string> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof AssertionError, `an AssertionError, got ${e}`);
    return e.message;
  }
  assert.fail("the assertion passed");
}

Deno.test("assertCheckpointEquals passes for equal checkpoints, in memory and from files of any codec", async () => {
  await using t = await tempDir();
  const ckpt = {
    metadata: { step: 3, metrics: { loss: NaN } },
    tensors: [
      f32("w", [1, NaN, -0, Infinity], [2, 2]),
      { name: "i", dtype: "int64", shape: [1], data: new BigInt64Array([-(2n ** 63n)]), group: "optimizer" },
    ] as TensorInput[],
  };
  await saveCheckpoint(`${t.dir}/a.ckpt`, ckpt);
  await saveCheckpoint(`${t.dir}/b.jsonl.gz`, ckpt, { codec: "json", compression: "gzip" });
  await assertCheckpointEquals(ckpt, ckpt);
  await assertCheckpointEquals(`${t.dir}/a.ckpt`, `${t.dir}/b.jsonl.gz`);
  await assertCheckpointEquals(await Deno.readFile(`${t.dir}/a.ckpt`), ckpt);
  await assertCheckpointEquals((await Deno.open(`${t.dir}/a.ckpt`)).readable, new URL(`file://${t.dir}/a.ckpt`));
});

Deno.test("assertCheckpointEquals lists every kind of difference in one message", async () => {
  const actual = {
    metadata: { step: 10, metrics: { loss: 0.5 } },
    tensors: [
      f32("dense/kernel", [1, 2, 3, 4, 5, 6], [2, 3]),
      f32("dense/bias", [0, 0]),
      { ...f32("bn/mean", [1]), group: "buffers" },
      f32("only/actual", [1]),
    ],
  };
  const expected = {
    metadata: { step: 11, metrics: { loss: 0.25 } },
    tensors: [
      f32("dense/kernel", [1, 2, 3, 4, 5.5, 6], [2, 3]),
      { name: "dense/bias", dtype: "float64", shape: [2], data: new Float64Array(2) },
      f32("bn/mean", [1]),
      f32("only/expected", [1]),
    ] as TensorInput[],
  };
  assert.equal(
    await failure(assertCheckpointEquals(actual, expected)),
    `checkpoints differ: 2 metadata fields, 1 tensor only in actual, 1 tensor only in expected, 1 dtype or shape change, 1 group change, 1 tensor outside tolerance
metadata (2):
  step: actual 10, expected 11
  metrics.loss: actual 0.5, expected 0.25
only in actual (1):
  "only/actual" float32 [1] params
only in expected (1):
  "only/expected" float32 [1] params
dtype or shape changed (1):
  "dense/bias": actual float32 [2], expected float64 [2]
group changed (1):
  "bn/mean": actual buffers, expected params
values outside tolerance (1):
  "dense/kernel" float32 [2, 3]: 1 of 6 elements outside atol 0 + rtol 0 * |expected|; max abs diff 0.5, max rel diff 0.09090909090909091; first at [1, 1]: actual 5, expected 5.5`,
  );
});

Deno.test("assertCheckpointEquals: ignoreMetadata, metric tolerance and a message prefix", async () => {
  const a = { metadata: { step: 1, createdAt: "2026-01-01T00:00:00Z", metrics: { loss: 1 } }, tensors: [] };
  const b = { metadata: { step: 1, createdAt: "2026-02-01T00:00:00Z", metrics: { loss: 1.0001 } }, tensors: [] };
  assert.equal(
    await failure(assertCheckpointEquals(a, b, { message: "after 10 steps" })),
    `after 10 steps: checkpoints differ: 2 metadata fields
metadata (2):
  createdAt: actual "2026-01-01T00:00:00Z", expected "2026-02-01T00:00:00Z"
  metrics.loss: actual 1, expected 1.0001`,
  );
  await assertCheckpointEquals(a, b, { ignoreMetadata: ["createdAt"], metrics: { atol: 1e-3 } });
  await assertCheckpointEquals(a, b, { ignoreMetadata: ["createdAt", "metrics.loss"] });
});

Deno.test("assertCheckpointEquals tolerance edges: exactly atol passes, rtol scales |expected|, per dtype and per name", async () => {
  const one = (v: number, name = "w") => ({ metadata: { step: 0 }, tensors: [f32(name, [v])] });
  await assertCheckpointEquals(one(1), one(1.5), { atol: 0.5 });
  assert.match(
    await failure(assertCheckpointEquals(one(1), one(1.5), { atol: 0.4999 })),
    /1 of 1 elements outside atol 0\.4999/,
  );
  await assertCheckpointEquals(one(1), one(2), { rtol: 0.5 }); // |1 - 2| <= 0.5 * |2|
  await failure(assertCheckpointEquals(one(2), one(1), { rtol: 0.5 })); // |2 - 1| > 0.5 * |1|
  await assertCheckpointEquals(one(1), one(1.25), { dtypes: { float32: { atol: 0.25 } } });
  await assertCheckpointEquals(one(1, "head/w"), one(2, "head/w"), { names: [{ pattern: "head/*", atol: 1 }] });
  assert.match(
    await failure(
      assertCheckpointEquals(one(1, "body/w"), one(2, "body/w"), { names: [{ pattern: "head/*", atol: 1 }] }),
    ),
    /"body\/w" float32 \[1\]: 1 of 1 elements outside atol 0/,
  );
  await assert.rejects(assertCheckpointEquals(one(1), one(1), { atol: -1 }), TypeError);
});

Deno.test("assertCheckpointEquals: NaN, ±Infinity, -0, int64 extremes and bool", async () => {
  const c = (data: TensorInput["data"], dtype: TensorInput["dtype"]) => ({
    metadata: { step: 0 },
    tensors: [{ name: "x", dtype, shape: [data.length], data } as TensorInput],
  });
  await assertCheckpointEquals(c(new Float32Array([NaN, -0]), "float32"), c(new Float32Array([NaN, 0]), "float32"));
  assert.match(
    await failure(
      assertCheckpointEquals(c(new Float32Array([NaN]), "float32"), c(new Float32Array([NaN]), "float32"), {
        equalNaN: false,
      }),
    ),
    /1 of 1 elements outside .*max abs diff Infinity, max rel diff Infinity; first at \[0\]: actual NaN, expected NaN$/,
  );
  assert.match(
    await failure(
      assertCheckpointEquals(c(new Float32Array([-0]), "float32"), c(new Float32Array([0]), "float32"), {
        signedZero: true,
      }),
    ),
    /first at \[0\]: actual -0, expected 0$/,
  );
  assert.match(
    await failure(
      assertCheckpointEquals(c(new Float32Array([Infinity]), "float32"), c(new Float32Array([-Infinity]), "float32"), {
        atol: 1e30,
      }),
    ),
    /first at \[0\]: actual Infinity, expected -Infinity$/,
  );
  const max = 2n ** 63n - 1n;
  assert.match(
    await failure(
      assertCheckpointEquals(c(new BigInt64Array([max]), "int64"), c(new BigInt64Array([max - 1n]), "int64")),
    ),
    /"x" int64 \[1\]: 1 of 1 elements outside .*first at \[0\]: actual 9223372036854775807, expected 9223372036854775806$/,
  );
  assert.match(
    await failure(assertCheckpointEquals(c(new Uint8Array([1, 0]), "bool"), c(new Uint8Array([1, 1]), "bool"))),
    /"x" bool \[2\]: 1 of 2 elements outside .*first at \[1\]: actual false, expected true$/,
  );
});

Deno.test("assertCheckpointEquals caps each section of its message", async () => {
  const names = Array.from({ length: 25 }, (_, i) => `t${i}`);
  const msg = await failure(
    assertCheckpointEquals(
      { metadata: { step: 0 }, tensors: names.map((n) => f32(n, [1])) },
      { metadata: { step: 0 }, tensors: [] },
      { maxEntries: 3 },
    ),
  );
  assert.equal(
    msg,
    `checkpoints differ: 25 tensors only in actual
only in actual (25):
  "t0" float32 [1] params
  "t1" float32 [1] params
  "t2" float32 [1] params
  ... and 22 more`,
  );
});

Deno.test("assertCheckpointEquals compares tensors stored in different orders, also past its buffer", async () => {
  await using t = await tempDir();
  const tensors = Array.from({ length: 8 }, (_, i) => f32(`t${i}`, Array.from({ length: 1024 }, (_, j) => i + j)));
  await saveCheckpoint(`${t.dir}/a.ckpt`, { metadata: { step: 0 }, tensors });
  const changed = tensors.map((x) => ({ ...x, data: (x.data as Float32Array).slice() }));
  (changed[2]!.data as Float32Array)[7] = -1;
  await saveCheckpoint(`${t.dir}/b.ckpt`, { metadata: { step: 0 }, tensors: changed.reverse() });
  const msg = await failure(assertCheckpointEquals(`${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`, { bufferBytes: 8192 }));
  assert.match(msg, /^checkpoints differ: 1 tensor outside tolerance\n/);
  assert.match(msg, /"t2" float32 \[1024\]: 1 of 1024 elements outside .*first at \[7\]: actual 9, expected -1$/);
  // A stream cannot be read twice: past the buffer, a clear error, not a wrong answer.
  await assert.rejects(
    assertCheckpointEquals((await Deno.open(`${t.dir}/a.ckpt`)).readable, `${t.dir}/b.ckpt`, { bufferBytes: 8192 }),
    /tensor order differs too much to compare 6 tensors/,
  );
});

Deno.test("assertCheckpointEquals rejects corrupt sources with the reader's error, not an assertion", async () => {
  await using t = await tempDir();
  await saveCheckpoint(`${t.dir}/a.ckpt`, { metadata: { step: 0 }, tensors: [f32("w", [1, 2])] });
  const bytes = await Deno.readFile(`${t.dir}/a.ckpt`);
  bytes[bytes.length - 100]! ^= 1;
  await assert.rejects(assertCheckpointEquals(bytes, `${t.dir}/a.ckpt`), (e) => !(e instanceof AssertionError));
});
