import assert from "node:assert/strict";
import { BackgroundWriter, SupersededError } from "../../src/background/writer.ts";
import { rebuildError, SAVE_STREAM, WORKER_URL } from "../../src/background/_protocol.ts";
import { SaveQueue } from "../../src/background/_queue.ts";
import { reserveReceived, takeOwnership } from "../../src/background/_transfer.ts";
import { headroomOf, reserveHeadroom } from "../../src/format/_headroom.ts";
import { loadCheckpoint } from "../../src/io/load.ts";
import { saveCheckpoint } from "../../src/io/save.ts";
import type { Codec } from "../../src/format/codec.ts";
import { binaryCodec } from "../../src/format/codecs/binary.ts";
import type { Tensor, TensorData, TensorInput } from "../../src/format/types.ts";
import { FileStore } from "../../src/storage/file.ts";
import { MemoryStore } from "../../src/storage/memory.ts";

const REAL_WORKER = new URL("../../src/background/_worker.ts", import.meta.url).href;

function bytes(data: TensorData): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
}

/** A fresh set of tensors covering every awkward case: NaN payloads, -0, 64-bit ints, raw 16-bit floats, bools, empty, scalar. */
function sampleTensors(): TensorInput[] {
  const f32 = new Float32Array([1.5, -0, Infinity, -Infinity, 3.4e38, 1e-45]);
  new Uint32Array(f32.buffer)[5] = 0x7fc01234; // a NaN with a payload
  return [
    { name: "dense/kernel", dtype: "float32", shape: [2, 3], data: f32 },
    { name: "dense/bias", dtype: "float64", shape: [2], data: new Float64Array([Math.PI, -Number.MIN_VALUE]) },
    { name: "emb/half", dtype: "float16", shape: [3], data: new Uint16Array([0x3c00, 0x7e01, 0x8000]) },
    { name: "emb/bf16", dtype: "bfloat16", shape: [2], data: new Uint16Array([0x3f80, 0xff81]) },
    { name: "mask", dtype: "bool", shape: [4], data: new Uint8Array([1, 0, 0, 1]) },
    {
      name: "optimizer/iter",
      dtype: "int64",
      shape: [],
      data: new BigInt64Array([-(2n ** 63n)]),
      group: "optimizer",
    },
    { name: "counts", dtype: "uint64", shape: [1], data: new BigUint64Array([2n ** 64n - 1n]) },
    { name: "empty", dtype: "int32", shape: [0, 5], data: new Int32Array(0), group: "buffers" },
  ];
}

function assertSameTensors(actual: readonly Tensor[], expected: readonly TensorInput[]): void {
  assert.equal(actual.length, expected.length);
  expected.forEach((e, i) => {
    const a = actual[i]!;
    assert.equal(a.name, e.name);
    assert.equal(a.dtype, e.dtype);
    assert.deepEqual(a.shape, e.shape);
    assert.equal(a.group, e.group ?? "params");
    assert.deepEqual(bytes(a.data), bytes(e.data), `tensor ${e.name} differs`);
  });
}

