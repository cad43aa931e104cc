// Random access to binary files (the trailing index) against hostile footers, from literal bytes.
import assert from "node:assert/strict";
import { encodeCheckpoint, loadCheckpoint, readCheckpointIndex } from "../../../mod.ts";
import { collect } from "../../_util.ts";

/** docs/FORMAT.md's 640-byte binary test vector. */
async function vector(): Promise<Uint8Array> {
  const bytes = await collect(encodeCheckpoint({
    metadata: { step: 7, metrics: { loss: 0.5 } },
    tensors: [
      { name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, -2]) },
      { name: "n", dtype: "int64", shape: [], data: new BigInt64Array([3n]), group: "optimizer" },
    ],
  }));
  assert.equal(bytes.byteLength, 640);
  return bytes;
}

Deno.test("readCheckpointIndex rejects a footer whose index offset points into the bytes just before it", async () => {
  const path = await Deno.makeTempFile();
  try {
    for (const offset of [584, 591, 576, 592 - 16 - 32]) {
      const bytes = await vector();
      new DataView(bytes.buffer).setBigUint64(0x250, BigInt(offset), true);
      await Deno.writeFile(path, bytes);
      for (const read of [() => readCheckpointIndex(path), () => loadCheckpoint(path, { only: ["w"] })]) {
        await assert.rejects(read, (e) => {
          assert.ok(e instanceof SyntaxError, `${offset}: ${e}`);
          assert.match((e as Error).message, /^Cannot decode checkpoint: .*at offset \d+$/);
          return true;
        });
      }
      await assert.rejects(() => loadCheckpoint(path), SyntaxError);
    }
  } finally {
    await Deno.remove(path);
  }
});
