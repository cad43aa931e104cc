// The binary decoder in a page: a load hashes each raw tensor of 1 MiB or more with one WebCrypto
// call over its record's bytes (read into a buffer with room for the record's prefix before the
// body), while it reads the next; smaller ones, byte-grouped ones, verifies and loads with
// reuseBuffers keep the incremental hash. Deno has no page, so these tests put Deno's own
// `crypto.subtle.digest` (the same WebCrypto API, copying its input) in the place of the page's
// and count what it was given; the browser suites (tests/web) load through the real one.
import assert from "node:assert/strict";
import {
  type CheckpointInput,
  ChecksumMismatchError,
  decodeCheckpoint,
  encodeCheckpoint,
  loadCheckpoint,
  type TensorInput,
  verifyCheckpoint,
} from "../../../mod.ts";
import { restore, spyWeb } from "./_web_spy.ts";
import { assertSameTensors, chunked, collect, withFile } from "../../_util.ts";

const MiB = 2 ** 20;

/** Float32 tensors over and under 1 MiB, with a small one between them. */
function model(): CheckpointInput & { tensors: TensorInput[] } {
  const sizes = [MiB / 4, MiB / 4 + 3, MiB / 4 - 1, MiB / 2];
  const tensors = sizes.map((n, i) => {
    const data = new Float32Array(n);
    for (let j = 0; j < n; j++) data[j] = Math.fround((((j * 2654435761) % 1000) - 500) * 1e-5 + i);
    return { name: `layer${i}/kernel`, dtype: "float32" as const, shape: [n], data };
  });
  tensors.splice(2, 0, { name: "scale", dtype: "float32", shape: [1], data: new Float32Array([7]) });
  return { metadata: { step: 3 }, tensors };
}

/** The bytes of each record of a tensor of 1 MiB or more: its prefix (header, head, padding) and body. */
function largeRecords(input: { tensors: TensorInput[] }): number[] {
  return input.tensors.filter((t) => t.data.byteLength >= MiB).map((t) => t.data.byteLength);
}

Deno.test("a page's load hashes each raw tensor of 1 MiB or more with one WebCrypto call over its record, bit for bit", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  const calls = spyWeb();
  try {
    for (const feed of [[bytes], chunked(bytes, 65536), chunked(bytes, 4093)]) {
      calls.length = 0;
      const back = await loadCheckpoint(ReadableStream.from(feed));
      assertSameTensors(back.tensors, input.tensors);
      // One call per large tensor, over its whole record (body and a prefix of under 1 KiB).
      const bodies = largeRecords(input);
      assert.equal(calls.length, bodies.length);
      calls.forEach((n, i) => assert.ok(n > bodies[i]! && n < bodies[i]! + 1024, `${n} for ${bodies[i]}`));
    }
    // From a file too, and into the caller's buffers (the record joined to its prefix first).
    await withFile(bytes, async (path) => {
      calls.length = 0;
      assertSameTensors((await loadCheckpoint(path)).tensors, input.tensors);
      assert.equal(calls.length, largeRecords(input).length);
      const into = new Map(input.tensors.map((t) => [t.name, new Float32Array(t.data.length)]));
      const back = await loadCheckpoint(path, { into });
      assertSameTensors(back.tensors, input.tensors);
      assert.equal(back.tensors[0]!.data.buffer, into.get("layer0/kernel")!.buffer); // in the caller's memory
      assert.equal(calls.length, 2 * largeRecords(input).length);
    });
  } finally {
    restore();
  }
});

Deno.test("with WebCrypto, a corrupt large tensor is the same ChecksumMismatchError, the tensors before it out first", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  const at = bytes.findLastIndex((_, i) => i < bytes.byteLength - MiB && bytes[i] !== 0); // in the last kernel
  const bad = bytes.slice();
  bad[at] = bad[at]! ^ 1;
  const names = async () => {
    const seen: string[] = [];
    try {
      for await (const r of decodeCheckpoint(bad)) if (r.type === "tensor") seen.push(r.tensor.name);
    } catch (e) {
      return { seen, error: e as Error };
    }
    return { seen, error: undefined };
  };
  const plain = await names();
  const calls = spyWeb();
  try {
    const web = await names();
    assert.ok(calls.length > 0);
    assert.ok(web.error instanceof ChecksumMismatchError);
    assert.equal(web.error.message, plain.error?.message);
    assert.deepEqual(web.seen, plain.seen);
    await assert.rejects(
      () => loadCheckpoint(bad),
      (e) => e instanceof ChecksumMismatchError && e.message === plain.error?.message,
    );
  } finally {
    restore();
  }
});

Deno.test("a page's load of a byte-grouped file hashes each decoded tensor of 1 MiB or more with one WebCrypto call; a corrupt one is the same error", async () => {
  const input = model();
  const grouped = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
  // A flipped bit in the last kernel's stored planes: caught by its record digest (or the decoder).
  const bad = grouped.slice();
  bad[grouped.byteLength - 4096] = bad[grouped.byteLength - 4096]! ^ 1;
  const plain = await loadCheckpoint(bad).then(() => "no error", (e: Error) => `${e.name}: ${e.message}`);
  const calls = spyWeb();
  try {
    assertSameTensors((await loadCheckpoint(grouped)).tensors, input.tensors);
    const bodies = largeRecords(input);
    assert.equal(calls.length, bodies.length);
    calls.forEach((n, i) => assert.ok(n > bodies[i]! && n < bodies[i]! + 1024, `${n} for ${bodies[i]}`));
    const web = await loadCheckpoint(bad).then(() => "no error", (e: Error) => `${e.name}: ${e.message}`);
    assert.notEqual(web, "no error");
    assert.equal(web, plain);
  } finally {
    restore();
  }
});

Deno.test("WebCrypto stays out of verifies, loads with reuseBuffers or one thread asked for", async () => {
  const input = model();
  const raw = await collect(encodeCheckpoint(input));
  const grouped = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
  const calls = spyWeb();
  try {
    await verifyCheckpoint(raw);
    await verifyCheckpoint(grouped);
    for await (const _ of decodeCheckpoint(raw, { reuseBuffers: true })) { /* one pass */ }
    await loadCheckpoint(raw, { parallelHash: false });
    assertSameTensors((await loadCheckpoint(grouped, { parallelHash: false })).tensors, input.tensors);
    assert.deepEqual(calls, []);
  } finally {
    restore();
  }
});
