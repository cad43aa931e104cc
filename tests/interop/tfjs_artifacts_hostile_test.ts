// TF.js artifacts from hostile model.json files, each built from literal JSON.
import assert from "node:assert/strict";
import { ChecksumMismatchError } from "../../mod.ts";
import { readTfjsArtifacts, writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { assertSameCheckpoint } from "../_util.ts";

async function withArtifacts(
  modelJson: unknown,
  shards: Record<string, Uint8Array>,
  fn: (path: string, dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-tfjs-hostile-" });
  try {
    for (const [name, bytes] of Object.entries(shards)) await Deno.writeFile(`${dir}/${name}`, bytes);
    await Deno.writeTextFile(
      `${dir}/model.json`,
      typeof modelJson === "string" ? modelJson : JSON.stringify(modelJson),
    );
    await fn(`${dir}/model.json`, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const F32_1 = new Uint8Array(new Float32Array([0.5]).buffer);

Deno.test("TF.js import rejects a quantization that is not an object with a known dtype, naming the weight", async () => {
  for (const quantization of [null, 5, "uint8", {}, [], { dtype: 7 }, { dtype: "int4" }, { dtype: "uint8" }]) {
    const model = {
      weightsManifest: [{ paths: ["w.bin"], weights: [{ name: "q", shape: [4], dtype: "float32", quantization }] }],
    };
    await withArtifacts(model, { "w.bin": new Uint8Array(4) }, async (path) => {
      await assert.rejects(() => readTfjsArtifacts(path), (e) => {
        assert.ok(e instanceof SyntaxError, `${JSON.stringify(quantization)}: ${e}`);
        assert.match((e as Error).message, /^Cannot decode TF.js weights: weight "q" /);
        return true;
      });
    });
  }
});

Deno.test("TF.js round trip keeps weights named like Object.prototype members, and their groups", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-tfjs-hostile-" });
  try {
    const ckpt = {
      metadata: { step: 1 },
      tensors: [
        { name: "toString", dtype: "float32" as const, shape: [1], data: new Float32Array([1]) },
        { name: "valueOf", dtype: "float32" as const, shape: [1], data: new Float32Array([2]), group: "optimizer" },
        { name: "hasOwnProperty", dtype: "int32" as const, shape: [1], data: new Int32Array([3]) },
        { name: "x", dtype: "int8" as const, shape: [2], data: new Int8Array([-1, 1]), group: "buffers" },
      ],
    };
    const out = await writeTfjsArtifacts(dir, ckpt);
    assertSameCheckpoint(await readTfjsArtifacts(out.modelJson), ckpt);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js import rejects weight names a checkpoint cannot hold: reserved, empty, lone surrogates", async () => {
  for (const name of ["__proto__", "constructor", "prototype", "", "a\ud800b", "\udfff"]) {
    const text = `{"weightsManifest":[{"paths":["w.bin"],"weights":[{"name":${
      JSON.stringify(name)
    },"shape":[1],"dtype":"float32"}]}]}`;
    await withArtifacts(text, { "w.bin": F32_1 }, async (path) => {
      await assert.rejects(() => readTfjsArtifacts(path), (e) => {
        assert.ok(e instanceof SyntaxError, `${JSON.stringify(name)}: ${e}`);
        assert.match(
          (e as Error).message,
          /^Cannot decode TF.js artifacts: weightsManifest\[0\]\.weights\[0\]: tensor name/,
        );
        return true;
      });
    });
  }
});

Deno.test("TF.js import checks every shard when a ckpt record is present: unlisted shards are rejected", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-tfjs-hostile-" });
  try {
    const out = await writeTfjsArtifacts(dir, {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([1]) }],
    });
    const good = await Deno.readTextFile(out.modelJson);
    const model = JSON.parse(good);
    // The list emptied: the shard would be read unchecked.
    model.ckpt.shards = [];
    await Deno.writeTextFile(out.modelJson, JSON.stringify(model));
    await assert.rejects(
      () => readTfjsArtifacts(out.modelJson),
      /shard "weights\.bin" is not listed in the "ckpt" record/,
    );
    // Renamed in the manifest (a tampered copy beside the original), still listed under the old name.
    await Deno.writeFile(`${dir}/other.bin`, new Uint8Array(new Float32Array([666]).buffer));
    const renamed = JSON.parse(good);
    renamed.weightsManifest[0].paths = ["other.bin"];
    await Deno.writeTextFile(out.modelJson, JSON.stringify(renamed));
    await assert.rejects(() => readTfjsArtifacts(out.modelJson), /shard "other\.bin" is not listed/);
    // Listed, tampered: a digest mismatch.
    await Deno.writeTextFile(out.modelJson, good);
    await Deno.writeFile(`${dir}/weights.bin`, new Uint8Array(new Float32Array([2]).buffer));
    await assert.rejects(() => readTfjsArtifacts(out.modelJson), ChecksumMismatchError);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js import refuses a shard symlinked outside the artifacts directory unless allowed", async () => {
  const outside = await Deno.makeTempDir({ prefix: "ckpt-tfjs-outside-" });
  try {
    await Deno.writeFile(`${outside}/secret.bin`, F32_1);
    const model = { weightsManifest: [{ paths: ["w.bin"], weights: [{ name: "w", shape: [1], dtype: "float32" }] }] };
    await withArtifacts(model, {}, async (path, dir) => {
      await Deno.symlink(`${outside}/secret.bin`, `${dir}/w.bin`);
      await assert.rejects(() => readTfjsArtifacts(path), (e) => {
        assert.ok(e instanceof SyntaxError, String(e));
        assert.match((e as Error).message, /shard "w\.bin" resolves to .* outside the artifacts directory/);
        return true;
      });
      const back = await readTfjsArtifacts(path, { allowOutsideShards: true });
      assert.deepEqual(back.tensors[0]!.data, new Float32Array([0.5]));
      // A link that stays inside is fine.
      await Deno.remove(`${dir}/w.bin`);
      await Deno.writeFile(`${dir}/real.bin`, F32_1);
      await Deno.symlink(`${dir}/real.bin`, `${dir}/w.bin`);
      assert.deepEqual((await readTfjsArtifacts(path)).tensors[0]!.data, new Float32Array([0.5]));
    });
  } finally {
    await Deno.remove(outside, { recursive: true });
  }
});

Deno.test("TF.js import refuses a FIFO as model.json or as a shard instead of hanging", async () => {
  const model = { weightsManifest: [{ paths: ["w.bin"], weights: [{ name: "w", shape: [1], dtype: "float32" }] }] };
  await withArtifacts(model, {}, async (path, dir) => {
    const mk = new Deno.Command("mkfifo", { args: [`${dir}/w.bin`, `${dir}/fifo.json`] });
    assert.equal((await mk.output()).code, 0);
    await assert.rejects(() => readTfjsArtifacts(path), /shard "w\.bin" is not a regular file/);
    await assert.rejects(() => readTfjsArtifacts(`${dir}/fifo.json`), /fifo\.json is not a regular file/);
  });
});

Deno.test("TF.js import reports a shard name the file system refuses (too long) as a SyntaxError naming it", async () => {
  const name = "a".repeat(300) + ".bin";
  const model = { weightsManifest: [{ paths: [name], weights: [{ name: "w", shape: [1], dtype: "float32" }] }] };
  await withArtifacts(model, {}, async (path) => {
    await assert.rejects(() => readTfjsArtifacts(path), (e) => {
      assert.ok(e instanceof SyntaxError, String(e));
      assert.match((e as Error).message, /^Cannot decode TF.js artifacts: shard "a{300}\.bin" cannot be read \(/);
      return true;
    });
  });
});

Deno.test("TF.js import refuses a shard path holding a NUL byte as not a plain relative path", async () => {
  const model = {
    weightsManifest: [{ paths: ["w\u0000.bin"], weights: [{ name: "w", shape: [1], dtype: "float32" }] }],
  };
  await withArtifacts(model, {}, async (path) => {
    await assert.rejects(
      () => readTfjsArtifacts(path),
      /weightsManifest\[0\]\.paths\[0\] "w\\u0000\.bin" is not a plain relative path/,
    );
  });
});
