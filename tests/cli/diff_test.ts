import assert from "node:assert/strict";
import { saveCheckpoint, type TensorInput } from "../../mod.ts";
import { assertOneLineError, ckpt, pipeline, sampleTensors, tempDir, writeSample } from "./_run.ts";

async function save(path: string, tensors: TensorInput[], options: { codec?: "binary" | "json" } = {}) {
  await saveCheckpoint(path, { metadata: { step: 1 }, tensors }, options);
}

Deno.test("diff of the same tensors in different codecs exits 0", async () => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  await writeSample(`${t.dir}/b.jsonl.gz`, { codec: "json", compression: "gzip" });
  const r = await ckpt(["diff", `${t.dir}/a.ckpt`, `${t.dir}/b.jsonl.gz`]);
  assert.deepEqual([r.code, r.err], [0, ""]);
  assert.equal(
    r.out,
    "4 common tensors: 4 identical, 0 within tolerance, 0 outside; 0 changed dtype or shape; 0 only in A, 0 only in B\n",
  );
  const all = await ckpt(["diff", "--all", `${t.dir}/a.ckpt`, `${t.dir}/b.jsonl.gz`]);
  assert.match(all.out, /^ {2}dense\/kernel\s+float32\s+\[2, 3\]\s+0\/6\s+0\s+0\s+yes$/m);
});

Deno.test("diff lists tensors only in A or B, dtype and shape changes, value differences and metadata", async () => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  const [kernel, bias, mean] = sampleTensors();
  await saveCheckpoint(`${t.dir}/b.ckpt`, {
    metadata: { step: 200, metrics: { loss: 0.25, acc: NaN } },
    tensors: [
      { ...kernel!, data: new Float32Array([1, 2.5, 3, 4, NaN, -6]) },
      { ...bias!, dtype: "float32", data: new Float32Array([1, 2, -1]) },
      { ...mean!, shape: [1, 2] },
      { name: "extra", dtype: "bool", shape: [2], data: new Uint8Array([1, 0]) },
    ],
  });
  const r = await ckpt(["diff", `${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`]);
  assert.equal(r.code, 1, r.err);
  assert.equal(r.err, "");
  assert.match(
    r.out,
    /^metadata:\n\s+field\s+A\s+B\n\s+step\s+100\s+200\n\s+epoch\s+2\s+-\n\s+metric loss\s+0\.5\s+0\.25\n/,
  );
  assert.doesNotMatch(r.out, /metric acc/, "NaN equals NaN in metrics");
  assert.match(r.out, /^only in A \(1\):\n {2}optimizer\/iter\s+optimizer\s+int64\s+\[\]\s+8 B$/m);
  assert.match(r.out, /^only in B \(1\):\n {2}extra\s+params\s+bool\s+\[2\]\s+2 B$/m);
  assert.match(r.out, /^dtype or shape changed \(2\):$/m);
  assert.match(r.out, /^ {2}dense\/bias\s+float16 \[3\]\s+->\s+float32 \[3\]$/m);
  assert.match(r.out, /^ {2}bn\/mean\s+float64 \[2\]\s+->\s+float64 \[1, 2\]$/m);
  assert.match(r.out, /^ {2}dense\/kernel\s+float32\s+\[2, 3\]\s+1\/6\s+0\.5\s+0\.2\s+no \(1 outside\)$/m);
  assert.match(
    r.out,
    /^3 common tensors: 1 identical, 0 within tolerance, 1 outside; 2 changed dtype or shape; 1 only in A, 1 only in B$/m,
  );

  const j = await ckpt(["diff", "--json", `${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`]);
  assert.equal(j.code, 1);
  const doc = JSON.parse(j.out);
  assert.equal(doc.differ, true);
  assert.deepEqual(doc.onlyInA.map((d: { name: string }) => d.name), ["optimizer/iter"]);
  assert.deepEqual(doc.onlyInB.map((d: { name: string }) => d.name), ["extra"]);
  assert.deepEqual(doc.changed[0], {
    name: "dense/bias",
    a: { dtype: "float16", shape: [3] },
    b: { dtype: "float32", shape: [3] },
  });
  assert.deepEqual(doc.compared, [{
    name: "dense/kernel",
    dtype: "float32",
    shape: [2, 3],
    elements: 6,
    changed: 1,
    outside: 1,
    maxAbs: 0.5,
    maxRel: 0.2,
  }, {
    name: "dense/bias",
    dtype: "float16",
    dtypeB: "float32",
    shape: [3],
    elements: 3,
    changed: 0,
    outside: 0,
    maxAbs: 0,
    maxRel: 0,
  }]);
  const all = await ckpt(["diff", "--all", `${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`]);
  assert.match(
    all.out,
    /^ {2}dense\/bias\s+float16->float32\s+\[3\]\s+0\/3\s+0\s+0\s+yes$/m,
    "values compared across dtypes",
  );
});

Deno.test("diff --tolerance and --rtol decide the exit code", async () => {
  await using t = await tempDir();
  const w = (v: number) => [{ name: "w", dtype: "float64" as const, shape: [2], data: new Float64Array([100, v]) }];
  await save(`${t.dir}/a.ckpt`, w(1));
  await save(`${t.dir}/b.ckpt`, w(1.001));
  const [a, b] = [`${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`];
  assert.equal((await ckpt(["diff", a, b])).code, 1);
  assert.equal((await ckpt(["diff", a, b, "--tolerance", "1e-4"])).code, 1);
  const within = await ckpt(["diff", a, b, "-t", "1e-2"]);
  assert.equal(within.code, 0);
  assert.match(within.out, /^ {2}w\s+float64\s+\[2\]\s+1\/2\s+0\.001\s+0\.000999001\s+yes$/m);
  assert.match(within.out, /1 common tensors: 0 identical, 1 within tolerance, 0 outside/);
  assert.equal((await ckpt(["diff", a, b, "--rtol", "1e-2"])).code, 0);
  assert.equal((await ckpt(["diff", a, b, "--rtol", "1e-4"])).code, 1);
});

