import * as tf from "@tensorflow/tfjs";
import assert from "node:assert/strict";
import { CheckpointMismatchError, restore, snapshot } from "../../src/tfjs/mod.ts";
import type { Checkpoint, Tensor } from "../../mod.ts";
import { buildModel, compile, OPTIMIZERS, optimizerValues, train, weightValues } from "./_training.ts";

tf.env().set("PROD", true);
await tf.setBackend("cpu");

function bits(a: ArrayLike<number>): number[] {
  return Array.from(new Uint32Array(new Float32Array(a).buffer));
}

async function trained(make: () => tf.Optimizer, steps: number) {
  const model = buildModel();
  const optimizer = make();
  compile(model, optimizer);
  await train(model, 0, steps);
  return { model, optimizer };
}

function without(c: Checkpoint, name: string): Checkpoint {
  return { metadata: c.metadata, tensors: c.tensors.filter((t) => t.name !== name) };
}

function replaced(c: Checkpoint, name: string, t: Partial<Tensor>): Checkpoint {
  return { metadata: c.metadata, tensors: c.tensors.map((x) => x.name === name ? { ...x, ...t } : x) };
}

Deno.test("restore loads every weight into a fresh model bit for bit and reports them all loaded", async () => {
  const { model } = await trained(OPTIMIZERS.sgd!, 3);
  const c = await snapshot({ model, step: 3 });
  const fresh = buildModel();
  const report = await restore(c, { model: fresh });
  assert.deepEqual(report, { loaded: c.tensors.map((t) => t.name), missing: [], unexpected: [], mismatched: [] });
  const [want, got] = [await weightValues(model), await weightValues(fresh)];
  for (const [name, values] of want) assert.deepEqual(bits(got.get(name)!), bits(values), name);
  model.dispose();
  fresh.dispose();
});

// The exactness claim of restore(): the next steps after a restore match an uninterrupted run.
for (const [kind, make] of Object.entries(OPTIMIZERS)) {
  Deno.test(`restore of ${kind} state gives the same next losses as an uninterrupted run`, async () => {
    const a = await trained(make, 20);
    const c = await snapshot({ model: a.model, optimizer: a.optimizer, step: 20 });
    const reference = await train(a.model, 20, 35);

    const b = { model: buildModel({ seed: 99 }), optimizer: make() };
    compile(b.model, b.optimizer);
    await train(b.model, 0, 2); // state to be replaced, not added to
    const report = await restore(c, b);
    assert.deepEqual(report.loaded, c.tensors.map((t) => t.name));
    assert.equal(b.optimizer.iterations, 20);
    const resumed = await train(b.model, 20, 35);
    assert.ok(reference.every(Number.isFinite));
    // Adam included: restore replays its running powers by default.
    assert.deepEqual(resumed, reference);
    const [want, got] = [await weightValues(a.model), await weightValues(b.model)];
    for (const [name, values] of want) assert.deepEqual(bits(got.get(name)!), bits(values), name);
    a.model.dispose();
    b.model.dispose();
  });
}

Deno.test("restore with adamPowers replay makes Adam's next losses and weights identical to an uninterrupted run", async () => {
  const a = await trained(OPTIMIZERS.adam!, 30);
  const c = await snapshot({ model: a.model, optimizer: a.optimizer, step: 30 });
  const reference = await train(a.model, 30, 90);
  for (const adamPowers of ["replay", "recompute"] as const) {
    const b = { model: buildModel({ seed: 3 }), optimizer: OPTIMIZERS.adam!() };
    compile(b.model, b.optimizer);
    const before = tf.memory().numTensors;
    await restore(c, { ...b, adamPowers });
    assert.equal(b.optimizer.iterations, 30);
    assert.equal(tf.memory().numTensors, before + 12, "only the 12 Adam slots are new: the replay leaves nothing");
    const resumed = await train(b.model, 30, 90);
    if (adamPowers === "replay") {
      assert.deepEqual(resumed, reference);
      const [want, got] = [await weightValues(a.model), await weightValues(b.model)];
      for (const [name, values] of want) assert.deepEqual(bits(got.get(name)!), bits(values), name);
    } else {
      // The recomputed powers differ in the last bit here, and 60 steps carry that on.
      assert.notDeepEqual(resumed, reference);
    }
    b.model.dispose();
  }
  await assert.rejects(
    restore(c, { ...a, adamPowers: "exact" as never }),
    /adamPowers must be "recompute" or "replay"/,
  );
  a.model.dispose();
});

