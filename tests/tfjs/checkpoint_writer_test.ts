import * as tf from "@tensorflow/tfjs";
import assert from "node:assert/strict";
import { CheckpointWriter, snapshot } from "../../src/tfjs/mod.ts";
import { loadCheckpoint } from "../../mod.ts";
import { SupersededError } from "../../src/background/writer.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { buildModel, compile, OPTIMIZERS, train } from "./_training.ts";

tf.env().set("PROD", true);
await tf.setBackend("cpu");

async function setup() {
  const model = buildModel();
  const optimizer = OPTIMIZERS.adam!();
  compile(model, optimizer);
  await train(model, 0, 1);
  const dir = await Deno.makeTempDir({ prefix: "ckpt_writer_test_" });
  return { model, optimizer, dir };
}

Deno.test("CheckpointWriter writes each checkpoint as of its save() call while training goes on unawaited", async () => {
  const { model, optimizer, dir } = await setup();
  const writer = new CheckpointWriter({ saveOptions: { compression: "gzip" } });
  const expected = new Map<number, Awaited<ReturnType<typeof snapshot>>>();
  const saves: Promise<unknown>[] = [];
  for (let step = 1; step <= 6; step++) {
    await train(model, step, step + 1);
    if (step % 2 === 0) {
      expected.set(step, await snapshot({ model, optimizer, step }));
      saves.push(writer.save(`${dir}/step-${step}.ckpt`, { model, optimizer, step, metrics: { step } }));
    }
  }
  assert.ok(writer.pending > 0);
  await writer.close();
  await Promise.all(saves);
  for (const [step, want] of expected) {
    const got = await loadCheckpoint(`${dir}/step-${step}.ckpt`);
    assert.deepEqual(got.metadata, { step, metrics: { step } });
    assert.deepEqual(got.tensors.map((t) => t.name), want.tensors.map((t) => t.name));
    got.tensors.forEach((t, i) => assert.deepEqual(t.data, want.tensors[i]!.data, `step ${step} ${t.name}`));
  }
  await Deno.remove(dir, { recursive: true });
  model.dispose();
});

Deno.test("CheckpointWriter reuses one staging buffer for periodic checkpoints once each is written", async () => {
  const { model, optimizer, dir } = await setup();
  await using writer = new CheckpointWriter();
  for (let step = 1; step <= 5; step++) {
    await train(model, step, step + 1);
    await writer.save(`${dir}/step-${step}.ckpt`, { model, optimizer, step });
  }
  assert.equal(writer.staging.allocations, 1);
  assert.equal(writer.staging.free, 1);
  assert.equal((await loadCheckpoint(`${dir}/step-5.ckpt`)).metadata.step, 5);
  await Deno.remove(dir, { recursive: true });
  model.dispose();
});

Deno.test("CheckpointWriter throws an unobserved failed save from the next save(), once", async () => {
  const { model, optimizer, dir } = await setup();
  const writer = new CheckpointWriter();
  writer.save(`${dir}/missing/step-1.ckpt`, { model, optimizer, step: 1 }); // not awaited
  await new Promise((r) => setTimeout(r, 0));
  while (writer.pending > 0) await new Promise((r) => setTimeout(r, 5));
  assert.throws(
    () => writer.save(`${dir}/step-2.ckpt`, { model, optimizer, step: 2 }),
    (e: Error) => e instanceof Deno.errors.NotFound && /Cannot save checkpoint \(step 1\)/.test(e.message),
  );
  await writer.save(`${dir}/step-3.ckpt`, { model, optimizer, step: 3 });
  await writer.close();
  assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["step-3.ckpt"]);
  await Deno.remove(dir, { recursive: true });
  model.dispose();
});

Deno.test("CheckpointWriter flush() reports an unobserved failure once; an awaited failure is not reported again", async () => {
  const { model, dir } = await setup();
  const writer = new CheckpointWriter();
  writer.save(`${dir}/missing/a.ckpt`, { model, step: 1 });
  await assert.rejects(writer.flush(), /Cannot save checkpoint \(step 1\)/);
  await writer.flush();
  await assert.rejects(writer.save(`${dir}/missing/b.ckpt`, { model, step: 2 }), /step 2/);
  await writer.close();
  await Deno.remove(dir, { recursive: true });
  model.dispose();
});

