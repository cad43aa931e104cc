/**
 * The adapter's checks that every backend must pass (isolation under concurrent steps,
 * save/load/restore with identical next losses, int32 and bool round trips), registered as
 * tests for one backend: tests/tfjs/backends_test.ts runs them on cpu, wasm and webgpu, and
 * tests/tfjs/_native_adapter.ts on tensorflow.
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs";
import assert from "node:assert/strict";
import { restore, snapshot, StagingPool } from "../../src/tfjs/mod.ts";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { buildModel, compile, OPTIMIZERS, train, weightValues } from "./_training.ts";
import { componentTest } from "../_ci.ts";

/** Why the webgpu cases cannot run where Deno finds no WebGPU adapter. */
export const NO_WEBGPU =
  "no WebGPU adapter found (on Debian, apt-get install mesa-vulkan-drivers gives one: Mesa's llvmpipe)";

function bits(a: ArrayLike<number>): number[] {
  return Array.from(new Uint32Array(new Float32Array(a).buffer));
}

/**
 * Registers the checks for `backend`; `use` switches to it (or throws why it cannot), and
 * `missing` says why the backend cannot run here (then they skip, or fail in CI: tests/_ci.ts).
 */
export function backendCases(backend: string, use: () => Promise<unknown>, missing?: string): void {
  componentTest({
    name: `${backend}: a snapshot keeps the values as of the call while training steps run`,
    async fn() {
      await use();
      assert.equal(tf.getBackend(), backend);
      const model = buildModel();
      const optimizer = OPTIMIZERS.adam!();
      compile(model, optimizer);
      await train(model, 0, 2);
      const weights = await weightValues(model);
      const taking = snapshot({ model, optimizer, step: 2, staging: new StagingPool() });
      await train(model, 2, 4);
      const c = await taking;
      const after = await weightValues(model);
      assert.notDeepEqual(bits(after.get("fc1/kernel")!), bits(weights.get("fc1/kernel")!));
      for (const [name, values] of weights) {
        assert.deepEqual(bits(c.tensors.find((t) => t.name === name)!.data as Float32Array), bits(values), name);
      }
      assert.deepEqual(Array.from(c.tensors.find((t) => t.name === "optimizer/iter")!.data as Int32Array), [2]);
      model.dispose();
      optimizer.dispose();
    },
  }, missing);

  componentTest({
    name: `${backend}: save, load and restore resume training with the same losses`,
    async fn() {
      await use();
      const a = { model: buildModel(), optimizer: OPTIMIZERS.momentum!() };
      compile(a.model, a.optimizer);
      await train(a.model, 0, 5);
      const path = await Deno.makeTempFile({ suffix: ".ckpt" });
      try {
        await saveCheckpoint(path, await snapshot({ ...a, step: 5 }));
        const reference = await train(a.model, 5, 10);
        const b = { model: buildModel({ seed: 42 }), optimizer: OPTIMIZERS.momentum!() };
        compile(b.model, b.optimizer);
        const report = await restore(await loadCheckpoint(path), b);
        assert.deepEqual([report.missing, report.unexpected, report.mismatched], [[], [], []]);
        assert.deepEqual(await train(b.model, 5, 10), reference);
        b.model.dispose();
      } finally {
        await Deno.remove(path);
        a.model.dispose();
      }
    },
  }, missing);

  componentTest({
    name: `${backend}: Adam restored by default resumes bit for bit (its running powers rebuilt exactly)`,
    async fn() {
      await use();
      const a = { model: buildModel(), optimizer: OPTIMIZERS.adam!() };
      compile(a.model, a.optimizer);
      await train(a.model, 0, 30); // from step 20 on, pow(beta, t + 1) and the running product differ
      const c = await snapshot({ ...a, step: 30 });
      const reference = await train(a.model, 30, 50);
      const b = { model: buildModel({ seed: 42 }), optimizer: OPTIMIZERS.adam!() };
      compile(b.model, b.optimizer);
      await restore(c, b);
      assert.deepEqual(await train(b.model, 30, 50), reference);
      const [want, got] = [await weightValues(a.model), await weightValues(b.model)];
      for (const [name, values] of want) assert.deepEqual(bits(got.get(name)!), bits(values), name);
      a.model.dispose();
      b.model.dispose();
    },
  }, missing);

  componentTest({
    name: `${backend}: int32 and bool tensors round-trip`,
    async fn() {
      await use();
      const ints = tf.variable(tf.tensor1d([-3, 0, 2147483647], "int32"), false, `backends_${backend}/ints`);
      const mask = tf.variable(tf.tensor1d([1, 0, 1, 1], "bool"), false, `backends_${backend}/mask`);
      const c = await snapshot({ model: { ints, mask }, step: 0 });
      assert.deepEqual(Array.from(c.tensors[0]!.data as Int32Array), [-3, 0, 2147483647]);
      assert.deepEqual(Array.from(c.tensors[1]!.data as Uint8Array), [1, 0, 1, 1]);
      ints.assign(tf.zerosLike(ints));
      mask.assign(tf.zerosLike(mask));
      await restore(c, { model: { ints, mask } });
      assert.deepEqual(Array.from(await ints.data()), [-3, 0, 2147483647]);
      assert.deepEqual(Array.from(await mask.data()), [1, 0, 1, 1]);
      tf.dispose([ints, mask]);
    },
  }, missing);

  componentTest({
    name: `${backend}: a snapshot of large tensors leaves them intact, made from values or by an op`,
    async fn() {
      await use();
      // 256 KiB each: where data() hands out copies, the snapshot frees them (src/tfjs/_read_back.ts);
      // it must never free an array the backend keeps, such as the values a tensor was made from.
      const values = Float32Array.from({ length: 65536 }, (_, i) => Math.sin(i));
      const expected = values.slice();
      const fromValues = tf.variable(tf.tensor1d(values), false, `large_${backend}/from_values`);
      const byOp = tf.variable(tf.tidy(() => tf.tensor1d(expected).mul(2)), false, `large_${backend}/by_op`);
      const doubled = expected.map((v) => Math.fround(v * 2));
      for (let round = 0; round < 2; round++) {
        const c = await snapshot({ model: { fromValues, byOp }, step: round });
        assert.deepEqual(bits(c.tensors[0]!.data as Float32Array), bits(expected));
        assert.deepEqual(bits(c.tensors[1]!.data as Float32Array), bits(doubled));
        assert.equal(values.length, 65536, "the array the tensor was made from is not detached");
        assert.deepEqual(bits(await fromValues.data()), bits(expected));
        assert.deepEqual(bits(await byOp.data()), bits(doubled));
      }
      tf.dispose([fromValues, byOp]);
    },
  }, missing);
}
