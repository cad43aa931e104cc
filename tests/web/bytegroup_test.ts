// Byte-grouped checkpoints in every engine: planes Deno deflated load in the page, and the page
// deflates its planes (the same JavaScript encoder, Huffman only) into the very bytes Deno writes,
// which load in Deno, every tensor bit for bit.
import assert from "node:assert/strict";
import { join } from "node:path";
import { encodeCheckpoint, loadCheckpoint, readCheckpointIndex } from "../../mod.ts";
import type { CheckpointInput } from "../../src/format/types.ts";
import { assertSameBytes, assertSameCheckpoint, prng } from "../_util.ts";
import { browserTest } from "./_browser.ts";

type Lib = typeof import("./page/core_entry.ts");
declare const m: Lib;

/** Weight-like tensors of every float dtype, large enough to be byte-grouped, with a NaN payload and -0. */
function weights(): CheckpointInput {
  const rand = prng(3);
  const f32 = Float32Array.from({ length: 4096 }, () => (rand() - 0.5) * 0.05);
  new Uint32Array(f32.buffer)[7] = 0x7fc00001;
  f32[9] = -0;
  const bits = new Uint32Array(f32.buffer);
  return {
    metadata: { step: 5 },
    tensors: [
      { name: "f32", dtype: "float32", shape: [64, 64], data: f32 },
      { name: "f64", dtype: "float64", shape: [4096], data: Float64Array.from(f32) },
      { name: "bf16", dtype: "bfloat16", shape: [4096], data: Uint16Array.from(bits, (b) => b >>> 16) },
      {
        name: "f16",
        dtype: "float16",
        shape: [4096],
        data: Uint16Array.from(bits, (b) => 0x2000 | ((b >>> 13) & 0x3ff)),
      },
    ],
  };
}

browserTest("bytegroup", { entries: { core: "tests/web/page/core_entry.ts" } }, async (t, ctx) => {
  const { page, filesDir, uploads } = ctx;
  const ckpt = weights();
  const bytes = new Uint8Array(await new Response(encodeCheckpoint(ckpt, { compression: "bytegroup" })).arrayBuffer());
  await Deno.writeFile(join(filesDir, "w.ckpt"), bytes);
  const index = await readCheckpointIndex(join(filesDir, "w.ckpt"));
  assert.deepEqual(index.tensors.map((e) => e.encoding), ["bytegroup", "bytegroup", "bytegroup", "bytegroup"]);

  await t.step(
    "Deno's byte-grouped file loads in the page, and the page's own loads in Deno, bit for bit",
    async () => {
      const r = await page.evaluate(async () => {
        const blob = await (await fetch("/files/w.ckpt")).blob();
        const back = await m.loadCheckpoint(blob);
        const bits = back.tensors.map((t) =>
          Array.from(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength))
        );
        const chunks: Uint8Array[] = [];
        await m.saveCheckpoint(new WritableStream({ write: (c) => void chunks.push(c.slice()) }), back, {
          compression: "bytegroup",
        });
        await fetch("/upload/page.ckpt", { method: "PUT", body: new Blob(chunks as BlobPart[]) });
        return { bits, compression: (await m.sniffCheckpoint(blob)).compression };
      });
      assert.equal(r.compression, "bytegroup");
      const expected = (ckpt.tensors as { data: ArrayBufferView }[]).map((t) =>
        Array.from(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength))
      );
      assert.deepEqual(r.bits, expected, "the page decoded every tensor bit for bit");
      const fromPage = uploads.get("page.ckpt")!;
      assertSameBytes(fromPage, bytes, "the page wrote exactly Deno's bytes");
      assertSameCheckpoint(await loadCheckpoint(fromPage), ckpt);
      const path = join(filesDir, "page.ckpt");
      await Deno.writeFile(path, fromPage);
      assert.ok((await readCheckpointIndex(path)).tensors.every((e) => e.encoding === "bytegroup"));
    },
  );
});