Deno.test("strict restore throws a CheckpointMismatchError listing what differs and changes nothing", async () => {
  const a = await trained(OPTIMIZERS.adam!, 3);
  let c = await snapshot({ model: a.model, optimizer: a.optimizer, step: 3 });
  c = without(c, "fc2/bias");
  c = replaced(c, "fc1/bias", { shape: [2, 4] });
  c = {
    metadata: c.metadata,
    tensors: [...c.tensors, {
      name: "extra/w",
      dtype: "int32",
      shape: [1],
      data: new Int32Array([1]),
      group: "params",
    }],
  };

  const b = await trained(OPTIMIZERS.adam!, 1);
  const [weights, state] = [await weightValues(b.model), await optimizerValues(b.optimizer)];
  const error = await restore(c, b).then(() => undefined, (e) => e);
  assert.ok(error instanceof CheckpointMismatchError);
  assert.deepEqual(error.report, {
    loaded: [],
    missing: ["fc2/bias"],
    unexpected: ["extra/w"],
    mismatched: [{
      name: "fc1/bias",
      expected: { shape: [8], dtype: "float32" },
      found: { shape: [2, 4], dtype: "float32" },
    }],
  });
  assert.equal(
    error.message,
    'Cannot restore checkpoint: 1 missing ("fc2/bias"), 1 unexpected ("extra/w"), 1 mismatched ("fc1/bias": expected float32 [8], found float32 [2, 4])',
  );
  const [weightsAfter, stateAfter] = [await weightValues(b.model), await optimizerValues(b.optimizer)];
  for (const [name, v] of weights) assert.deepEqual(bits(weightsAfter.get(name)!), bits(v), name);
  assert.deepEqual([...stateAfter.keys()], [...state.keys()]);
  for (const [name, v] of state) assert.deepEqual(Array.from(stateAfter.get(name)!), Array.from(v), name);
  assert.equal(b.optimizer.iterations, 1);
  a.model.dispose();
  b.model.dispose();
});

Deno.test("non-strict restore loads the weights that match and reports the rest", async () => {
  const { model } = await trained(OPTIMIZERS.sgd!, 3);
  let c = await snapshot({ model, step: 3 });
  c = without(c, "bn/moving_mean");
  c = replaced(c, "fc2/kernel", { dtype: "int32", data: new Int32Array(8) });
  const fresh = buildModel({ seed: 5 });
  const before = await weightValues(fresh);
  const report = await restore(c, { model: fresh, strict: false });
  assert.deepEqual(report.missing, ["bn/moving_mean"]);
  assert.deepEqual(report.unexpected, []);
  assert.deepEqual(report.mismatched, [
    { name: "fc2/kernel", expected: { shape: [8, 1], dtype: "float32" }, found: { shape: [8, 1], dtype: "int32" } },
  ]);
  assert.deepEqual(report.loaded, ["fc1/kernel", "fc1/bias", "bn/gamma", "bn/beta", "fc2/bias", "bn/moving_variance"]);
  const [want, got] = [await weightValues(model), await weightValues(fresh)];
  for (const name of report.loaded) assert.deepEqual(bits(got.get(name)!), bits(want.get(name)!), name);
  assert.deepEqual(bits(got.get("fc2/kernel")!), bits(before.get("fc2/kernel")!));
  assert.deepEqual(bits(got.get("bn/moving_mean")!), bits(before.get("bn/moving_mean")!));
  model.dispose();
  fresh.dispose();
});

Deno.test("non-strict restore skips optimizer state that does not wholly match, since tfjs keeps it by position", async () => {
  const a = await trained(OPTIMIZERS.adam!, 4);
  const c = without(await snapshot({ model: a.model, optimizer: a.optimizer, step: 4 }), "optimizer/fc2/bias/v");
  const b = await trained(OPTIMIZERS.adam!, 1);
  const report = await restore(c, { ...b, strict: false });
  assert.deepEqual(report.missing, ["optimizer/fc2/bias/v"]);
  assert.ok(report.loaded.includes("fc1/kernel"));
  assert.ok(!report.loaded.some((n) => n.startsWith("optimizer/")));
  assert.equal(b.optimizer.iterations, 1);
  a.model.dispose();
  b.model.dispose();
});

