import assert from "node:assert/strict";
import { ChecksumMismatchError, loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import type { CheckpointInput, DType, TensorInput } from "../../src/format/types.ts";
import { readTfjsArtifacts, writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { tensorToWeight, weightToTensor } from "../../src/interop/tfjs_weights.ts";
import { assertSameCheckpoint, edgeCheckpoint, edgeTensors } from "../_util.ts";

const SHARED: DType[] = ["float32", "int32", "bool", "float16", "bfloat16", "uint8", "uint16", "int8", "int16"];

async function tmp(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "ckpt-tfjs-" });
}

function sharedCheckpoint(): CheckpointInput {
  const edge = edgeCheckpoint();
  const tensors = (edge.tensors as TensorInput[]).filter((t) => SHARED.includes(t.dtype));
  tensors.push({ name: "opt/iter", dtype: "int32", shape: [], data: new Int32Array([77]), group: "optimizer" });
  tensors.push({ name: "bn/mean", dtype: "float32", shape: [0, 3], data: new Float32Array(0), group: "buffers" });
  return { metadata: edge.metadata, tensors };
}

Deno.test("ckpt -> TF.js artifacts -> ckpt is bit-exact for every dtype TF.js can carry, NaN payloads included", async () => {
  const dir = await tmp();
  try {
    const ckpt = sharedCheckpoint();
    assert.deepEqual(new Set((ckpt.tensors as TensorInput[]).map((t) => t.dtype)), new Set(SHARED));
    await saveCheckpoint(`${dir}/a.ckpt`, ckpt);
    const first = await Deno.readFile(`${dir}/a.ckpt`);
    const out = await writeTfjsArtifacts(`${dir}/tfjs`, `${dir}/a.ckpt`);
    const back = await readTfjsArtifacts(out.modelJson);
    assertSameCheckpoint(back, ckpt);
    await saveCheckpoint(`${dir}/b.ckpt`, back);
    assert.deepEqual(await Deno.readFile(`${dir}/b.ckpt`), first);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js export writes a manifest TF.js understands: dtypes, quantization, optimizer group, shards", async () => {
  const dir = await tmp();
  try {
    const out = await writeTfjsArtifacts(dir, {
      metadata: { step: 3 },
      tensors: [
        { name: "k", dtype: "float32", shape: [2, 3], data: new Float32Array(6).fill(1.5) },
        { name: "h", dtype: "float16", shape: [2], data: new Uint16Array([0x3c00, 0xc000]) },
        { name: "u", dtype: "uint8", shape: [3], data: new Uint8Array([0, 128, 255]) },
        { name: "i", dtype: "int8", shape: [1], data: new Int8Array([-7]) },
        { name: "m", dtype: "bool", shape: [2], data: new Uint8Array([1, 0]) },
        { name: "iter", dtype: "int32", shape: [], data: new Int32Array([5]), group: "optimizer" },
      ],
    }, { shardBytes: 16 });
    const json = JSON.parse(await Deno.readTextFile(out.modelJson));
    assert.deepEqual(json.weightsManifest[0].weights, [
      { name: "k", shape: [2, 3], dtype: "float32" },
      { name: "h", shape: [2], dtype: "float32", quantization: { dtype: "float16" } },
      { name: "u", shape: [3], dtype: "int32", quantization: { dtype: "uint8", scale: 1, min: 0 } },
      { name: "i", shape: [1], dtype: "int32" },
      { name: "m", shape: [2], dtype: "bool" },
      { name: "iter", shape: [], dtype: "int32", group: "optimizer" },
    ]);
    // 24 + 4 + 3 + 4 + 2 + 4 = 41 bytes in shards of 16: three shards, a tensor spanning two.
    assert.deepEqual(json.weightsManifest[0].paths, [
      "weights-shard1of3.bin",
      "weights-shard2of3.bin",
      "weights-shard3of3.bin",
    ]);
    assert.equal(out.weightBytes, 41);
    assert.deepEqual(json.ckpt.dtypes, { h: "float16", u: "uint8", i: "int8" });
    assert.deepEqual(out.shards.map((p) => Deno.statSync(p).size), [16, 16, 9]);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [
      "model.json",
      "weights-shard1of3.bin",
      "weights-shard2of3.bin",
      "weights-shard3of3.bin",
    ]);
    const back = await readTfjsArtifacts(out.modelJson);
    assert.deepEqual(back.tensors.map((t) => [t.name, t.dtype, t.group]), [
      ["k", "float32", "params"],
      ["h", "float16", "params"],
      ["u", "uint8", "params"],
      ["i", "int8", "params"],
      ["m", "bool", "params"],
      ["iter", "int32", "optimizer"],
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js export refuses float64, int64, uint64 and uint32 unless narrowing, and narrowing checks each value", async () => {
  const dir = await tmp();
  try {
    for (const t of edgeTensors().filter((t) => ["float64", "int64", "uint64", "uint32"].includes(t.dtype))) {
      await assert.rejects(
        () => writeTfjsArtifacts(dir, { metadata: { step: 0 }, tensors: [t] }),
        (e: Error) =>
          e instanceof TypeError && e.message.includes(`tensor ${JSON.stringify(t.name)}`) &&
          e.message.includes(`dtype ${t.dtype} has no TF.js weight type`),
      );
    }
    assert.deepEqual([...Deno.readDirSync(dir)], [], "a refused export leaves no files");
    const ok = {
      metadata: { step: 0 },
      tensors: [
        { name: "d", dtype: "float64" as const, shape: [2], data: new Float64Array([0.1, -2]) },
        { name: "n", dtype: "int64" as const, shape: [2], data: new BigInt64Array([-5n, 2147483647n]) },
        { name: "u", dtype: "uint32" as const, shape: [1], data: new Uint32Array([7]) },
      ],
    };
    const out = await writeTfjsArtifacts(dir, ok, { narrow: true });
    const back = await readTfjsArtifacts(out.modelJson);
    assert.deepEqual(back.tensors[0]!.data, new Float64Array([Math.fround(0.1), -2]));
    assert.deepEqual(back.tensors[1]!.data, new BigInt64Array([-5n, 2147483647n]));
    assert.deepEqual(back.tensors[2]!.data, new Uint32Array([7]));
    await assert.rejects(
      () =>
        writeTfjsArtifacts(dir, {
          metadata: { step: 0 },
          tensors: [{ name: "big", dtype: "uint64", shape: [2], data: new BigUint64Array([1n, 2n ** 40n]) }],
        }, { narrow: true }),
      (e: Error) =>
        e instanceof RangeError &&
        /tensor "big" to TF.js: uint64 element 1 is 1099511627776, outside int32/.test(e.message),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js import reads foreign artifacts as TF.js would: affine quantization dequantized, float16 kept", async () => {
  const dir = await tmp();
  try {
    const bytes = new Uint8Array([10, 20, 0x00, 0x3c, 1, 0, 0, 0, 1]);
    await Deno.writeFile(`${dir}/group1-shard1of1.bin`, bytes);
    await Deno.writeTextFile(
      `${dir}/model.json`,
      JSON.stringify({
        format: "layers-model",
        modelTopology: { class_name: "Sequential" },
        weightsManifest: [{
          paths: ["group1-shard1of1.bin"],
          weights: [
            { name: "q", shape: [2], dtype: "float32", quantization: { dtype: "uint8", scale: 0.5, min: -1 } },
            { name: "h", shape: [1], dtype: "float32", quantization: { dtype: "float16" } },
            { name: "i", shape: [1], dtype: "int32" },
            { name: "b", shape: [1], dtype: "bool" },
          ],
        }],
      }),
    );
    const back = await readTfjsArtifacts(`${dir}/model.json`);
    assert.deepEqual(back.metadata, {
      step: 0,
      custom: { "tfjs.artifacts": { format: "layers-model", modelTopology: { class_name: "Sequential" } } },
    });
    assert.deepEqual(back.tensors.map((t) => [t.name, t.dtype, [...t.data]]), [
      ["q", "float32", [4, 9]],
      ["h", "float16", [0x3c00]],
      ["i", "int32", [1]],
      ["b", "bool", [1]],
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js import rejects bad manifests, unsafe paths, short or long shards, and tampered shards", async () => {
  const dir = await tmp();
  try {
    const write = async (
      manifest: unknown,
      bin: number[] = [0, 0, 0x80, 0x3f],
      extra: Record<string, unknown> = {},
    ) => {
      await Deno.writeFile(`${dir}/w.bin`, new Uint8Array(bin));
      await Deno.writeTextFile(`${dir}/model.json`, JSON.stringify({ weightsManifest: manifest, ...extra }));
    };
    const one = [{ paths: ["w.bin"], weights: [{ name: "w", shape: [1], dtype: "float32" }] }];
    const cases: [unknown, number[] | undefined, ErrorConstructor, RegExp][] = [
      [undefined, undefined, SyntaxError, /no weightsManifest array/],
      [
        [{ paths: ["../w.bin"], weights: [] }],
        undefined,
        SyntaxError,
        /paths\[0\] "..\/w.bin" is not a plain relative path/,
      ],
      [[{ paths: ["/etc/passwd"], weights: [] }], undefined, SyntaxError, /not a plain relative path/],
      [[{ paths: ["http://x/w.bin"], weights: [] }], undefined, SyntaxError, /not a plain relative path/],
      [one, [0, 0, 0x80], SyntaxError, /stream ends at offset 3 with 1 bytes of weight "w" missing/],
      [one, [0, 0, 0x80, 0x3f, 9], SyntaxError, /hold bytes after the last weight at offset 4/],
      [
        [{ paths: ["w.bin"], weights: [{ name: "s", shape: [1], dtype: "string" }] }],
        undefined,
        RangeError,
        /dtype string, which ckpt cannot hold/,
      ],
      [
        [{ paths: ["w.bin"], weights: [{ name: "w", shape: [1], dtype: "float64" }] }],
        undefined,
        SyntaxError,
        /unknown dtype "float64"/,
      ],
      [
        [{
          paths: ["w.bin"],
          weights: [{ name: "w", shape: [1], dtype: "float32" }, { name: "w", shape: [0], dtype: "float32" }],
        }],
        undefined,
        SyntaxError,
        /duplicate weight name "w"/,
      ],
      [
        [{ paths: ["w.bin"], weights: [{ name: "w", shape: [4], dtype: "bool" }] }],
        [0, 1, 2, 1],
        SyntaxError,
        /bool element 2 is 2, not 0 or 1/,
      ],
    ];
    for (const [manifest, bin, cls, pattern] of cases) {
      await write(manifest, bin);
      await assert.rejects(() => readTfjsArtifacts(`${dir}/model.json`), (e: Error) => {
        assert.ok(e instanceof cls, `expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
        assert.match(e.message, pattern);
        return true;
      });
    }
    await Deno.writeTextFile(`${dir}/model.json`, "{not json");
    await assert.rejects(() => readTfjsArtifacts(`${dir}/model.json`), /is not UTF-8 JSON/);
    await write(one);
    await assert.rejects(() => readTfjsArtifacts(`${dir}/model.json`, { maxHeaderBytes: 10 }), RangeError);

    // A shard changed after export is caught by the digest the "ckpt" object keeps.
    const out = await writeTfjsArtifacts(`${dir}/x`, {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
    });
    const shard = await Deno.readFile(out.shards[0]!);
    shard[0]! ^= 1;
    await Deno.writeFile(out.shards[0]!, shard);
    await assert.rejects(() => readTfjsArtifacts(out.modelJson), ChecksumMismatchError);
    // A recorded dtype that contradicts the manifest.
    const json = JSON.parse(await Deno.readTextFile(out.modelJson));
    json.ckpt.dtypes = { w: "int8" };
    shard[0]! ^= 1;
    await Deno.writeFile(out.shards[0]!, shard);
    await Deno.writeTextFile(out.modelJson, JSON.stringify(json));
    await assert.rejects(() => readTfjsArtifacts(out.modelJson), /weight "w" was exported from int8 but is float32/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js weight conversion refuses values that cannot be the recorded dtype", () => {
  const w = tensorToWeight({ name: "i", dtype: "int16", shape: [1], data: new Int16Array([5]) });
  assert.throws(
    () => weightToTensor(w.spec, new Uint8Array(new Int32Array([40000]).buffer), "int16"),
    /weight "i" element 0 is 40000, outside int16/,
  );
  const b = tensorToWeight({ name: "b", dtype: "bfloat16", shape: [1], data: new Uint16Array([0x3f80]) });
  assert.deepEqual([...new Float32Array(b.bytes.buffer)], [1]);
  assert.throws(
    () => weightToTensor(b.spec, new Uint8Array(new Float32Array([0.1]).buffer), "bfloat16"),
    /element 0 is not a bfloat16 value/,
  );
});

Deno.test("TF.js export from a checkpoint file keeps its metadata exactly, and a re-export is byte-identical", async () => {
  const dir = await tmp();
  try {
    const ckpt = sharedCheckpoint();
    const a = await writeTfjsArtifacts(`${dir}/a`, ckpt);
    const b = await writeTfjsArtifacts(`${dir}/b`, await readTfjsArtifacts(a.modelJson));
    assert.deepEqual(await Deno.readFile(b.modelJson), await Deno.readFile(a.modelJson));
    assert.deepEqual(await Deno.readFile(b.shards[0]!), await Deno.readFile(a.shards[0]!));
    const loaded = await loadCheckpoint(
      await (async () => {
        await saveCheckpoint(`${dir}/c.ckpt`, await readTfjsArtifacts(b.modelJson));
        return `${dir}/c.ckpt`;
      })(),
    );
    assertSameCheckpoint(loaded, ckpt);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
