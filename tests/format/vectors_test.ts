// docs/FORMAT.md's test vectors: the encoders must produce them and the decoders read them back.
import assert from "node:assert/strict";
import { encodeCheckpoint, loadCheckpoint } from "../../mod.ts";
import type { CheckpointInput } from "../../src/format/types.ts";
import { assertSameCheckpoint, collect } from "../_util.ts";

const doc = await Deno.readTextFile(new URL("../../docs/FORMAT.md", import.meta.url));

function block(name: string): string {
  const m = new RegExp(`<!-- ${name}:begin -->\\s*\`\`\`\\n([\\s\\S]*?)\`\`\`\\s*<!-- ${name}:end -->`).exec(doc);
  assert.ok(m, `docs/FORMAT.md has the ${name} block`);
  return m[1]!;
}

const vector = (): CheckpointInput => ({
  metadata: { step: 7, metrics: { loss: 0.5 } },
  tensors: [
    { name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, -2]) },
    { name: "n", dtype: "int64", shape: [], data: new BigInt64Array([3n]), group: "optimizer" },
  ],
});

Deno.test("binary encoder produces docs/FORMAT.md's hex test vector, and it decodes back", async () => {
  const hex = block("binary-vector").split("\n").filter(Boolean).map((l) => l.slice(10)).join(" ");
  const expected = new Uint8Array(hex.split(/\s+/).filter(Boolean).map((h) => parseInt(h, 16)));
  assert.equal(expected.length, 640);
  assert.deepEqual(await collect(encodeCheckpoint(vector())), expected);
  assertSameCheckpoint(await loadCheckpoint(expected), vector());
});

Deno.test("JSON encoder produces docs/FORMAT.md's JSON Lines test vector, and it decodes back", async () => {
  const expected = block("json-vector");
  assert.equal(await new Response(encodeCheckpoint(vector(), { codec: "json" })).text(), expected);
  assertSameCheckpoint(await loadCheckpoint(new TextEncoder().encode(expected)), vector());
});

Deno.test("bytegroup encoder produces docs/FORMAT.md's byte-grouped test vector, and it decodes back", async () => {
  const hex = block("bytegroup-vector").split("\n").filter(Boolean).map((l) => l.slice(10)).join(" ");
  const expected = new Uint8Array(hex.split(/\s+/).filter(Boolean).map((h) => parseInt(h, 16)));
  assert.equal(expected.length, 641);
  const ckpt: CheckpointInput = {
    metadata: { step: 7 },
    tensors: [{
      name: "w",
      dtype: "bfloat16",
      shape: [128],
      data: Uint16Array.from({ length: 128 }, (_, i) => 0x3c00 + i),
    }],
  };
  assert.deepEqual(await collect(encodeCheckpoint(ckpt, { compression: "bytegroup" })), expected);
  assertSameCheckpoint(await loadCheckpoint(expected), ckpt);
  // The deflated plane is plain raw deflate: the platform's DecompressionStream reads it too.
  const plane = expected.subarray(0x168, 0x168 + 29);
  const inflated = await collect(
    ReadableStream.from([plane]).pipeThrough(
      new DecompressionStream("deflate-raw") as ReadableWritablePair<Uint8Array, Uint8Array>,
    ),
  );
  assert.deepEqual(inflated, new Uint8Array(128).fill(0x3c));
});
