import * as tf from "@tensorflow/tfjs";
import assert from "node:assert/strict";
import { CheckpointWriter, snapshot, StagingPool } from "../../src/tfjs/mod.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { takeOwnership } from "../../src/background/_transfer.ts";
import { headroomOf } from "../../src/format/_headroom.ts";
import { setNativeDigestForTests, setWebDigestForTests } from "../../src/format/_hash.ts";
import { prefixRoom } from "../../src/format/codecs/binary.ts";
import { encodeCheckpoint } from "../../mod.ts";
import { buildModel, compile, OPTIMIZERS, optimizerValues, train, weightValues } from "./_training.ts";

tf.env().set("PROD", true);
await tf.setBackend("cpu");

function bits(a: ArrayLike<number>): number[] {
  return Array.from(new Uint32Array(new Float32Array(a).buffer));
}

Deno.test("snapshot names trainable weights params and batch-norm statistics buffers, with the model's values", async () => {
  const model = buildModel();
  compile(model, tf.train.sgd(0.1));
  await train(model, 0, 3);
  const before = await weightValues(model);
  const c = await snapshot({ model, step: 3, epoch: 1, metrics: { loss: 0.5 }, custom: { note: "x" } });
  assert.deepEqual(c.metadata, { step: 3, epoch: 1, metrics: { loss: 0.5 }, custom: { note: "x" } });
  assert.deepEqual(c.tensors.map((t) => [t.name, t.group, t.dtype, t.shape]), [
    ["fc1/kernel", "params", "float32", [4, 8]],
    ["fc1/bias", "params", "float32", [8]],
    ["bn/gamma", "params", "float32", [8]],
    ["bn/beta", "params", "float32", [8]],
    ["fc2/kernel", "params", "float32", [8, 1]],
    ["fc2/bias", "params", "float32", [1]],
    ["bn/moving_mean", "buffers", "float32", [8]],
    ["bn/moving_variance", "buffers", "float32", [8]],
  ]);
  for (const t of c.tensors) assert.deepEqual(bits(t.data as Float32Array), bits(before.get(t.name)!), t.name);
  // The moving statistics really moved: the buffers are not just their initial values.
  assert.notDeepEqual(Array.from(c.tensors[6]!.data as Float32Array), new Array(8).fill(0));
  model.dispose();
});

Deno.test("snapshot names stay the same for a second model built alike, though tfjs renames its variables", async () => {
  const a = buildModel();
  const b = buildModel();
  assert.notEqual(a.weights[0]!.name, b.weights[0]!.name);
  const [ca, cb] = [await snapshot({ model: a, step: 0 }), await snapshot({ model: b, step: 0 })];
  assert.deepEqual(ca.tensors.map((t) => t.name), cb.tensors.map((t) => t.name));
  a.dispose();
  b.dispose();
});