async function sha256File(path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

/** A worker module that crashes (uncaught error) on the checkpoint with `step`, and saves the others for real. */
function crashingWorker(step: number): URL {
  const source = `
    self.addEventListener("message", (e) => {
      if (e.data.metadata?.step === ${step}) { e.stopImmediatePropagation(); throw new Error("boom at step ${step}"); }
    });
    await import(${JSON.stringify(REAL_WORKER)});`;
  return new URL(`data:application/javascript,${encodeURIComponent(source)}`);
}

Deno.test("BackgroundWriter round trips every dtype bit for bit through the worker, same bytes as an inline save", async () => {
  const dir = await Deno.makeTempDir();
  const returned: TensorInput[][] = [];
  await using writer = new BackgroundWriter({ onReturn: (t) => returned.push(t) });
  try {
    for (const codec of ["binary", "json"] as const) {
      for (const compression of ["none", "gzip"] as const) {
        const metadata = { step: 42, epoch: 3, metrics: { loss: NaN, acc: 0.5 }, custom: { run: "a", lr: [0.1] } };
        const inline = `${dir}/inline-${codec}-${compression}.ckpt`;
        const background = `${dir}/background-${codec}-${compression}.ckpt`;
        const options = { codec, compression, sha256sum: true };
        const expected = await saveCheckpoint(inline, { metadata, tensors: sampleTensors() }, options);

        const result = await writer.save(background, { metadata, tensors: sampleTensors() }, options);

        assert.deepEqual(result, expected);
        assert.deepEqual(await Deno.readFile(background), await Deno.readFile(inline));
        assert.equal(result.sha256, await sha256File(background));
        await loadCheckpoint(background, { sha256: result.sha256 });
        const back = await loadCheckpoint(background, { sha256: result.digest });
        assert.deepEqual(back.metadata, metadata);
        assertSameTensors(back.tensors, sampleTensors());
        // The buffers come back untouched by the encoder, gzip and the file sink.
        const given = sampleTensors();
        returned.pop()!.forEach((t, i) => assert.deepEqual(bytes(t.data), bytes(given[i]!.data)));
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter transfers the caller's buffers (they detach) and hands them back through onReturn", async () => {
  const dir = await Deno.makeTempDir();
  const returned: TensorInput[][] = [];
  await using writer = new BackgroundWriter({ onReturn: (t) => returned.push(t) });
  try {
    const tensors = sampleTensors();
    const saving = writer.save(`${dir}/a.ckpt`, { metadata: { step: 1 }, tensors });

    for (const t of tensors) {
      assert.ok((t.data.buffer as ArrayBuffer).detached, `${t.name} should be detached`);
      assert.equal(t.data.length, 0);
    }
    assert.equal(returned.length, 0);
    await saving;

    assert.equal(returned.length, 1, "onReturn runs before the save's promise settles");
    const back = returned[0]!;
    const given = sampleTensors();
    assert.deepEqual(
      back.map((t) => [t.name, t.dtype, t.shape, t.group]),
      given.map((t) => [t.name, t.dtype, t.shape, t.group]),
    );
    back.forEach((t, i) => assert.deepEqual(bytes(t.data), bytes(given[i]!.data), `returned ${t.name} differs`));
    back.forEach((t, i) => assert.equal(t.data.constructor, given[i]!.data.constructor));
    for (const t of back) assert.ok(!(t.data.buffer as ArrayBuffer).detached);

    // The returned arrays are ordinary live arrays: refill them and save again (staging reuse).
    (back[0]!.data as Float32Array).fill(7);
    await writer.save(`${dir}/b.ckpt`, { metadata: { step: 2 }, tensors: back });
    const loaded = await loadCheckpoint(`${dir}/b.ckpt`);
    assert.deepEqual(loaded.tensors[0]!.data, new Float32Array(6).fill(7));
    assert.equal(returned.length, 2);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter moves a buffer packed with several tensors whole and returns views over one buffer", async () => {
  const dir = await Deno.makeTempDir();
  const returned: TensorInput[][] = [];
  await using writer = new BackgroundWriter({ onReturn: (t) => returned.push(t) });
  try {
    const arena = new ArrayBuffer(64);
    const a = new Float32Array(arena, 0, 8).fill(1.25);
    const b = new Int32Array(arena, 32, 8).fill(-3);
    await writer.save(`${dir}/a.ckpt`, {
      metadata: { step: 5 },
      tensors: [
        { name: "a", dtype: "float32", shape: [8], data: a },
        { name: "b", dtype: "int32", shape: [2, 4], data: b },
      ],
    });

    assert.ok(arena.detached);
    const [ra, rb] = returned[0]!;
    assert.equal(ra!.data.buffer, rb!.data.buffer);
    assert.equal(ra!.data.buffer.byteLength, 64);
    assert.equal(rb!.data.byteOffset, 32);
    assert.deepEqual(ra!.data, new Float32Array(8).fill(1.25));
    assert.deepEqual(rb!.data, new Int32Array(8).fill(-3));
    const back = await loadCheckpoint(`${dir}/a.ckpt`);
    assert.deepEqual(back.tensors[1]!.data, new Int32Array(8).fill(-3));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the room snapshot reserves in front of each tensor crosses to the worker with the moved buffer, not with a copy", () => {
  // As snapshot() lays a checkpoint out: one buffer, room for each record prefix in front.
  const arena = new ArrayBuffer(256);
  const a = new Float32Array(arena, 64, 16);
  const b = new Int32Array(arena, 192, 16);
  reserveHeadroom(a, 64);
  reserveHeadroom(b, 64);
  const copied = new Float32Array(new ArrayBuffer(128), 64, 8); // a view into a buffer holding more
  reserveHeadroom(copied, 64);
  const owned = takeOwnership([
    { name: "a", dtype: "float32", shape: [16], data: a },
    { name: "b", dtype: "int32", shape: [16], data: b },
    { name: "c", dtype: "float32", shape: [8], data: copied },
  ]);
  assert.deepEqual(owned.headroom, [64, 64, 0], "the copy has no room in front of it");
  assert.equal(headroomOf(owned.tensors[0]!.data), 64);
  // What the worker receives: new buffers, which the mark (kept beside the old one) does not reach.
  const received = structuredClone(owned.tensors, { transfer: owned.transfer });
  assert.equal(headroomOf(received[0]!.data), 0);
  reserveReceived(received, owned.headroom);
  assert.deepEqual(received.map((t) => headroomOf(t.data)), [64, 64, 0]);
});

Deno.test("BackgroundWriter copies views into a larger buffer and shared memory, leaving the caller's arrays alone", async () => {
  const dir = await Deno.makeTempDir();
  const returned: TensorInput[][] = [];
  await using writer = new BackgroundWriter({ onReturn: (t) => returned.push(t) });
  try {
    const big = new Float32Array(16).map((_, i) => i);
    const view = big.subarray(4, 8);
    const shared = new Int16Array(new SharedArrayBuffer(8)).fill(9);
    const saving = writer.save(`${dir}/a.ckpt`, {
      metadata: { step: 1 },
      tensors: [
        { name: "view", dtype: "float32", shape: [4], data: view },
        { name: "shared", dtype: "int16", shape: [4], data: shared },
      ],
    });
    // Not moved, and what is saved is fixed at the call: later writes do not reach the file.
    assert.ok(!(big.buffer as ArrayBuffer).detached);
    big.fill(-1);
    shared.fill(-1);
    await saving;

    const back = await loadCheckpoint(`${dir}/a.ckpt`);
    assert.deepEqual(back.tensors[0]!.data, new Float32Array([4, 5, 6, 7]));
    assert.deepEqual(back.tensors[1]!.data, new Int16Array(4).fill(9));
    const [rv, rs] = returned[0]!;
    assert.deepEqual(rv!.data, new Float32Array([4, 5, 6, 7]));
    assert.ok(rs!.data.buffer instanceof ArrayBuffer, "the shared buffer comes back as a private copy");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter copies a tensor on memory that cannot be detached (WebAssembly) and saves it", async () => {
  const dir = await Deno.makeTempDir();
  await using writer = new BackgroundWriter();
  try {
    const memory = new WebAssembly.Memory({ initial: 1 });
    const data = new Float32Array(memory.buffer).fill(2.5); // the whole buffer: it would be moved
    const own = new Float32Array(8).fill(-1);
    await writer.save(`${dir}/a.ckpt`, {
      metadata: { step: 2 },
      tensors: [
        { name: "wasm", dtype: "float32", shape: [data.length], data },
        { name: "own", dtype: "float32", shape: [8], data: own },
      ],
    });
    assert.equal(data.length, 16384, "the WebAssembly memory is left as it was");
    assert.equal(data[0], 2.5);
    const back = await loadCheckpoint(`${dir}/a.ckpt`);
    assert.deepEqual(back.tensors[0]!.data, new Float32Array(16384).fill(2.5));
    assert.deepEqual(back.tensors[1]!.data, new Float32Array(8).fill(-1));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter posts a buffer that came back from the worker as it is: a second save of it is moved again", async () => {
  const dir = await Deno.makeTempDir();
  const returned: TensorInput[][] = [];
  await using writer = new BackgroundWriter({ onReturn: (t) => returned.push(t) });
  try {
    const first = new Float32Array(1024).fill(3);
    await writer.save(`${dir}/a.ckpt`, {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float32", shape: [1024], data: first }],
    });
    const again = returned[0]![0]!.data as Float32Array;
    again.fill(4);
    await writer.save(`${dir}/b.ckpt`, {
      metadata: { step: 2 },
      tensors: [{ name: "w", dtype: "float32", shape: [1024], data: again }],
    });
    assert.ok((again.buffer as ArrayBuffer).detached, "moved, not copied");
    assert.deepEqual((await loadCheckpoint(`${dir}/b.ckpt`)).tensors[0]!.data, new Float32Array(1024).fill(4));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter copies the metadata at the call, so later changes do not reach the file", async () => {
  const dir = await Deno.makeTempDir();
  await using writer = new BackgroundWriter();
  try {
    const metadata = { step: 1, metrics: { loss: 0.5 } };
    const saving = writer.save(`${dir}/a.ckpt`, { metadata, tensors: [] });
    metadata.metrics.loss = 99;
    metadata.step = 2;
    await saving;
    assert.deepEqual((await loadCheckpoint(`${dir}/a.ckpt`)).metadata, { step: 1, metrics: { loss: 0.5 } });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("SaveQueue runs one item at a time in arrival order, coalescing only waiting items", async () => {
  let running = 0;
  let most = 0;
  const ran: number[] = [];
  const superseded: string[] = [];
  let release!: () => void;
  const queue = new SaveQueue<number>(async (n) => {
    most = Math.max(most, ++running);
    await new Promise<void>((r) => (release = r));
    ran.push(n);
    running--;
  }, (old, by) => superseded.push(`${old}->${by}`));

  queue.push(1, false); // runs
  queue.push(2, false); // waits
  queue.push(3, false); // waits
  assert.equal(queue.waiting, 2);
  queue.push(4, true); // replaces 2 and 3, not the running 1
  assert.deepEqual(superseded, ["2->4", "3->4"]);
  queue.push(5, false); // waits behind 4
  while (ran.length < 3) {
    release();
    await new Promise((r) => setTimeout(r, 0));
  }
  assert.deepEqual(ran, [1, 4, 5]);
  assert.equal(most, 1);
  assert.equal(queue.waiting, 0);
});

Deno.test("BackgroundWriter queues saves in the worker: they are written while the calling thread never yields", async () => {
  const dir = await Deno.makeTempDir();
  await using writer = new BackgroundWriter();
  try {
    const steps = [1, 2, 3];
    const saves = steps.map((step) => writer.save(`${dir}/s${step}.ckpt`, { metadata: { step }, tensors: [] }));
    const giveUp = Date.now() + 60_000; // a hang guard, not a timing assertion
    const written = () =>
      steps.every((step) => {
        try {
          return Deno.statSync(`${dir}/s${step}.ckpt`).isFile;
        } catch {
          return false;
        }
      });
    while (!written() && Date.now() < giveUp) { /* block this thread */ }
    assert.ok(written(), "all three saves ran while this thread was blocked");
    assert.equal(writer.pending, 3, "their promises settle only once this thread yields");
    await Promise.all(saves);
    assert.equal(writer.pending, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter in the default wait mode writes every queued save, in order, with real files", async () => {
  const dir = await Deno.makeTempDir();
  await using writer = new BackgroundWriter();
  try {
    const saves = [10, 20, 30, 40].map((step) =>
      writer.save(`${dir}/latest.ckpt`, {
        metadata: { step },
        tensors: [{ name: "w", dtype: "float32", shape: [1024], data: new Float32Array(1024).fill(step) }],
      })
    );
    const results = await Promise.all(saves);
    assert.equal(new Set(results.map((r) => r.digest)).size, 4);
    const last = await loadCheckpoint(`${dir}/latest.ckpt`, { sha256: results[3]!.digest });
    assert.equal(last.metadata.step, 40, "the last call is the last write");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter in coalesce mode replaces the waiting save with the newest and rejects it as superseded", async () => {
  const dir = await Deno.makeTempDir();
  const returned: string[] = [];
  const writer = new BackgroundWriter({
    whenBusy: "coalesce",
    onReturn: (t) => returned.push(`${t[0]!.name}=${t[0]!.data[0]}`),
  });
  try {
    const save = (step: number) =>
      writer.save(`${dir}/step-${step}.ckpt`, {
        metadata: { step },
        tensors: [{ name: `w${step}`, dtype: "float64", shape: [2], data: new Float64Array([step, step]) }],
      });
    const first = save(1); // in flight
    const second = save(2); // waits...
    const third = save(3); // ...replaces 2
    const fourth = save(4); // ...replaces 3
    assert.equal(writer.pending, 4, "settled only when the worker's replies arrive");

    await assert.rejects(second, (e) => e instanceof SupersededError && e.step === 2 && e.supersededByStep === 3);
    await assert.rejects(third, (e) => e instanceof SupersededError && e.step === 3 && e.supersededByStep === 4);
    await first;
    await fourth;
    assert.ok(await exists(`${dir}/step-1.ckpt`));
    assert.ok(!(await exists(`${dir}/step-2.ckpt`)));
    assert.ok(!(await exists(`${dir}/step-3.ckpt`)));
    assert.equal((await loadCheckpoint(`${dir}/step-4.ckpt`)).metadata.step, 4);
    assert.deepEqual(returned.sort(), ["w1=1", "w2=2", "w3=3", "w4=4"], "superseded buffers come back too");
    await writer.flush(); // superseding is not a failure
  } finally {
    await writer.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter in coalesce mode never rejects an unobserved superseded save as unhandled", async () => {
  const dir = await Deno.makeTempDir();
  const writer = new BackgroundWriter({ whenBusy: "coalesce" });
  try {
    for (let step = 0; step < 5; step++) writer.save(`${dir}/s${step}.ckpt`, { metadata: { step }, tensors: [] });
    await writer.close(); // an unhandled rejection would fail this test
    assert.ok(await exists(`${dir}/s0.ckpt`));
    assert.ok(await exists(`${dir}/s4.ckpt`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter rejects an awaited save to an unwritable target with the I/O error class, reported once", async () => {
  const writer = new BackgroundWriter();
  try {
    await assert.rejects(
      writer.save("/nonexistent-ckpt-dir/a.ckpt", { metadata: { step: 7 }, tensors: [] }),
      (e) =>
        e instanceof Deno.errors.NotFound &&
        e.message.startsWith('Cannot save checkpoint (step 7) to "/nonexistent-ckpt-dir/a.ckpt": ') &&
        e.cause instanceof Deno.errors.NotFound,
    );
    await writer.flush(); // the caller saw it: not reported again
  } finally {
    await writer.close();
  }
});

Deno.test("a worker's error of a class this side lacks keeps its name in the message and on the cause", () => {
  const e = rebuildError({ name: "QuotaExceededError", message: "The quota has been exceeded." }, "Cannot save X");
  assert.equal(e.constructor, Error);
  assert.equal(e.message, "Cannot save X: QuotaExceededError: The quota has been exceeded.");
  assert.equal((e.cause as Error).name, "QuotaExceededError");
  const known = rebuildError({ name: "RangeError", message: "too big" }, "Cannot save X");
  assert.ok(known instanceof RangeError);
  assert.equal(known.message, "Cannot save X: too big");
  assert.equal(rebuildError({ name: "Error", message: "plain" }, "Cannot save X").message, "Cannot save X: plain");
});

Deno.test("BackgroundWriter throws an unobserved failure from the next save, which then starts nothing", async () => {
  const dir = await Deno.makeTempDir();
  const writer = new BackgroundWriter();
  try {
    writer.save("/nonexistent-ckpt-dir/a.ckpt", { metadata: { step: 7 }, tensors: [] }); // fire and forget
    while (writer.pending > 0) await new Promise((r) => setTimeout(r, 5));

    const data = new Float32Array([1, 2]);
    const tensors: TensorInput[] = [{ name: "w", dtype: "float32", shape: [2], data }];
    assert.throws(
      () => writer.save(`${dir}/b.ckpt`, { metadata: { step: 8 }, tensors }),
      (e) => e instanceof Deno.errors.NotFound && /step 7/.test(e.message),
    );
    assert.equal(data.length, 2, "the refused save did not take the buffers");
    assert.ok(!(await exists(`${dir}/b.ckpt`)));

    await writer.save(`${dir}/b.ckpt`, { metadata: { step: 8 }, tensors }); // reported once; it works again
    assert.equal((await loadCheckpoint(`${dir}/b.ckpt`)).metadata.step, 8);
  } finally {
    await writer.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter reports unobserved failures from flush and close, several as an AggregateError", async () => {
  const flushing = new BackgroundWriter();
  flushing.save("/nonexistent-ckpt-dir/a.ckpt", { metadata: { step: 1 }, tensors: [] });
  await assert.rejects(flushing.flush(), /Cannot save checkpoint \(step 1\)/);
  await flushing.close();

  const closing = new BackgroundWriter();
  closing.save("/nonexistent-ckpt-dir/a.ckpt", { metadata: { step: 1 }, tensors: [] });
  closing.save("/nonexistent-ckpt-dir/b.ckpt", { metadata: { step: 2 }, tensors: [] });
  await assert.rejects(
    closing.close(),
    (e) => e instanceof AggregateError && e.errors.length === 2 && /2 background saves failed/.test(e.message),
  );
  assert.ok(closing.closed);
});

Deno.test("BackgroundWriter leaves a failure to close() when only then(onSaved) was attached; a rejection handler takes charge", async () => {
  const logged: string[] = [];
  const leaving = new BackgroundWriter();
  leaving.save("/nonexistent-ckpt-dir/a.ckpt", { metadata: { step: 1 }, tensors: [] }).then(() => logged.push("saved"));
  leaving.save("/nonexistent-ckpt-dir/b.ckpt", { metadata: { step: 2 }, tensors: [] }).finally(() => logged.push("b"));
  await assert.rejects(
    leaving.close(),
    (e) => e instanceof AggregateError && e.errors.length === 2 && /step 1/.test(e.errors[0].message),
  );
  assert.deepEqual(logged, ["b"]);

  // A derived promise that gets a rejection handler takes charge, as does a silencing catch.
  let caught: unknown;
  const taking = new BackgroundWriter();
  taking.save("/nonexistent-ckpt-dir/a.ckpt", { metadata: { step: 1 }, tensors: [] }).then(() => {}).catch((e) => {
    caught = e;
  });
  taking.save("/nonexistent-ckpt-dir/b.ckpt", { metadata: { step: 2 }, tensors: [] }).catch(() => {});
  await taking.close();
  assert.match(String(caught), /step 1/);
});

Deno.test("BackgroundWriter rejects bad arguments at once without taking the tensors", async () => {
  await using writer = new BackgroundWriter();
  const data = new Float32Array([1, 2, 3]);
  const good: TensorInput = { name: "w", dtype: "float32", shape: [3], data };
  const save = (target: string | URL, tensors: unknown, options = {}, metadata: unknown = { step: 1 }) => () =>
    writer.save(target, { metadata, tensors } as never, options);

  assert.throws(save("x.ckpt", [good, { ...good, shape: [4] }]), RangeError);
  assert.throws(save("x.ckpt", [good, good]), /duplicate tensor name "w"/);
  assert.throws(save("x.ckpt", [good], {}, { step: -1 }), TypeError);
  assert.throws(save(new URL("https://example.com/x.ckpt"), [good]), TypeError);
  assert.throws(save("x.ckpt", [good], { codec: binaryCodec as Codec }), /Codec object/);
  assert.throws(save("x.ckpt", [good], { codec: "csv" }), /Unknown codec "csv"/);
  assert.throws(save("x.ckpt", [good], { compression: "zstd" }), /Unknown compression "zstd"/);
  assert.throws(save("x.ckpt", new Set([good])), /tensors must be an array/);
  assert.throws(save("", [good]), /target path is empty/);
  assert.equal(data.length, 3, "nothing was taken");
  assert.equal(writer.pending, 0);

  assert.throws(() => new BackgroundWriter({ whenBusy: "drop" as never }), /whenBusy/);
  assert.throws(() => new BackgroundWriter({ idleTimeout: -1 }), RangeError);
});

Deno.test("BackgroundWriter names a tensor whose buffer an earlier save already moved", async () => {
  const dir = await Deno.makeTempDir();
  await using writer = new BackgroundWriter();
  try {
    const tensors: TensorInput[] = [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array(2) }];
    const first = writer.save(`${dir}/a.ckpt`, { metadata: { step: 1 }, tensors });
    assert.throws(
      () => writer.save(`${dir}/b.ckpt`, { metadata: { step: 2 }, tensors }),
      (e) => e instanceof TypeError && /tensor "w" has detached data/.test(e.message),
    );
    await first;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter close waits for saves in flight, then refuses new ones", async () => {
  const dir = await Deno.makeTempDir();
  const writer = new BackgroundWriter();
  try {
    const big = new Float64Array(2 ** 20).fill(0.5);
    const saving = writer.save(`${dir}/a.ckpt`, {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float64", shape: [2 ** 20], data: big }],
    });
    const closing = writer.close();
    assert.equal(writer.close(), closing, "close is idempotent");
    assert.throws(
      () => writer.save(`${dir}/b.ckpt`, { metadata: { step: 2 }, tensors: [] }),
      /BackgroundWriter is closed/,
    );
    await closing;
    assert.equal(writer.pending, 0);
    assert.equal((await saving).bytes, (await Deno.stat(`${dir}/a.ckpt`)).size);
    await writer.flush();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter fails every save a crashed worker held, with a clear error, and the next save gets a fresh worker", async () => {
  const dir = await Deno.makeTempDir();
  const returned: TensorInput[][] = [];
  const writer = new BackgroundWriter(
    { [WORKER_URL]: crashingWorker(13), onReturn: (t: TensorInput[]) => returned.push(t) } as object,
  );
  try {
    const tensors: TensorInput[] = [{ name: "w", dtype: "int8", shape: [1], data: new Int8Array([1]) }];
    const crashed = writer.save(`${dir}/a.ckpt`, { metadata: { step: 13 }, tensors });
    const queuedBehind = writer.save(`${dir}/q.ckpt`, { metadata: { step: 14 }, tensors: [] });
    await assert.rejects(
      crashed,
      /Cannot save checkpoint \(step 13\) to ".*a\.ckpt": the background worker crashed: .*boom at step 13/,
    );
    await assert.rejects(queuedBehind, /Cannot save checkpoint \(step 14\) .*the background worker crashed/);
    assert.equal(returned.length, 0, "the buffers went down with the worker");
    assert.ok(!(await exists(`${dir}/a.ckpt`)));

    await writer.save(`${dir}/b.ckpt`, { metadata: { step: 15 }, tensors: [] });
    assert.equal((await loadCheckpoint(`${dir}/b.ckpt`)).metadata.step, 15);
  } finally {
    await writer.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter reports an onReturn callback that throws at the next call", async () => {
  const writer = new BackgroundWriter({
    onReturn: () => {
      throw new Error("pool is full");
    },
  });
  const dir = await Deno.makeTempDir();
  try {
    await writer.save(`${dir}/a.ckpt`, {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "uint8", shape: [1], data: new Uint8Array(1) }],
    });
    await assert.rejects(writer.flush(), /onReturn callback threw: pool is full/);
  } finally {
    await writer.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter resolves a relative path when save is called", async () => {
  const dir = await Deno.makeTempDir();
  const cwd = Deno.cwd();
  await using writer = new BackgroundWriter();
  try {
    Deno.chdir(dir);
    const saving = writer.save("rel.ckpt", { metadata: { step: 1 }, tensors: [] });
    Deno.chdir(cwd);
    await saving;
    assert.ok(await exists(`${dir}/rel.ckpt`));
  } finally {
    Deno.chdir(cwd);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter writes { store, key } and file: URL strings through the store's address", async () => {
  const dir = await Deno.makeTempDir();
  await using writer = new BackgroundWriter();
  try {
    const store = new FileStore(dir);
    const w = (step: number): TensorInput[] => [
      { name: "w", dtype: "float32", shape: [2], data: new Float32Array([step, -step]) },
    ];
    const a = await writer.save({ store, key: "run 1/#a.ckpt" }, { metadata: { step: 1 }, tensors: w(1) });
    const b = await writer.save(`${store.url}b.ckpt`, { metadata: { step: 2 }, tensors: w(2) });
    const backA = await loadCheckpoint(`${dir}/run 1/#a.ckpt`, { sha256: a.digest });
    const backB = await loadCheckpoint(`${dir}/b.ckpt`, { sha256: b.digest });
    assert.deepEqual([backA.tensors[0]!.data, backB.tensors[0]!.data], [
      new Float32Array([1, -1]),
      new Float32Array([2, -2]),
    ]);

    const data = new Float32Array(2);
    assert.throws(
      () =>
        writer.save({ store: new MemoryStore(), key: "a.ckpt" }, {
          metadata: { step: 3 },
          tensors: [{ name: "w", dtype: "float32", shape: [2], data }],
        }),
      (e) =>
        e instanceof TypeError &&
        /to memory:\/\/.*a\.ckpt: a worker cannot open that store \(it has no address/.test(e.message),
    );
    assert.equal(data.length, 2, "nothing was taken");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter saves a 256 MiB checkpoint while the calling thread is blocked, and lets timers tick while awaited", async () => {
  const dir = await Deno.makeTempDir();
  const spare: TensorInput[][] = [];
  await using writer = new BackgroundWriter({ onReturn: (t) => spare.push(t) });
  try {
    const n = 64 * 2 ** 20;
    const data = new Float32Array(n);
    for (let i = 0; i < n; i += 4096) data[i] = i;
    const tensors: TensorInput[] = [{ name: "big", dtype: "float32", shape: [n], data }];

    // Block this thread in a synchronous loop until the file appears: only a save running on
    // another thread can finish meanwhile (an inline save would never get to run).
    const path = `${dir}/blocked.ckpt`;
    const saving = writer.save(path, { metadata: { step: 1 }, tensors }, { sync: false });
    const giveUp = Date.now() + 120_000; // a hang guard, not a timing assertion
    let written = false;
    while (!written && Date.now() < giveUp) {
      try {
        written = Deno.statSync(path).isFile;
      } catch { /* not yet */ }
    }
    assert.ok(written, "the save finished while the calling thread never yielded");
    const first = await saving;
    assert.equal(first.bytes, Deno.statSync(path).size);

    // The same buffers, handed back, saved again: a counter on this thread keeps ticking meanwhile.
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    try {
      const second = await writer.save(`${dir}/again.ckpt`, { metadata: { step: 1 }, tensors: spare[0]! }, {
        sync: false,
      });
      assert.equal(second.digest, first.digest);
    } finally {
      clearInterval(timer);
    }
    assert.ok(ticks > 0, "the timer ticked during the save");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

async function runScript(source: string): Promise<{ code: number; stderr: string }> {
  const dir = await Deno.makeTempDir();
  try {
    const script = `${dir}/script.ts`;
    await Deno.writeTextFile(script, source);
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", script],
      stdout: "null",
      stderr: "piped",
      signal: AbortSignal.timeout(60_000), // a hang guard: a process kept alive fails the test
    }).spawn();
    const { code, stderr } = await child.output();
    return { code, stderr: new TextDecoder().decode(stderr) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("BackgroundWriter lets the process exit after close, even with a worker kept warm forever", async () => {
  const { code, stderr } = await runScript(`
    import { BackgroundWriter } from ${JSON.stringify(new URL("../../src/background/writer.ts", import.meta.url).href)};
    const dir = await Deno.makeTempDir();
    const writer = new BackgroundWriter({ idleTimeout: Infinity });
    await writer.save(dir + "/a.ckpt", { metadata: { step: 1 }, tensors: [] });
    await writer.close();
    await Deno.remove(dir, { recursive: true });
  `);
  assert.equal(code, 0, stderr);
});

Deno.test("BackgroundWriter lets a script that never closes it exit once the worker is idle", async () => {
  const { code, stderr } = await runScript(`
    import { BackgroundWriter } from ${JSON.stringify(new URL("../../src/background/writer.ts", import.meta.url).href)};
    const dir = await Deno.makeTempDir();
    const writer = new BackgroundWriter({ idleTimeout: 100 });
    await writer.save(dir + "/a.ckpt", { metadata: { step: 1 }, tensors: [] });
    await Deno.remove(dir, { recursive: true });
  `);
  assert.equal(code, 0, stderr);
});

Deno.test("a large save through the worker hashes on a nested worker and returns the file's digest", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const tensors = [0, 1, 2, 3, 4].map((i) => ({
      name: `t${i}`,
      dtype: "float32" as const,
      shape: [(14 << 20) / 4],
      data: new Float32Array((14 << 20) / 4).fill(i + 0.5),
    }));
    const expected = tensors.map((t) => t.data.slice());
    await using writer = new BackgroundWriter();
    const path = `${dir}/big.ckpt`;
    // 70 MiB: over the worker-hash threshold
    const r = await writer.save(path, { metadata: { step: 1 }, tensors }, { sha256sum: true });
    assert.equal(r.sha256, await sha256File(path));
    const back = await loadCheckpoint(path, { sha256: r.sha256 });
    assert.deepEqual(back.tensors.map((t) => t.data), expected);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BackgroundWriter streamed save: tensors pushed in chunks write the same bytes as save() and all come back", async () => {
  const dir = await Deno.makeTempDir();
  const returned: TensorInput[] = [];
  const writer = new BackgroundWriter({ onReturn: (t) => returned.push(...t) });
  const metadata = { step: 7, metrics: { loss: 0.25 } };
  const whole = await writer.save(`${dir}/whole.ckpt`, { metadata, tensors: sampleTensors() });
  returned.length = 0;
  const tensors = sampleTensors();
  const stream = writer[SAVE_STREAM](`${dir}/streamed.ckpt`, metadata);
  stream.push(tensors.slice(0, 3));
  await new Promise((r) => setTimeout(r, 20)); // the worker starts on these before the rest come
  stream.push(tensors.slice(3));
  assert.equal(tensors[0]!.data.length, 0); // moved, not copied
  stream.end();
  const streamed = await stream.promise;
  await writer.close();
  assert.deepEqual(streamed, whole);
  assert.deepEqual(await Deno.readFile(`${dir}/streamed.ckpt`), await Deno.readFile(`${dir}/whole.ckpt`));
  assert.deepEqual(returned.map((t) => [t.name, bytes(t.data)]), sampleTensors().map((t) => [t.name, bytes(t.data)]));
  await Deno.remove(dir, { recursive: true });
});

Deno.test("BackgroundWriter streamed save ended with an error rejects with it and leaves the previous file, no temp", async () => {
  const dir = await Deno.makeTempDir();
  const returned: TensorInput[] = [];
  const writer = new BackgroundWriter({ onReturn: (t) => returned.push(...t) });
  const path = `${dir}/a.ckpt`;
  await writer.save(path, { metadata: { step: 1 }, tensors: sampleTensors() });
  const before = await Deno.readFile(path);
  returned.length = 0;
  const stream = writer[SAVE_STREAM](path, { step: 2 });
  stream.push(sampleTensors().slice(0, 2));
  await new Promise((r) => setTimeout(r, 20));
  const why = new TypeError("Cannot snapshot: the read-back failed");
  stream.end(why);
  await assert.rejects(stream.promise, (e) => e === why);
  assert.throws(() => stream.push(sampleTensors()), /its stream has ended/);
  assert.equal(returned.length, 2); // what reached the worker came back
  await writer.close(); // the failure was observed: not reported again
  assert.deepEqual(await Deno.readFile(path), before);
  assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["a.ckpt"]);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("BackgroundWriter streamed save refuses a coalescing writer and bad targets at once", async () => {
  await using coalescing = new BackgroundWriter({ whenBusy: "coalesce" });
  assert.throws(() => coalescing[SAVE_STREAM]("a.ckpt", { step: 1 }), /coalesces/);
  await using writer = new BackgroundWriter();
  assert.throws(() => writer[SAVE_STREAM]("", { step: 1 }), /target path is empty/);
  assert.throws(() => writer[SAVE_STREAM]("a.ckpt", { step: -1 }), TypeError);
  assert.equal(writer.pending, 0);
});
