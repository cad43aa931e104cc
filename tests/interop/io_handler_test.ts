import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs";
import { ChecksumMismatchError, loadCheckpoint } from "../../mod.ts";
import { ckptHandler } from "../../src/interop/io_handler.ts";
import { readSha256Sidecar } from "../../src/interop/sidecar.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import type { ObjectWriter, WriteOptions } from "../../src/storage/types.ts";
import { s3Test } from "../_s3.ts";
import { serveDirectory } from "../storage/_http_server.ts";
import { safetensorsCodec } from "../../src/interop/safetensors.ts";
import { readSafetensorsHeader } from "../../src/interop/safetensors_read.ts";
import { readTfjsArtifacts, writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";

tf.enableProdMode(); // Deno looks like Node.js to TF.js: no "install tfjs-node" banner in the test output
await tf.setBackend("cpu");

function bits(t: tf.Tensor): Uint8Array {
  const v = t.dataSync() as Float32Array | Int32Array;
  return new Uint8Array(v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength));
}

function data(): { x: tf.Tensor; y: tf.Tensor } {
  const x = tf.tensor2d(Array.from({ length: 32 }, (_, i) => Math.sin(i * 0.7)), [8, 4]);
  const y = tf.tensor2d(Array.from({ length: 8 }, (_, i) => Math.cos(i)), [8, 1]);
  return { x, y };
}

async function trainedModel(): Promise<tf.LayersModel> {
  const model = tf.sequential({
    layers: [
      tf.layers.dense({
        units: 3,
        inputShape: [4],
        activation: "relu",
        kernelInitializer: tf.initializers.glorotUniform({ seed: 1 }),
      }),
      tf.layers.dense({ units: 1, kernelInitializer: tf.initializers.glorotUniform({ seed: 2 }) }),
    ],
  });
  model.compile({ optimizer: tf.train.adam(0.01), loss: "meanSquaredError" });
  const { x, y } = data();
  await model.fit(x, y, { epochs: 3, batchSize: 8, verbose: 0, shuffle: false });
  return model;
}

async function optimizerWeights(model: tf.LayersModel): Promise<{ name: string; tensor: tf.Tensor }[]> {
  return await model.optimizer.getWeights();
}

async function tmp(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "ckpt-io-" });
}