Deno.test("restore reports optimizer state of unknown weights, a wrong counter, and a missing counter", async () => {
  const a = await trained(OPTIMIZERS.momentum!, 2);
  const c = await snapshot({ model: a.model, optimizer: a.optimizer, step: 2 });
  const renamed = replaced(c, "optimizer/fc1/kernel/momentum", { name: "optimizer/fc9/kernel/momentum" });
  const b = { model: buildModel(), optimizer: OPTIMIZERS.momentum!() };
  compile(b.model, b.optimizer);
  await assert.rejects(restore(renamed, b), (e: CheckpointMismatchError) => {
    assert.deepEqual(e.report.unexpected, ["optimizer/fc9/kernel/momentum"]);
    assert.deepEqual(e.report.missing, ["optimizer/fc1/kernel/momentum"]);
    return true;
  });
  const badIter = replaced(c, "optimizer/iter", { dtype: "float32", data: new Float32Array([2]) });
  await assert.rejects(restore(badIter, b), (e: CheckpointMismatchError) => {
    assert.deepEqual(e.report.mismatched, [
      { name: "optimizer/iter", expected: { shape: [], dtype: "int32" }, found: { shape: [], dtype: "float32" } },
    ]);
    return true;
  });
  const noState = await snapshot({ model: a.model, step: 2 });
  await assert.rejects(restore(noState, b), /1 missing \("optimizer\/iter"\)/);
  // Without an optimizer, the optimizer group is ignored.
  assert.deepEqual((await restore(c, { model: b.model })).loaded, noState.tensors.map((t) => t.name));
  a.model.dispose();
  b.model.dispose();
});

Deno.test("restore puts optimizer state back in tfjs order even when the checkpoint lists it differently", async () => {
  const a = await trained(OPTIMIZERS.adagrad!, 5);
  const c = await snapshot({ model: a.model, optimizer: a.optimizer, step: 5 });
  const state = c.tensors.filter((t) => t.group === "optimizer");
  const shuffled: Checkpoint = {
    metadata: c.metadata,
    tensors: [...c.tensors.filter((t) => t.group !== "optimizer"), state[0]!, ...state.slice(1).reverse()],
  };
  const reference = await train(a.model, 5, 10);
  const b = { model: buildModel(), optimizer: OPTIMIZERS.adagrad!() };
  compile(b.model, b.optimizer);
  await restore(shuffled, b);
  assert.deepEqual(await train(b.model, 5, 10), reference);
  a.model.dispose();
  b.model.dispose();
});

Deno.test("restored weights do not share memory with the checkpoint", async () => {
  const w = tf.variable(tf.zeros([3]), true, "restore_copy/w");
  const data = new Float32Array([1, 2, 3]);
  await restore({ metadata: { step: 0 }, tensors: [{ name: "restore_copy/w", dtype: "float32", shape: [3], data }] }, {
    model: [w],
  });
  data.fill(9);
  assert.deepEqual(Array.from(await w.data()), [1, 2, 3]);
  w.dispose();
});

Deno.test("restore into variables by name, and refuses a plain tensor as a target", async () => {
  const w = tf.variable(tf.zeros([2]), true, "restore_map/w");
  const flag = tf.variable(tf.tensor1d([0, 0], "bool"), false, "restore_map/flag");
  const c: Checkpoint = {
    metadata: { step: 1 },
    tensors: [
      { name: "w", dtype: "float32", shape: [2], data: new Float32Array([1.5, -2]), group: "params" },
      { name: "flag", dtype: "bool", shape: [2], data: new Uint8Array([1, 0]), group: "buffers" },
    ],
  };
  assert.deepEqual((await restore(c, { model: { w, flag } })).loaded, ["w", "flag"]);
  assert.deepEqual(Array.from(await w.data()), [1.5, -2]);
  assert.deepEqual(Array.from(await flag.data()), [1, 0]);
  const plain = tf.zeros([2]);
  await assert.rejects(restore(c, { model: { w: plain, flag } }), /model\["w"\] is a tf.Tensor, not a tf.Variable/);
  tf.dispose([w, flag, plain]);
});