for (const [kind, make] of Object.entries(OPTIMIZERS)) {
  Deno.test(`snapshot captures ${kind} state and its iteration counter in the optimizer group`, async () => {
    const model = buildModel();
    const optimizer = make();
    compile(model, optimizer);
    await train(model, 0, 3);
    const state = await optimizerValues(optimizer);
    const c = await snapshot({ model, optimizer, step: 3 });
    const opt = c.tensors.filter((t) => t.group === "optimizer");
    assert.equal(opt.length, state.size);
    assert.deepEqual(opt[0]!, {
      name: "optimizer/iter",
      group: "optimizer",
      dtype: "int32",
      shape: [],
      data: opt[0]!.data,
    });
    assert.deepEqual(Array.from(opt[0]!.data as Int32Array), [3]);
    const tfNames = [...state.keys()];
    opt.forEach((t, i) => {
      if (i === 0) return;
      // tfjs keys state by the process-unique variable name; the checkpoint by the stable weight name.
      const suffix = tfNames[i]!.slice(tfNames[i]!.lastIndexOf("/"));
      assert.match(t.name, /^optimizer\/(fc1|fc2|bn)\/(kernel|bias|gamma|beta)\//);
      assert.ok(t.name.endsWith(suffix), `${t.name} ends with ${suffix}`);
      assert.deepEqual(bits(t.data as Float32Array), bits(state.get(tfNames[i]!) as Float32Array), t.name);
    });
    model.dispose();
  });
}

Deno.test("snapshot keeps the values as of the call while training steps run during its read-back", async () => {
  const model = buildModel();
  const optimizer = tf.train.adam(0.05);
  compile(model, optimizer);
  await train(model, 0, 2);
  const weights = await weightValues(model);
  const state = await optimizerValues(optimizer);

  const taking = snapshot({ model, optimizer, step: 2 }); // not awaited: training goes on at once
  await train(model, 2, 5);
  const c = await taking;

  const after = await weightValues(model);
  assert.notDeepEqual(bits(after.get("fc1/kernel")!), bits(weights.get("fc1/kernel")!), "the steps changed the model");
  assert.notDeepEqual(bits(after.get("bn/moving_mean")!), bits(weights.get("bn/moving_mean")!));
  for (const [name, values] of weights) {
    assert.deepEqual(bits(c.tensors.find((t) => t.name === name)!.data as Float32Array), bits(values), name);
  }
  const opt = c.tensors.filter((t) => t.group === "optimizer");
  assert.equal(optimizer.iterations, 5);
  assert.deepEqual(Array.from(opt[0]!.data as Int32Array), [2]);
  [...state.values()].slice(1).forEach((v, i) => {
    assert.deepEqual(bits(opt[i + 1]!.data as Float32Array), bits(v as Float32Array), opt[i + 1]!.name);
  });
  model.dispose();
});

Deno.test("snapshot data is a copy: later steps never write into a snapshot already read back", async () => {
  const w = tf.variable(tf.tensor1d([1, 2, 3]), true, "snapshot_copy/w");
  const c = await snapshot({ model: [w], step: 0 });
  w.assign(tf.tensor1d([7, 8, 9]));
  assert.deepEqual(Array.from(c.tensors[0]!.data as Float32Array), [1, 2, 3]);
  w.dispose();
});

Deno.test("snapshot reuses a released staging buffer when shapes repeat, and never one still in use", async () => {
  const model = buildModel();
  compile(model, tf.train.sgd(0.1));
  const pool = new StagingPool();
  const first = await snapshot({ model, step: 0, staging: pool });
  const buffer = first.tensors[0]!.data.buffer;
  assert.ok(first.tensors.every((t) => t.data.buffer === buffer), "one buffer per snapshot");
  const held = await snapshot({ model, step: 0, staging: pool }); // first not released yet
  assert.notEqual(held.tensors[0]!.data.buffer, buffer);
  assert.equal(pool.allocations, 2);
  pool.release(first);
  pool.release(held);
  for (let step = 1; step <= 5; step++) {
    await train(model, step, step + 1);
    const c = await snapshot({ model, step, staging: pool });
    const now = await weightValues(model);
    for (const t of c.tensors) assert.deepEqual(bits(t.data as Float32Array), bits(now.get(t.name)!), t.name);
    pool.release(c);
  }
  assert.equal(pool.allocations, 2);
  model.dispose();
});

Deno.test("StagingPool keeps buffers of a size it handed out and frees the others at once (a copying backend's snapshot arrays)", () => {
  const pool = new StagingPool();
  const mine = pool.acquire(64);
  const foreign = new ArrayBuffer(48);
  pool.release(mine);
  pool.release({
    metadata: { step: 0 },
    tensors: [{ name: "w", dtype: "float32", shape: [12], data: new Float32Array(foreign) }],
  });
  assert.equal(pool.free, 1);
  assert.ok(foreign.detached, "a size no snapshot takes is freed, not kept");
  assert.ok(!mine.detached);
  assert.equal(pool.acquire(64), mine);
});

Deno.test("snapshot of a variable array and of a named tensor map uses their names and trainability", async () => {
  const w = tf.variable(tf.tensor2d([[1, 2]]), true, "snapshot_vars/w");
  const s = tf.variable(tf.scalar(5, "int32"), false, "snapshot_vars/steps");
  const fromArray = await snapshot({ model: [w, s], step: 1 });
  assert.deepEqual(fromArray.tensors.map((t) => [t.name, t.group, t.dtype]), [
    ["snapshot_vars/w", "params", "float32"],
    ["snapshot_vars/steps", "buffers", "int32"],
  ]);
  const mask = tf.tensor1d([1, 0, 1], "bool");
  const fromMap = await snapshot({ model: { weight: w, mask }, step: 1 });
  assert.deepEqual(fromMap.tensors.map((t) => [t.name, t.group, t.dtype, Array.from(t.data as Uint8Array)]), [
    ["weight", "params", "float32", [1, 2]],
    ["mask", "params", "bool", [1, 0, 1]],
  ]);
  assert.ok(fromMap.tensors[1]!.data instanceof Uint8Array);
  tf.dispose([w, s, mask]);
});

Deno.test("snapshot round-trips through saveCheckpoint and loadCheckpoint bit for bit", async () => {
  const model = buildModel();
  const optimizer = tf.train.rmsprop(0.01, 0.9, 0.5);
  compile(model, optimizer);
  await train(model, 0, 2);
  const c = await snapshot({ model, optimizer, step: 2, metrics: { loss: NaN } });
  const path = await Deno.makeTempFile({ suffix: ".ckpt" });
  try {
    await saveCheckpoint(path, c, { compression: "gzip" });
    const back = await loadCheckpoint(path);
    assert.ok(Number.isNaN(back.metadata.metrics!.loss));
    assert.deepEqual(
      back.tensors.map((t) => [t.name, t.group, t.dtype, t.shape]),
      c.tensors.map((t) => [t.name, t.group, t.dtype, t.shape]),
    );
    back.tensors.forEach((t, i) => assert.deepEqual(t.data, c.tensors[i]!.data));
  } finally {
    await Deno.remove(path);
    model.dispose();
  }
});

Deno.test("snapshot leaves no tensor behind", async () => {
  const model = buildModel();
  const optimizer = tf.train.adam(0.01);
  compile(model, optimizer);
  await train(model, 0, 1);
  const before = tf.memory().numTensors;
  await snapshot({ model, optimizer, step: 1 });
  await assert.rejects(snapshot({ model, optimizer, step: -1 }), TypeError);
  assert.equal(tf.memory().numTensors, before);
  model.dispose();
});

Deno.test("snapshot refuses bad arguments with a TypeError naming the problem", async () => {
  const w = tf.variable(tf.zeros([2]), true, "snapshot_bad/w");
  const cases: [unknown, RegExp][] = [
    [{ model: [w], step: -1 }, /step is -1/],
    [{ model: [w], step: 1.5 }, /step is 1.5/],
    [{ model: [w], step: 0, metrics: { loss: "low" } }, /metric "loss" is not a number/],
    [{ model: [w], step: 0, metrics: { loss: [0.5, 0.9] } }, /metrics\.loss is an array of 2 numbers.*name each/],
    [{ model: [w], step: 0, metrics: { loss: [] } }, /metrics\.loss is an array of 0 numbers/],
    [{ model: "model", step: 0 }, /model must be a tf.LayersModel/],
    [{ model: [w, tf.zeros([1])], step: 0 }, /model\[1\] is not a tf.Variable/],
    [{ model: [w, w], step: 0 }, /two weights are named "snapshot_bad\/w"/],
    [{ model: { x: 3 }, step: 0 }, /model\["x"\] is not a tf.Tensor/],
    [{ model: { "optimizer/x": w }, step: 0 }, /kept for optimizer state/],
    [{ model: { __proto__: w } as unknown, step: 0 }, /model must be/],
    [{ model: { c: tf.complex([1], [2]) }, step: 0 }, /"c" has dtype complex64; only float32, int32 and bool/],
    [{ model: { s: tf.tensor(["a"]) }, step: 0 }, /"s" has dtype string/],
    [{ model: [w], step: 0, optimizer: {} }, /optimizer has no getWeights/],
    [{ model: [w], step: 0, staging: {} }, /staging must be a StagingPool/],
  ];
  for (const [options, message] of cases) {
    await assert.rejects(snapshot(options as never), (e: Error) => e instanceof TypeError && message.test(e.message));
  }
  const gone = tf.variable(tf.zeros([1]), true, "snapshot_bad/gone");
  gone.dispose();
  await assert.rejects(snapshot({ model: { gone }, step: 0 }), /weight "gone" is disposed/);
  w.dispose();
});

Deno.test("snapshot refuses an optimizer that cannot list its state (tfjs Adamax)", async () => {
  const model = buildModel();
  const optimizer = tf.train.adamax(0.01);
  compile(model, optimizer);
  await train(model, 0, 1);
  const before = tf.memory().numTensors;
  await assert.rejects(
    snapshot({ model, optimizer, step: 1 }),
    (e: Error) =>
      e instanceof TypeError &&
      /^Cannot snapshot optimizer: getWeights\(\) is not implemented for Adamax/.test(e.message),
  );
  assert.equal(tf.memory().numTensors, before);
  model.dispose();
});

Deno.test("a snapshot's one buffer is wholly its tensors' and the room reserved for each one's record prefix, so a background writer moves it without a copy", async () => {
  const w = tf.variable(tf.ones([3]), true, "snapshot_move/w");
  const flags = tf.variable(tf.tensor1d([1, 0, 1], "bool"), false, "snapshot_move/flags");
  const n = tf.variable(tf.scalar(4, "int32"), false, "snapshot_move/n");
  for (const staging of [undefined, new StagingPool()]) {
    const c = await snapshot({ model: { flags, w, n }, step: 0, ...(staging ? { staging } : {}) });
    const rooms = c.tensors.map((t) => prefixRoom(t));
    for (const [i, t] of c.tensors.entries()) assert.equal(headroomOf(t.data), rooms[i]);
    assert.equal(c.tensors[0]!.data.buffer.byteLength, 3 + 12 + 4 + rooms.reduce((a, b) => a + b));
    const owned = takeOwnership(c.tensors);
    assert.equal(owned.copiedBytes, 0);
    assert.equal(owned.transfer.length, 1);
    assert.deepEqual(owned.tensors.map((t) => Array.from(t.data as Uint8Array)), [[1, 0, 1], [1, 1, 1], [4]]);
  }
  tf.dispose([w, flags, n]);
});

Deno.test("a snapshot saved in a page hashes each tensor of 1 MiB or more with one WebCrypto call over its record, bit for bit", async () => {
  const big = tf.variable(tf.range(0, 2 ** 18, 1, "float32"), true, "snapshot_web/big");
  const small = tf.variable(tf.ones([5]), true, "snapshot_web/small");
  const c = await snapshot({ model: { big, small }, step: 3 });
  // The same tensors in buffers of their own, with no room in front.
  const copies = { metadata: c.metadata, tensors: c.tensors.map((t) => ({ ...t, data: t.data.slice() })) };
  const expected = new Uint8Array(await new Response(encodeCheckpoint(copies)).arrayBuffer());
  const calls: number[] = [];
  setNativeDigestForTests(null);
  setWebDigestForTests(async (bytes) => {
    calls.push(bytes.byteLength);
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  });
  try {
    const bytes = new Uint8Array(await new Response(encodeCheckpoint(c)).arrayBuffer());
    assert.deepEqual(bytes, expected);
    assert.equal(calls.length, 1);
    assert.ok(calls[0]! > 2 ** 20 && calls[0]! <= 2 ** 20 + prefixRoom(c.tensors[0]!));
  } finally {
    setWebDigestForTests("restore");
    setNativeDigestForTests("restore");
  }
  tf.dispose([big, small]);
});

Deno.test("snapshot takes trainOnBatch's loss as it comes (number | number[]): a one-element array is its number", async () => {
  const model = buildModel({ seed: 5 });
  compile(model, OPTIMIZERS.sgd!());
  const [x, y] = [tf.ones([4, 4]), tf.zeros([4, 1])];
  // Type-checked as written (deno test checks it): trainOnBatch's type is number | number[].
  const loss = await model.trainOnBatch(x, y);
  const checkpoint = await snapshot({ model, step: 1, metrics: { loss, wrapped: [0.25] } });
  assert.deepEqual(checkpoint.metadata.metrics, { loss: typeof loss === "number" ? loss : loss[0], wrapped: 0.25 });
  const dir = await Deno.makeTempDir();
  const writer = new CheckpointWriter();
  const manager = await CheckpointManager.open(dir, { writer: writer.fileWriter });
  const entry = await writer.save(manager, { model, step: 2, metrics: { loss } }); // the same through a writer
  assert.equal(entry.metadata.metrics?.loss, checkpoint.metadata.metrics?.loss);
  await writer.close();
  await manager.close();
  await Deno.remove(dir, { recursive: true });
  tf.dispose([x, y]);
  model.dispose();
});
