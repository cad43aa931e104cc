// The adapter on the native TensorFlow backend (`tensorflow`: @tensorflow/tfjs-node 4.22.0, its
// binding built by `deno task setup:native` against libtensorflow from the tensorflow_cpu wheel),
// under Deno with the node:util shim. The same checks as on cpu, wasm and webgpu, plus the
// TF.js model I/O paths and tfjs-node-gpu's binding (the same binary, here on the CPU library).
// Run by native_test.ts in a child with --allow-ffi; alone: deno test -A --no-lock <this file>.
import * as tf from "@tensorflow/tfjs";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  assertModelMatchesCheckpoint,
  CheckpointMismatchError,
  CheckpointWriter,
  restore,
  snapshot,
  StagingPool,
} from "../../src/tfjs/mod.ts";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { ckptHandler } from "../../src/interop/io_handler.ts";
import { readTfjsArtifacts, writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { buildModel, compile, OPTIMIZERS, optimizerValues, train, weightValues } from "./_training.ts";
import { NATIVE_DENO_FLAGS, nativeTensorFlowVersion, useNative } from "./_native.ts";
import { backendCases } from "./_backend_cases.ts";

function bits(a: ArrayLike<number>): number[] {
  return Array.from(new Uint32Array(new Float32Array(a).buffer));
}

function test(name: string, fn: () => Promise<void>) {
  Deno.test({
    name: `tensorflow: ${name}`,
    async fn() {
      await useNative();
      await fn();
    },
  });
}

// The checks every backend passes (tests/tfjs/backends_test.ts runs them on cpu, wasm, webgpu).
backendCases("tensorflow", useNative);

async function sha256(c: Parameters<typeof saveCheckpoint>[1]): Promise<string> {
  return (await saveCheckpoint(new WritableStream(), c, { sha256sum: true })).sha256!;
}

test("tfjs-node's binding loads under Deno on this machine's TensorFlow and runs ops and gradients", async () => {
  assert.equal(tf.getBackend(), "tensorflow");
  assert.match(nativeTensorFlowVersion(), /^2\.\d+\.\d+/);
  console.log(`  TensorFlow ${nativeTensorFlowVersion()} through @tensorflow/tfjs-node`);
  const x = tf.variable(tf.tensor2d([[1, 2], [3, 4]]));
  const { value, grads } = tf.variableGrads(() => x.square().sum() as tf.Scalar);
  assert.equal((await value.data())[0], 30);
  assert.deepEqual(Array.from(await grads[x.name]!.data()), [2, 4, 6, 8]);
  tf.dispose([x, value, ...Object.values(grads)]);
});

test("strict restore refuses a checkpoint of another shape and changes nothing; non-strict loads what fits", async () => {
  const small = buildModel({ hidden: 8 });
  const c = await snapshot({ model: small, step: 1 });
  const wide = buildModel({ hidden: 16, seed: 3 });
  const before = await weightValues(wide);
  await assert.rejects(restore(c, { model: wide }), (e) => {
    assert.ok(e instanceof CheckpointMismatchError);
    assert.deepEqual(e.report.mismatched.map((m) => m.name).sort(), [
      "bn/beta",
      "bn/gamma",
      "bn/moving_mean",
      "bn/moving_variance",
      "fc1/bias",
      "fc1/kernel",
      "fc2/kernel",
    ]);
    return true;
  });
  assert.deepEqual(await weightValues(wide), before);
  const report = await restore(c, { model: wide, strict: false });
  assert.deepEqual(report.loaded, ["fc2/bias"]);
  assert.deepEqual(
    bits((await weightValues(wide)).get("fc2/bias")!),
    bits(c.tensors.find((t) => t.name === "fc2/bias")!.data as Float32Array),
  );
  small.dispose();
  wide.dispose();
});

test('Adam: adamPowers "replay" (the default) resumes bit for bit; "recompute" starts about 1e-7 apart, as on cpu', async () => {
  // The native backend keeps tfjs-core's running float32 product beta^t (a Mul kernel per
  // step) and setWeights() recomputes it with its Pow kernel; pow(beta, 1) is exactly beta here.
  assert.equal((await tf.pow(tf.scalar(0.999), 1).data())[0], Math.fround(0.999));
  const a = { model: buildModel(), optimizer: OPTIMIZERS.adam!() };
  compile(a.model, a.optimizer);
  await train(a.model, 0, 20);
  const c = await snapshot({ ...a, step: 20 });
  const reference = await train(a.model, 20, 40);
  const resumed = async (adamPowers: "recompute" | "replay") => {
    const b = { model: buildModel({ seed: 9 }), optimizer: OPTIMIZERS.adam!() };
    compile(b.model, b.optimizer);
    await restore(c, { ...b, adamPowers });
    const losses = await train(b.model, 20, 40);
    const weights = await weightValues(b.model);
    b.model.dispose();
    return { losses, weights };
  };
  const replay = await resumed("replay");
  assert.deepEqual(replay.losses, reference);
  assert.deepEqual(replay.weights, await weightValues(a.model));
  const recompute = await resumed("recompute");
  assert.notDeepEqual(recompute.losses, reference);
  recompute.losses.forEach((l, i) => assert.ok(Math.abs(l - reference[i]!) <= 1e-5 * Math.abs(reference[i]!), `${i}`));
  a.model.dispose();
});

test("CheckpointWriter writes each checkpoint as of its save() call while training goes on unawaited", async () => {
  const model = buildModel();
  const optimizer = OPTIMIZERS.adam!();
  compile(model, optimizer);
  const dir = await Deno.makeTempDir({ prefix: "ckpt_native_writer_" });
  try {
    const writer = new CheckpointWriter();
    const expected = new Map<number, string>();
    const saves: Promise<unknown>[] = [];
    for (let step = 1; step <= 8; step++) {
      await train(model, step, step + 1);
      if (step % 2 === 0) {
        expected.set(step, await sha256(await snapshot({ model, optimizer, step })));
        saves.push(writer.save(`${dir}/step-${step}.ckpt`, { model, optimizer, step }));
      }
    }
    assert.ok(writer.pending > 0, "saves still pending while training went on");
    await writer.close();
    await Promise.all(saves);
    for (const [step, digest] of expected) {
      assert.equal(await sha256(await loadCheckpoint(`${dir}/step-${step}.ckpt`)), digest, `step ${step}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
    model.dispose();
  }
});

test("model.save(ckptHandler) and tf.loadLayersModel(ckptHandler) keep weights and Adam state bit for bit", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt_native_io_" });
  try {
    const model = buildModel();
    compile(model, tf.train.adam(0.01));
    await train(model, 0, 3);
    await model.save(ckptHandler(`${dir}/model.ckpt`, { metadata: { step: 3 } }), { includeOptimizer: true });
    const loaded = await tf.loadLayersModel(ckptHandler(`${dir}/model.ckpt`));
    assert.deepEqual(await weightValues(loaded), await weightValues(model));
    assert.deepEqual(await optimizerValues(loaded.optimizer), await optimizerValues(model.optimizer));
    assert.deepEqual(await train(loaded, 3, 6), await train(model, 3, 6));
    model.dispose();
    loaded.dispose();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

test("TF.js artifacts: ckpt's export loads with tfjs-node's file:// handler, and model.save(file://) imports back", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt_native_artifacts_" });
  try {
    const model = buildModel();
    compile(model, tf.train.sgd(0.1));
    await train(model, 0, 2);
    await model.save(ckptHandler(`${dir}/model.ckpt`));
    const out = await writeTfjsArtifacts(`${dir}/web`, `${dir}/model.ckpt`, { shardBytes: 256 });
    assert.ok(out.shards.length > 1);
    const loaded = await tf.loadLayersModel(`file://${out.modelJson}`);
    assert.deepEqual(await weightValues(loaded), await weightValues(model));

    await model.save(`file://${dir}/tfjs-node`);
    const imported = await readTfjsArtifacts(`${dir}/tfjs-node/model.json`);
    const own = await snapshot({ model, step: 0 });
    // Foreign artifacts say nothing of groups: compare by name, byte for byte.
    assert.deepEqual(imported.tensors.map((t) => t.name).sort(), own.tensors.map((t) => t.name).sort());
    for (const t of own.tensors) {
      assert.deepEqual(imported.tensors.find((u) => u.name === t.name)!.data, t.data, t.name);
    }
    model.dispose();
    loaded.dispose();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

test("assertModelMatchesCheckpoint passes on the model's own snapshot and names the weight a step changed", async () => {
  const model = buildModel();
  compile(model, tf.train.sgd(0.1));
  const saved = await snapshot({ model, step: 0 });
  await assertModelMatchesCheckpoint(model, saved, { rtol: 0, atol: 0 });
  await train(model, 0, 1);
  await assert.rejects(assertModelMatchesCheckpoint(model, saved, { rtol: 0, atol: 0 }), /fc1\/kernel/);
  model.dispose();
});

test("tfjs-node-gpu's binding (here on the CPU library) trains and checkpoints the same bytes as tfjs-node", async () => {
  const child = fileURLToPath(new URL("./_native_child.ts", import.meta.url));
  const digests = [];
  for (const pkg of ["tfjs-node", "tfjs-node-gpu"]) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...NATIVE_DENO_FLAGS, child, pkg],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.ok(out.success, `${pkg} child failed: ${text}${new TextDecoder().decode(out.stderr)}`);
    const result = JSON.parse(text.trim().split("\n").at(-1)!);
    assert.equal(result.backend, "tensorflow");
    assert.equal(result.tensorflow, nativeTensorFlowVersion());
    digests.push(result.sha256);
  }
  assert.equal(digests[1], digests[0]);
});

test("a snapshot keeps tfjs-node's read-back copies as its arrays: no staging, the same bits, and values still held as given stay the backend's", async () => {
  // Made by ops: in TensorFlow's memory. Made from JS values and never used by an op: tfjs-node
  // keeps that very array until one is.
  const computed = tf.variable(tf.tidy(() => tf.range(0, 2 ** 16).div(3).reshape([256, 256])), true, "adopt/computed");
  const given = new Float32Array(2 ** 15).map((_, i) => i / 7);
  const fresh = tf.variable(tf.tensor1d(given.slice()), false, "adopt/fresh");
  const flags = Array.from({ length: 2 ** 17 }, (_, i) => i % 3 === 0);
  const bools = tf.variable(tf.tensor1d(flags, "bool"), false, "adopt/bools");
  const small = tf.variable(tf.tensor1d([1, 2, 3], "int32"), false, "adopt/small");
  const pool = new StagingPool();
  const before = tf.memory().numTensors;
  const c = await snapshot({ model: { computed, fresh, bools, small }, step: 2, staging: pool });
  assert.equal(tf.memory().numTensors, before, "the ops that move values into TensorFlow leave no tensor behind");
  assert.equal(pool.allocations, 0, "the pool is not used where the backend copies");
  const buffers = new Set(c.tensors.map((t) => t.data.buffer));
  assert.equal(buffers.size, c.tensors.length, "one buffer per tensor");
  for (const t of c.tensors) assert.equal(t.data.byteLength, t.data.buffer.byteLength, `${t.name} owns its buffer`);
  const data = (name: string) => c.tensors.find((t) => t.name === name)!.data;
  const expected = computed.dataSync().slice();
  assert.deepEqual(bits(data("computed") as Float32Array), bits(expected));
  assert.deepEqual(bits(data("fresh") as Float32Array), bits(given));
  assert.deepEqual(data("bools"), Uint8Array.from(flags, Number));
  assert.deepEqual(data("small"), new Int32Array([1, 2, 3]));
  // Moving the snapshot's buffers away (as a background save does) leaves the backend's values whole.
  structuredClone(c.tensors.map((t) => t.data), { transfer: [...buffers] as ArrayBuffer[] });
  assert.deepEqual(bits(fresh.dataSync()), bits(given));
  assert.deepEqual(bits(computed.dataSync()), bits(expected));
  assert.deepEqual(Array.from(bools.dataSync()), flags.map(Number));
  assert.deepEqual(Array.from(small.dataSync()), [1, 2, 3]);
  tf.dispose([computed, fresh, bools, small]);
});

test("a snapshot + background save of a 64 MiB model peaks at one copy of it + 48 MiB above its baseline: tfjs-node's read-back copies are the snapshot's arrays", async () => {
  const bench = fileURLToPath(new URL("../../bench/native_memory.ts", import.meta.url));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-lock", "-A", "--v8-flags=--expose-gc", bench, "--mib", "64", "--mode", "writer"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.ok(out.success, `${text}${new TextDecoder().decode(out.stderr)}`);
  const r = JSON.parse(text.trim().split("\n").at(-1)!);
  const above = r.peakRss - r.baseRss;
  console.log(
    `  peak ${(above / 2 ** 20).toFixed(1)} MiB above the baseline: ${(r.ratio as number).toFixed(2)}x the model`,
  );
  // No lower bound: TensorFlow's copies reuse pages the process already held (0.30x to 0.74x
  // seen above the baseline), so the one copy need not show whole.
  // 48 MiB: the writer's buffers. With the copies staged and not freed, 2.24x here.
  assert.ok(above <= r.modelBytes + 48 * 2 ** 20, `peak ${r.ratio}x the model`);
});
