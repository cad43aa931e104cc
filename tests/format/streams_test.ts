import assert from "node:assert/strict";
import { pullStream } from "../../src/format/_streams.ts";
import { encodeCheckpoint, loadCheckpoint } from "../../mod.ts";

// pullStream is what runs where ReadableStream.from is missing (Chromium); Deno has the native one,
// so these tests exercise the fallback directly.

Deno.test("pullStream yields an iterable's values in order, sync or async", async () => {
  const out: number[] = [];
  for await (const v of pullStream([1, 2, 3])) out.push(v);
  assert.deepEqual(out, [1, 2, 3]);
  const gen = (async function* () {
    yield 4;
    yield 5;
  })();
  const back: number[] = [];
  for await (const v of pullStream(gen)) back.push(v);
  assert.deepEqual(back, [4, 5]);
});

Deno.test("pullStream pulls only when read, and returns the iterator on cancel", async () => {
  let produced = 0;
  let finished = false;
  const gen = (async function* () {
    try {
      for (;;) yield ++produced;
    } finally {
      finished = true;
    }
  })();
  const reader = pullStream(gen).getReader();
  assert.equal((await reader.read()).value, 1);
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(produced, 1, "nothing produced ahead of reads");
  await reader.cancel();
  assert.ok(finished);
});

Deno.test("pullStream errors the stream when the iterator throws", async () => {
  const gen = (async function* () {
    yield 1;
    throw new SyntaxError("bad bytes");
  })();
  await assert.rejects(async () => {
    for await (const _ of pullStream(gen));
  }, SyntaxError);
});

Deno.test("a checkpoint round-trips through pullStream sources", async () => {
  const bytes = new Uint8Array(
    await new Response(encodeCheckpoint({
      metadata: { step: 3 },
      tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
    })).arrayBuffer(),
  );
  const chunks = Array.from({ length: bytes.byteLength }, (_, i) => bytes.subarray(i, i + 1));
  const back = await loadCheckpoint(pullStream(chunks));
  assert.deepEqual(back.tensors[0]!.data, new Float32Array([1, 2]));
});