Deno.test("model.save(ckptHandler) with includeOptimizer writes a verified ckpt with topology, training config and optimizer state", async () => {
  const dir = await tmp();
  try {
    const model = await trainedModel();
    const handler = ckptHandler(`${dir}/model.ckpt`, { metadata: { step: 3, metrics: { loss: 0.5 } } });
    const result = await model.save(handler, { includeOptimizer: true });
    assert.equal(result.modelArtifactsInfo.modelTopologyType, "JSON");
    assert.ok(result.modelArtifactsInfo.weightDataBytes! > 0);
    const ckpt = await loadCheckpoint(`${dir}/model.ckpt`, { sha256: handler.lastSave!.digest });
    assert.equal(ckpt.metadata.step, 3);
    assert.deepEqual(ckpt.metadata.metrics, { loss: 0.5 });
    const fields = ckpt.metadata.custom!["tfjs.artifacts"] as Record<string, unknown>;
    assert.equal(fields.format, "layers-model");
    assert.equal((fields.modelTopology as { class_name: string }).class_name, "Sequential");
    assert.deepEqual((fields.trainingConfig as { loss: string }).loss, "mean_squared_error");
    const optimizer = ckpt.tensors.filter((t) => t.group === "optimizer").map((t) => t.name);
    assert.deepEqual(optimizer, (await optimizerWeights(model)).map((w) => w.name));
    assert.ok(optimizer.includes("iter"));
    const params = ckpt.tensors.filter((t) => t.group === "params");
    assert.deepEqual(params.map((t) => [...t.shape]), model.getWeights().map((w) => w.shape));
    model.getWeights().forEach((w, i) =>
      assert.deepEqual(
        new Uint8Array(params[i]!.data.buffer, params[i]!.data.byteOffset, params[i]!.data.byteLength),
        bits(w),
      )
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tf.loadLayersModel(ckptHandler) restores topology, weights and optimizer state bit for bit, and training continues identically", async () => {
  const dir = await tmp();
  try {
    const model = await trainedModel();
    await model.save(ckptHandler(`${dir}/model.ckpt`), { includeOptimizer: true });
    const loaded = await tf.loadLayersModel(ckptHandler(`${dir}/model.ckpt`));
    assert.equal(loaded.layers.length, 2);
    assert.deepEqual(loaded.getWeights().map(bits), model.getWeights().map(bits));
    const before = await optimizerWeights(model);
    const after = await optimizerWeights(loaded);
    assert.deepEqual(after.map((w) => w.name), before.map((w) => w.name));
    assert.deepEqual(after.map((w) => bits(w.tensor)), before.map((w) => bits(w.tensor)));
    const { x, y } = data();
    assert.deepEqual(bits(loaded.predict(x) as tf.Tensor), bits(model.predict(x) as tf.Tensor));
    // One more epoch on each: the restored Adam state makes the updates identical.
    await model.fit(x, y, { epochs: 1, batchSize: 8, verbose: 0, shuffle: false });
    await loaded.fit(x, y, { epochs: 1, batchSize: 8, verbose: 0, shuffle: false });
    assert.deepEqual(loaded.getWeights().map(bits), model.getWeights().map(bits));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ckptHandler without includeOptimizer stores only the model weights", async () => {
  const dir = await tmp();
  try {
    const model = await trainedModel();
    await model.save(ckptHandler(`${dir}/m.ckpt`));
    const ckpt = await loadCheckpoint(`${dir}/m.ckpt`);
    assert.deepEqual(ckpt.tensors.map((t) => t.group), ["params", "params", "params", "params"]);
    const loaded = await tf.loadLayersModel(ckptHandler(`${dir}/m.ckpt`));
    assert.deepEqual(loaded.getWeights().map(bits), model.getWeights().map(bits));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ckptHandler saves through any codec: a model as .safetensors, loaded back by TF.js", async () => {
  const dir = await tmp();
  try {
    const model = await trainedModel();
    const path = `${dir}/model.safetensors`;
    await model.save(ckptHandler(path, { codec: safetensorsCodec, sidecar: true }), { includeOptimizer: true });
    const header = await readSafetensorsHeader(path);
    assert.ok(header.tensors.some((t) => t.name === "iter" && t.group === "optimizer"));
    const loaded = await tf.loadLayersModel(ckptHandler(path, { codecs: [safetensorsCodec], sidecar: true }));
    assert.deepEqual(loaded.getWeights().map(bits), model.getWeights().map(bits));
    const check = await new Deno.Command("sha256sum", { args: ["-c", "model.safetensors.sha256"], cwd: dir }).output();
    assert.equal(check.code, 0, new TextDecoder().decode(check.stderr));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("TF.js artifacts exported from a model's ckpt load with tf.loadLayersModel from model.json", async () => {
  const dir = await tmp();
  try {
    const model = await trainedModel();
    await model.save(ckptHandler(`${dir}/model.ckpt`), { includeOptimizer: true });
    const out = await writeTfjsArtifacts(`${dir}/web`, `${dir}/model.ckpt`, { shardBytes: 64 });
    assert.ok(out.shards.length > 1);
    // What tf.io.fromMemory gets from a fetch of model.json + shards (no HTTP server needed).
    const json = JSON.parse(await Deno.readTextFile(out.modelJson));
    const weightData = (await Promise.all(out.shards.map((p) => Deno.readFile(p)))).map((b) => b.buffer as ArrayBuffer);
    const loaded = await tf.loadLayersModel(tf.io.fromMemory({
      modelTopology: json.modelTopology,
      weightSpecs: json.weightsManifest[0].weights,
      weightData,
      trainingConfig: json.trainingConfig,
    }));
    assert.deepEqual(loaded.getWeights().map(bits), model.getWeights().map(bits));
    const after = await optimizerWeights(loaded);
    assert.deepEqual(after.map((w) => bits(w.tensor)), (await optimizerWeights(model)).map((w) => bits(w.tensor)));
    // And the artifacts import back to the same checkpoint.
    const a = await loadCheckpoint(`${dir}/model.ckpt`);
    const b = await readTfjsArtifacts(out.modelJson);
    assert.deepEqual(b.metadata, a.metadata);
    assert.deepEqual(b.tensors.map((t) => [t.name, t.group]), a.tensors.map((t) => [t.name, t.group]));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ckptHandler refuses a binary topology and leaves the previous file untouched", async () => {
  const dir = await tmp();
  try {
    const model = await trainedModel();
    const handler = ckptHandler(`${dir}/m.ckpt`);
    await model.save(handler);
    const before = await Deno.readFile(`${dir}/m.ckpt`);
    await assert.rejects(
      () => handler.save({ modelTopology: new ArrayBuffer(8), weightSpecs: [], weightData: new ArrayBuffer(0) }),
      (e: Error) => e instanceof TypeError && /binary \(GraphDef\) topology is not supported/.test(e.message),
    );
    await assert.rejects(
      () =>
        handler.save({
          modelTopology: {},
          weightSpecs: [{ name: "w", shape: [4], dtype: "float32" }],
          weightData: new ArrayBuffer(8),
        }),
      (e: Error) =>
        e instanceof SyntaxError && /weight "w" needs 16 bytes at offset 0, but the weight data has 8/.test(e.message),
    );
    assert.deepEqual(await Deno.readFile(`${dir}/m.ckpt`), before);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["m.ckpt"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

s3Test("model.save(ckptHandler(s3://…)) with a sidecar, tf.loadLayersModel back bit for bit", async (b) => {
  const storage = {
    s3: { endpoint: b.endpoint.endpoint, region: b.endpoint.region, credentials: b.endpoint.credentials },
  };
  const model = await trainedModel();
  const address = `s3://${b.name}/run/model.ckpt`;
  const handler = ckptHandler(address, { storage, sidecar: true, metadata: { step: 3 } });
  assert.equal(handler.path, address);
  await model.save(handler, { includeOptimizer: true });
  const keys = (await Array.fromAsync(b.store().list())).map((o) => o.key);
  assert.deepEqual(keys, ["run/model.ckpt", "run/model.ckpt.sha256"]);
  assert.equal(await readSha256Sidecar(address, { storage }), handler.lastSave!.sha256);
  const loaded = await tf.loadLayersModel(ckptHandler(address, { storage, sidecar: true }));
  assert.deepEqual(loaded.getWeights().map(bits), model.getWeights().map(bits));
  const after = await optimizerWeights(loaded);
  assert.deepEqual(after.map((w) => bits(w.tensor)), (await optimizerWeights(model)).map((w) => bits(w.tensor)));
  // TF.js artifacts of it on s3:// import back to the same checkpoint.
  const out = await writeTfjsArtifacts(`s3://${b.name}/web`, address, { storage });
  const back = await readTfjsArtifacts(out.modelJson, { storage });
  assert.deepEqual(
    back.tensors.map((t) => t.name),
    (await loadCheckpoint(address, { storage })).tensors.map((t) => t.name),
  );
});

Deno.test("tf.loadLayersModel loads over http:// through ckptHandler, and from exported artifacts' model.json URL", async () => {
  const dir = await tmp();
  const server = serveDirectory(dir);
  try {
    const model = await trainedModel();
    await model.save(ckptHandler(`${dir}/model.ckpt`), { includeOptimizer: true });
    const viaHandler = await tf.loadLayersModel(ckptHandler(`${server.url}model.ckpt`));
    assert.deepEqual(viaHandler.getWeights().map(bits), model.getWeights().map(bits));
    await assert.rejects(model.save(ckptHandler(`${server.url}other.ckpt`)), /read-only/);
    // TF.js's own HTTP loader reads what writeTfjsArtifacts wrote, shards and all.
    await writeTfjsArtifacts(`${dir}/web`, `${dir}/model.ckpt`, { shardBytes: 64 });
    const viaUrl = await tf.loadLayersModel(`${server.url}web/model.json`);
    assert.deepEqual(viaUrl.getWeights().map(bits), model.getWeights().map(bits));
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});

/** A memory store whose writers flip one bit of every object they write. */
class CorruptingStore extends MemoryStore {
  override async writer(key: string, options?: WriteOptions): Promise<ObjectWriter> {
    const w = await super.writer(key, options);
    let first = true;
    return {
      write: (chunk) => {
        if (first && chunk.byteLength > 40) {
          first = false;
          const bad = chunk.slice();
          bad[40]! ^= 1;
          return w.write(bad);
        }
        return w.write(chunk);
      },
      close: () => w.close(),
      abort: (reason) => w.abort(reason),
    };
  }
}

Deno.test("ckptHandler on a store reads the object back: a save the store corrupted throws", async () => {
  const model = await trainedModel();
  const good = new MemoryStore();
  const handler = ckptHandler({ store: good, key: "m.ckpt" });
  await model.save(handler);
  assert.equal(handler.path, "memory://store/m.ckpt");
  assert.deepEqual((await tf.loadLayersModel(handler)).getWeights().map(bits), model.getWeights().map(bits));
  const bad = new CorruptingStore();
  await assert.rejects(model.save(ckptHandler({ store: bad, key: "m.ckpt" })), ChecksumMismatchError);
  // Without verify, the damage is found on load instead.
  await model.save(ckptHandler({ store: bad, key: "m.ckpt" }, { verify: false }));
  await assert.rejects(tf.loadLayersModel(ckptHandler({ store: bad, key: "m.ckpt" })), ChecksumMismatchError);
});