Deno.test("diff compares NaN, infinities and 64-bit integers exactly", async () => {
  await using t = await tempDir();
  await save(`${t.dir}/a.ckpt`, [
    { name: "f", dtype: "float32", shape: [3], data: new Float32Array([NaN, Infinity, 1]) },
    { name: "g", dtype: "float32", shape: [1], data: new Float32Array([NaN]) },
    { name: "i", dtype: "int64", shape: [2], data: new BigInt64Array([2n ** 60n, -5n]) },
  ]);
  await save(`${t.dir}/b.ckpt`, [
    { name: "f", dtype: "float32", shape: [3], data: new Float32Array([NaN, Infinity, 1]) },
    { name: "g", dtype: "float32", shape: [1], data: new Float32Array([0]) },
    { name: "i", dtype: "int64", shape: [2], data: new BigInt64Array([2n ** 60n + 1n, -5n]) },
  ]);
  const r = await ckpt(["diff", "--json", `${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`, "--tolerance", "1"]);
  assert.equal(r.code, 1);
  const byName = Object.fromEntries(JSON.parse(r.out).compared.map((c: { name: string }) => [c.name, c]));
  assert.equal(byName.f.changed, 0, "NaN equals NaN and Infinity equals Infinity");
  assert.deepEqual([byName.g.changed, byName.g.maxAbs, byName.g.outside], [1, "Infinity", 1]);
  assert.deepEqual(
    [byName.i.changed, byName.i.maxAbs, byName.i.outside],
    [1, 1, 0],
    "2^60 vs 2^60+1 differ by exactly 1",
  );
});

Deno.test("diff pairs tensors in a different order within a small buffer, by name, with the same result", async () => {
  await using t = await tempDir();
  const tensors = Array.from({ length: 6 }, (_, i): TensorInput => ({
    name: `t${i}`,
    dtype: "float32",
    shape: [1000],
    data: new Float32Array(1000).fill(i),
  }));
  const changed = tensors.map((x, i) => (i === 2 ? { ...x, data: new Float32Array(1000).fill(2.5) } : x));
  await save(`${t.dir}/a.ckpt`, tensors);
  await save(`${t.dir}/b.ckpt`, [...changed].reverse());
  await save(`${t.dir}/b.jsonl`, [...changed].reverse(), { codec: "json" });
  const base = await ckpt(["diff", "--json", `${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`]);
  assert.equal(base.code, 1, base.err);
  const expected = JSON.parse(base.out);
  assert.equal(expected.compared.length, 6);
  assert.deepEqual(
    expected.compared.filter((c: { changed: number }) => c.changed > 0).map((c: { name: string }) => c.name),
    ["t2"],
  );
  // 0.005 MB holds one 4000-byte tensor: most pairs are dropped and compared afterwards by name.
  for (const b of ["b.ckpt", "b.jsonl"]) {
    const small = await ckpt(["diff", "--json", "--buffer", "0.005", `${t.dir}/a.ckpt`, `${t.dir}/${b}`]);
    assert.equal(small.code, 1, small.err);
    const doc = JSON.parse(small.out);
    doc.b = expected.b;
    assert.deepEqual(doc, expected, b);
  }
});

Deno.test("diff reads one side from a pipe, and says what to do when the order differs too much for it", async () => {
  await using t = await tempDir();
  const tensors = Array.from({ length: 4 }, (_, i): TensorInput => ({
    name: `t${i}`,
    dtype: "float32",
    shape: [1000],
    data: new Float32Array(1000).fill(i),
  }));
  await save(`${t.dir}/a.ckpt`, tensors);
  await save(`${t.dir}/r.ckpt`, [...tensors].reverse());
  const { first, second } = await pipeline(["convert", `${t.dir}/a.ckpt`, "-", "--codec", "json"], [
    "diff",
    "-",
    `${t.dir}/a.ckpt`,
  ]);
  assert.deepEqual([first.code, second.code, second.err], [0, 0, ""]);
  assert.match(second.out, /4 common tensors: 4 identical/);
  const r = await ckpt(["diff", "--buffer", "0.001", "-", `${t.dir}/r.ckpt`], {
    stdin: await Deno.readFile(`${t.dir}/a.ckpt`),
  });
  assertOneLineError(
    r,
    2,
    /tensor order differs too much .* standard input: save it to a file first, or raise --buffer/,
  );
});

Deno.test("diff names the damaged or missing side", async () => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  const bytes = await Deno.readFile(`${t.dir}/a.ckpt`);
  await Deno.writeFile(`${t.dir}/cut.ckpt`, bytes.subarray(0, bytes.length - 30));
  assertOneLineError(
    await ckpt(["diff", `${t.dir}/a.ckpt`, `${t.dir}/cut.ckpt`]),
    4,
    /^ckpt diff: .*cut\.ckpt: Cannot decode/,
  );
  assertOneLineError(await ckpt(["diff", `${t.dir}/nope.ckpt`, `${t.dir}/a.ckpt`]), 3, /Cannot read ".*nope\.ckpt"/);
  await Deno.writeTextFile(`${t.dir}/text`, "plain text");
  assertOneLineError(await ckpt(["diff", `${t.dir}/a.ckpt`, `${t.dir}/text`]), 4, /text: .*unrecognised format/);
});
