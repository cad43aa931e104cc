// WebKit's ReadableStream (Safari's too) is not async-iterable. These tests take the async
// iterator off ReadableStream.prototype, as WebKit has it, and run what a page runs: saves and
// loads of every codec and compression, verify, a manager's saves and loads (full and
// incremental), Range loads over HTTP, TF.js artifacts and a sidecar. ckpt reads every stream with
// a reader (`iterate` in src/format/_streams.ts), so all of it must work.
import assert from "node:assert/strict";
import {
  CheckpointManager,
  decodeCheckpoint,
  encodeCheckpoint,
  HttpStore,
  loadCheckpoint,
  MemoryStore,
  readSha256Sidecar,
  saveCheckpoint,
  verifyCheckpoint,
  writeSha256Sidecar,
} from "../../mod.ts";
import { readTfjsArtifacts, writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { isReadableStream, iterate, streamIterator } from "../../src/format/_streams.ts";
import { safetensorsCodec } from "../../src/interop/safetensors.ts";
import type { CheckpointInput, TensorInput } from "../../src/format/types.ts";
import { assertSameCheckpoint, edgeCheckpoint, withDir } from "../_util.ts";
import { serveDirectory } from "../storage/_http_server.ts";
import { join } from "node:path";

type Proto = Record<PropertyKey, unknown>;

/** Runs `fn` with ReadableStream as WebKit has it: no `Symbol.asyncIterator`, no `values()`. */
async function asInWebKit<T>(fn: () => Promise<T>): Promise<T> {
  const proto = ReadableStream.prototype as unknown as Proto;
  const saved = [Symbol.asyncIterator, "values"].map((k) => [k, Object.getOwnPropertyDescriptor(proto, k)] as const);
  for (const [k] of saved) delete proto[k];
  try {
    assert.ok(!(Symbol.asyncIterator in new ReadableStream()), "the stream is not async-iterable");
    return await fn();
  } finally {
    for (const [k, d] of saved) if (d) Object.defineProperty(proto, k, d);
  }
}

const model = (step: number): CheckpointInput => ({
  metadata: { step, metrics: { loss: 1 / step } },
  tensors: [
    { name: "dense/kernel", dtype: "float32", shape: [64, 3], data: new Float32Array(192).map((_, i) => i / 7 + step) },
    { name: "dense/bias", dtype: "float32", shape: [3], data: new Float32Array([step, 2, 3]) },
    { name: "n", dtype: "int32", shape: [2], data: new Int32Array([-1, step]) },
  ],
});

Deno.test("iterate reads a stream with a reader: its values, then the lock released", async () => {
  await asInWebKit(async () => {
    const stream = new Blob([new Uint8Array([1, 2, 3]), new Uint8Array([4])]).stream();
    const got: number[] = [];
    for await (const c of iterate(stream)) got.push(...c);
    assert.deepEqual(got, [1, 2, 3, 4]);
    assert.equal(stream.locked, false);
    assert.deepEqual([...iterate([5, 6]) as Iterable<number>], [5, 6], "an iterable passes through");
    assert.ok(isReadableStream(stream) && !isReadableStream([1]) && !isReadableStream(null));
  });
});

Deno.test("iterate: a break cancels the stream; a stream's error comes out of the loop and unlocks it", async () => {
  await asInWebKit(async () => {
    let cancelled: unknown;
    let pulls = 0;
    const endless = new ReadableStream<number>({
      pull: (c) => c.enqueue(++pulls),
      cancel: (reason) => void (cancelled = reason ?? "cancelled"),
    }, { highWaterMark: 0 });
    for await (const v of iterate(endless)) if (v === 2) break;
    assert.equal(cancelled, "cancelled");
    assert.equal(endless.locked, false);
    const failing = new ReadableStream<number>({
      start(c) {
        c.enqueue(1);
        c.error(new SyntaxError("bad bytes at offset 9"));
      },
    });
    await assert.rejects(async () => {
      for await (const _ of iterate(failing));
    }, /bad bytes at offset 9/);
    assert.equal(failing.locked, false);
    const it = streamIterator(new Blob(["x"]).stream());
    assert.deepEqual(await it.return!(), { done: true, value: undefined });
    assert.deepEqual(await it.next(), { done: true, value: undefined }, "ended for good");
  });
});

Deno.test("without async-iterable streams: every codec and compression saves, loads and verifies", async () => {
  await asInWebKit(async () => {
    for (const codec of ["binary", "json", safetensorsCodec] as const) {
      for (const compression of ["none", "gzip", "bytegroup"] as const) {
        if (compression === "bytegroup" && codec !== "binary") continue;
        const what = `${typeof codec === "string" ? codec : codec.name}/${compression}`;
        const input = edgeCheckpoint();
        const store = new MemoryStore();
        const codecs = codec === safetensorsCodec ? [safetensorsCodec] : [];
        const saved = await saveCheckpoint({ store, key: "a.ckpt" }, input, { codec, compression, sha256sum: true });
        assertSameCheckpoint(await loadCheckpoint({ store, key: "a.ckpt" }, { codecs }), input);
        const bytes = new Uint8Array(await new Response(encodeCheckpoint(input, { codec, compression })).arrayBuffer());
        assertSameCheckpoint(
          await loadCheckpoint(new Blob([bytes]).stream(), { codecs, sha256: saved.sha256! }),
          input,
        );
        const verified = await verifyCheckpoint({ store, key: "a.ckpt" }, { codecs });
        assert.equal(verified.tensors.length, (input.tensors as TensorInput[]).length, what);
        const kinds: string[] = [];
        for await (const r of iterate(decodeCheckpoint(bytes, { codecs }))) kinds.push(r.type);
        assert.equal(kinds[0], "metadata", what);
      }
    }
  });
});

Deno.test("without async-iterable streams: tensors given as a ReadableStream encode", async () => {
  await asInWebKit(async () => {
    const input = model(3);
    const tensors = new ReadableStream<TensorInput>({
      start(c) {
        for (const t of input.tensors as TensorInput[]) c.enqueue(t);
        c.close();
      },
    });
    const store = new MemoryStore();
    await saveCheckpoint({ store, key: "s.ckpt" }, { metadata: input.metadata, tensors });
    assertSameCheckpoint(await loadCheckpoint({ store, key: "s.ckpt" }), input);
  });
});

Deno.test("without async-iterable streams: a manager saves, lists and loads, full and incremental", async () => {
  await asInWebKit(async () => {
    for (const incremental of [false, true]) {
      for (const compression of ["none", "gzip"] as const) {
        const store = new MemoryStore();
        const mgr = await CheckpointManager.open(store, { maxToKeep: 2, incremental, compression });
        for (const step of [1, 2, 3]) await mgr.save(model(step));
        assert.deepEqual((await mgr.list()).map((e) => e.step), [2, 3]);
        assertSameCheckpoint((await mgr.latest())!, model(3));
        await mgr.close();
        const again = await CheckpointManager.open(store, { maxToKeep: 2, incremental, compression });
        assertSameCheckpoint((await again.load(2))!, model(2));
        await again.close();
      }
    }
  });
});

Deno.test("without async-iterable streams: Range loads over HTTP, TF.js artifacts and a sidecar", async () => {
  await withDir(async (dir) => {
    const server = serveDirectory(dir);
    try {
      await asInWebKit(async () => {
        const bytes = new Uint8Array(await new Response(encodeCheckpoint(model(5))).arrayBuffer());
        await Deno.writeFile(join(dir, "m.ckpt"), bytes);
        const store = new HttpStore(server.url);
        const one = await loadCheckpoint({ store, key: "m.ckpt" }, { only: ["dense/bias"] });
        assert.deepEqual([...one.tensors[0]!.data as Float32Array], [5, 2, 3]);
        assert.ok(server.log.some((l) => /GET \/m\.ckpt bytes=/.test(l)), server.log.join("\n"));
        assertSameCheckpoint(await loadCheckpoint(`${server.url}m.ckpt`), model(5));
        const mem = new MemoryStore();
        const dirStore = new MemoryStore();
        await writeTfjsArtifacts(dirStore, model(6), { shardBytes: 300 });
        assertSameCheckpoint(await readTfjsArtifacts({ store: dirStore, key: "model.json" }), model(6));
        const { sha256 } = await saveCheckpoint({ store: mem, key: "w.ckpt" }, model(7), { sha256sum: true });
        await writeSha256Sidecar({ store: mem, key: "w.ckpt" }, sha256!);
        assert.equal(await readSha256Sidecar({ store: mem, key: "w.ckpt" }), sha256);
      });
    } finally {
      await server.close();
    }
  });
});