Deno.test("CheckpointWriter throws bad arguments at once and starts nothing", async () => {
  const { model, dir } = await setup();
  const writer = new CheckpointWriter();
  assert.throws(() => writer.save(`${dir}/a.ckpt`, { model, step: -1 }), /step is -1/);
  assert.throws(
    () => writer.save(42 as never, { model, step: 1 }),
    /target must be a path, a file: or opfs: URL, { store, key }, or a CheckpointManager/,
  );
  assert.throws(() => writer.save(`${dir}/a.ckpt`, { model: "m" as never, step: 1 }), TypeError);
  assert.equal(writer.pending, 0);
  await writer.close();
  assert.throws(() => writer.save(`${dir}/a.ckpt`, { model, step: 1 }), /the CheckpointWriter is closed/);
  assert.deepEqual([...Deno.readDirSync(dir)], []);
  assert.throws(() => new CheckpointWriter({ staging: {} as never }), /staging: expected a StagingPool/);
  await Deno.remove(dir, { recursive: true });
  model.dispose();
});

Deno.test("CheckpointWriter with whenBusy coalesce drops waiting saves for the newest, without reporting them", async () => {
  const { model, optimizer, dir } = await setup();
  const writer = new CheckpointWriter({ whenBusy: "coalesce" });
  const results: Promise<unknown>[] = [];
  for (let step = 1; step <= 6; step++) {
    results.push(writer.save(`${dir}/step-${step}.ckpt`, { model, optimizer, step }).then(() => "saved", (e) => e));
  }
  await writer.close();
  const outcome = await Promise.all(results);
  assert.equal(outcome.at(-1), "saved");
  const superseded = outcome.filter((o) => o instanceof SupersededError);
  assert.ok(superseded.length >= 1, `some saves were superseded: ${outcome}`);
  const written = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  assert.equal(written.length, outcome.filter((o) => o === "saved").length);
  assert.ok(written.includes("step-6.ckpt"));
  await Deno.remove(dir, { recursive: true });
  model.dispose();
});

Deno.test("CheckpointWriter commits through a CheckpointManager opened with its fileWriter, reusing staging", async () => {
  const { model, optimizer, dir } = await setup();
  const writer = new CheckpointWriter();
  const manager = await CheckpointManager.open(dir, { maxToKeep: 2, writer: writer.fileWriter });
  let last: Awaited<ReturnType<typeof snapshot>> | undefined;
  for (let step = 1; step <= 4; step++) {
    await train(model, step, step + 1);
    last = await snapshot({ model, optimizer, step });
    const entry = await writer.save(manager, { model, optimizer, step });
    assert.equal(entry.step, step);
  }
  await writer.close();
  assert.equal(writer.staging.allocations, 1);
  assert.deepEqual((await manager.list()).map((e) => e.step), [3, 4]);
  const latest = (await manager.latest())!;
  latest.tensors.forEach((t, i) => assert.deepEqual(t.data, last!.tensors[i]!.data, t.name));
  await assert.rejects(
    (async () => {
      const w = new CheckpointWriter();
      try {
        await w.save(manager, { model, step: 2 }); // steps must increase
      } finally {
        await w.close().catch(() => {});
      }
    })(),
    /steps must increase/,
  );
  await manager.close();
  await Deno.remove(dir, { recursive: true });
  model.dispose();
});

Deno.test("CheckpointWriter: a snapshot that fails once its save has started rejects with its error and leaves the previous file, no temp", async () => {
  const { model, optimizer, dir } = await setup();
  const writer = new CheckpointWriter();
  const path = `${dir}/a.ckpt`;
  await writer.save(path, { model, optimizer, step: 1 });
  const before = await Deno.readFile(path);
  // getWeights() is only looked at while reading back, after save() has returned and the worker started the file.
  const broken = { getWeights: () => 42 } as unknown as typeof optimizer;
  await assert.rejects(
    writer.save(path, { model, optimizer: broken, step: 2 }),
    (e: Error) => e instanceof TypeError && /getWeights\(\) gave no array/.test(e.message),
  );
  await writer.save(`${dir}/b.ckpt`, { model, optimizer, step: 3 }); // the writer goes on
  await writer.close();
  assert.deepEqual(await Deno.readFile(path), before);
  assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), ["a.ckpt", "b.ckpt"]);
  await Deno.remove(dir, { recursive: true });
  model.dispose();
});