Deno.test("restore refuses malformed input with a TypeError or RangeError before changing anything", async () => {
  const w = tf.variable(tf.zeros([2]), true, "restore_bad/w");
  const tensor = { name: "restore_bad/w", dtype: "float32" as const, shape: [2], data: new Float32Array([1, 2]) };
  const cases: [unknown, unknown, RegExp, ErrorConstructor][] = [
    [undefined, { model: [w] }, /checkpoint must have a tensors array/, TypeError],
    [{ metadata: { step: 0 }, tensors: [tensor] }, undefined, /options are required/, TypeError],
    [{ metadata: { step: 0 }, tensors: [tensor] }, { model: [w], strict: "no" }, /strict must be a boolean/, TypeError],
    [{ metadata: { step: 0 }, tensors: [tensor] }, { model: 42 }, /model must be/, TypeError],
    [
      { metadata: { step: 0 }, tensors: [tensor] },
      { model: [w], optimizer: {} },
      /optimizer has no setWeights/,
      TypeError,
    ],
    [
      { metadata: { step: 0 }, tensors: [tensor, tensor] },
      { model: [w] },
      /two tensors named "restore_bad\/w"/,
      TypeError,
    ],
    [
      { metadata: { step: 0 }, tensors: [{ ...tensor, data: new Float32Array(3) }] },
      { model: [w] },
      /has 2 elements but data has 3/,
      RangeError,
    ],
    [
      { metadata: { step: 0 }, tensors: [{ ...tensor, data: new Int32Array(2) }] },
      { model: [w] },
      /needs a Float32Array, got Int32Array/,
      TypeError,
    ],
  ];
  for (const [c, options, message, kind] of cases) {
    await assert.rejects(
      restore(c as never, options as never),
      (e: Error) => e instanceof kind && message.test(e.message),
    );
  }
  assert.deepEqual(Array.from(await w.data()), [0, 0]);
  w.dispose();
});

Deno.test("restore leaves no tensor behind, including replaced optimizer state", async () => {
  const a = await trained(OPTIMIZERS.rmsprop!, 2);
  const c = await snapshot({ model: a.model, optimizer: a.optimizer, step: 2 });
  const b = await trained(OPTIMIZERS.rmsprop!, 2);
  const before = tf.memory().numTensors;
  await restore(c, b);
  await restore(c, b);
  assert.equal(tf.memory().numTensors, before);
  a.model.dispose();
  b.model.dispose();
});

Deno.test("optimizer state of plain variables trained with minimize() round-trips, by variable name or map key", async () => {
  const target = tf.tensor1d([1, -2, 3]);
  const make = (prefix: string) => ({
    w: tf.variable(tf.tensor1d([0.5, 0.5, 0.5]), true, `${prefix}/w`),
    b: tf.variable(tf.scalar(0), true, `${prefix}/b`),
  });
  const step = (v: { w: tf.Variable; b: tf.Variable }, optimizer: tf.Optimizer) =>
    (optimizer.minimize(() => v.w.add(v.b).sub(target).square().sum() as tf.Scalar, true, [v.w, v.b])!)
      .dataSync()[0]!;
  for (const form of ["array", "map"] as const) {
    const a = make(`minimize_${form}_a`);
    const oa = tf.train.rmsprop(0.05, 0.9, 0.5);
    for (let i = 0; i < 5; i++) step(a, oa);
    const model = form === "array" ? [a.w, a.b] : { weight: a.w, bias: a.b };
    const c = await snapshot({ model, optimizer: oa, step: 5 });
    const prefix = form === "array" ? `minimize_${form}_a/` : "";
    const w = form === "array" ? `${prefix}w` : "weight";
    assert.ok(c.tensors.some((t) => t.name === `optimizer/${w}/rms`), c.tensors.map((t) => t.name).join());
    const reference = Array.from({ length: 5 }, () => step(a, oa));

    const b = make(`minimize_${form}_b`);
    const ob = tf.train.rmsprop(0.05, 0.9, 0.5);
    let checkpoint = c;
    if (form === "array") {
      // Different variable names in this process: rename the checkpoint's to match.
      const rename = (n: string) => n.replace(`minimize_${form}_a/`, `minimize_${form}_b/`);
      checkpoint = { metadata: c.metadata, tensors: c.tensors.map((t) => ({ ...t, name: rename(t.name) })) };
    }
    const report = await restore(checkpoint, {
      model: form === "array" ? [b.w, b.b] : { weight: b.w, bias: b.b },
      optimizer: ob,
    });
    assert.deepEqual(report.missing, []);
    assert.deepEqual(Array.from({ length: 5 }, () => step(b, ob)), reference, form);
    tf.dispose([a.w, a.b, b.w, b.b]);
  }
  target.dispose();
});
