import assert from "node:assert/strict";
import { encodeCheckpoint, loadCheckpoint, sniffCheckpoint } from "../../mod.ts";
import type { TensorInput } from "../../src/format/types.ts";
import { assertSameCheckpoint, collect, edgeCheckpoint, feeds } from "../_util.ts";

for (const codec of ["binary", "json"] as const) {
  Deno.test(`gzip over the ${codec} codec round-trips every dtype and is a standard gzip stream`, async () => {
    const ckpt = edgeCheckpoint();
    const gz = await collect(encodeCheckpoint(ckpt, { codec, compression: "gzip" }));
    assert.deepEqual([...gz.subarray(0, 2)], [0x1f, 0x8b]);
    for (const feed of feeds(gz, 3)) assertSameCheckpoint(await loadCheckpoint(feed.stream()), ckpt);
    // gunzip (an independent implementation) gives back exactly the uncompressed encoding.
    const p = new Deno.Command("gzip", { args: ["-dc"], stdin: "piped", stdout: "piped" }).spawn();
    const w = p.stdin.getWriter();
    await w.write(gz);
    await w.close();
    const out = await p.output();
    assert.equal(out.code, 0);
    assert.deepEqual(out.stdout, await collect(encodeCheckpoint(ckpt, { codec })));
  });
}

Deno.test("sniffCheckpoint reports codec and compression from the bytes", async () => {
  for (const codec of ["binary", "json"] as const) {
    for (const compression of ["none", "gzip"] as const) {
      const found = await sniffCheckpoint(
        encodeCheckpoint({ metadata: { step: 1 }, tensors: [] }, { codec, compression }),
      );
      assert.equal(found.codec.name, codec);
      assert.equal(found.compression, compression);
      await found.bytes.cancel();
    }
  }
});

Deno.test("a truncated or corrupt gzip stream is a SyntaxError, not a shorter checkpoint", async () => {
  const gz = await collect(encodeCheckpoint(edgeCheckpoint(), { compression: "gzip" }));
  for (const n of [10, 20, gz.length >> 1, gz.length - 9, gz.length - 1]) {
    await assert.rejects(() => loadCheckpoint(gz.slice(0, n)), SyntaxError, `prefix ${n}`);
  }
  const bad = gz.slice();
  bad[gz.length >> 1]! ^= 0xff;
  await assert.rejects(() => loadCheckpoint(bad), Error);
});

Deno.test("unrecognised or empty input names what it saw", async () => {
  await assert.rejects(
    () => loadCheckpoint(new TextEncoder().encode("PK\x03\x04hello")),
    /unrecognised format at offset 0 \(first bytes 50 4b 03 04/,
  );
  await assert.rejects(() => loadCheckpoint(new Uint8Array(0)), /the stream is empty/);
  await assert.rejects(() => loadCheckpoint(new Uint8Array([0x1f, 0x8b])), SyntaxError);
});

Deno.test("tensors produced lazily by an async iterable are pulled only as bytes are read", async () => {
  let produced = 0;
  async function* lazy(): AsyncGenerator<TensorInput> {
    for (let i = 0; i < 50; i++) {
      produced++;
      yield { name: `t${i}`, dtype: "float32", shape: [1024], data: new Float32Array(1024).fill(i) };
    }
  }
  const reader = encodeCheckpoint({ metadata: { step: 1 }, tensors: lazy() }).getReader();
  await reader.read();
  await reader.read();
  assert.ok(produced < 5, `only a few tensors produced after two reads, got ${produced}`);
  await reader.cancel();
});

Deno.test("encodeCheckpoint rejects bad options and inputs with TypeErrors", () => {
  assert.throws(
    () => encodeCheckpoint({ metadata: { step: 1 }, tensors: [] }, { codec: "xml" as "json" }),
    /Unknown codec "xml"/,
  );
  assert.throws(
    () => encodeCheckpoint({ metadata: { step: 1 }, tensors: [] }, { compression: "zstd" as "gzip" }),
    /Unknown compression "zstd"/,
  );
});

Deno.test("an error in the tensor source fails the stream", async () => {
  async function* broken(): AsyncGenerator<TensorInput> {
    yield { name: "a", dtype: "int8", shape: [1], data: new Int8Array(1) };
    throw new Error("snapshot failed");
  }
  await assert.rejects(
    () => collect(encodeCheckpoint({ metadata: { step: 1 }, tensors: broken() })),
    /snapshot failed/,
  );
});
