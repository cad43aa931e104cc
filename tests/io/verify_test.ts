// verifyCheckpoint: every digest checked as a load checks them, no tensor kept. Bodies of ckpt
// binary checkpoints are hashed through two reused 1 MiB buffers, so the cases below use tensors
// of several pieces, with the fault placed past the first one.
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type CheckpointInput,
  ChecksumMismatchError,
  encodeCheckpoint,
  safetensorsCodec,
  saveCheckpoint,
  type TensorInput,
  verifyCheckpoint,
} from "../../mod.ts";
import { HASH_PIECE } from "../../src/format/_chunk_reader.ts";
import { buildRaw, meta, tensor } from "../format/codecs/_binary_builder.ts";
import { collect, edgeCheckpoint, withDir } from "../_util.ts";

/** Float weights of several hash pieces (`HASH_PIECE`), then the edge cases of every dtype. */
function checkpoint(): CheckpointInput {
  const big = new Float32Array((2 * HASH_PIECE + 4096) / 4).map((_, i) => Math.sin(i) * 0.02);
  const edge = edgeCheckpoint();
  return {
    metadata: edge.metadata,
    tensors: [{ name: "big", dtype: "float32", shape: [big.length], data: big }, ...(edge.tensors as TensorInput[])],
  };
}

/** What verifyCheckpoint should report for `ckpt`'s tensors. */
function summary(ckpt: CheckpointInput) {
  return (ckpt.tensors as TensorInput[]).map((t) => ({
    name: t.name,
    dtype: t.dtype,
    shape: t.shape,
    group: t.group ?? "params",
    byteLength: t.data.byteLength,
  }));
}

Deno.test("verifyCheckpoint reports metadata, tensors and stream digest for every codec, from files, bytes and streams", async () => {
  await withDir(async (dir) => {
    const ckpt = checkpoint();
    const cases: [string, Parameters<typeof saveCheckpoint>[2]][] = [
      ["binary", {}],
      ["binary, byte-grouped", { compression: "bytegroup" }],
      ["binary, gzip", { compression: "gzip" }],
      ["JSON Lines", { codec: "json" }],
    ];
    for (const [label, options] of cases) {
      const path = join(dir, `${label}.ckpt`);
      const saved = await saveCheckpoint(path, ckpt, options);
      const bytes = await Deno.readFile(path);
      for (
        const [how, source] of [["file", path], ["bytes", bytes], ["stream", ReadableStream.from([bytes])]] as const
      ) {
        const got = await verifyCheckpoint(source);
        assert.deepEqual(got.metadata, (await verifyCheckpoint(bytes)).metadata, `${label} ${how}`);
        assert.equal(got.metadata.step, 1234);
        assert.deepEqual(got.tensors, summary(ckpt), `${label} ${how}`);
        assert.equal(got.digest, saved.digest, `${label} ${how}`);
      }
    }
    // safetensors stores no stream digest: the read still checks the header and every length.
    const st = { metadata: { step: 3 }, tensors: [(ckpt.tensors as TensorInput[])[0]!] } as CheckpointInput;
    const bytes = await collect(encodeCheckpoint(st, { codec: safetensorsCodec }));
    const got = await verifyCheckpoint(bytes);
    assert.deepEqual(got.tensors, summary(st));
    assert.equal(got.digest, undefined);
  });
});

Deno.test("verifyCheckpoint names a tensor corrupted past its first piece, in a file and in a stream", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.ckpt");
    await saveCheckpoint(path, checkpoint());
    const bytes = await Deno.readFile(path);
    // A byte of "big" well past the first piece (its body starts in the first kilobytes).
    bytes[HASH_PIECE + 100_000]! ^= 1;
    await Deno.writeFile(path, bytes);
    for (const source of [path, bytes, ReadableStream.from([bytes.subarray(0, 5000), bytes.subarray(5000)])]) {
      await assert.rejects(() => verifyCheckpoint(source), (e: Error) => {
        assert.ok(e instanceof ChecksumMismatchError, `${e.constructor.name}: ${e.message}`);
        assert.match(e.message, /tensor "big"/);
        return true;
      });
    }
  });
});

Deno.test("verifyCheckpoint checks bool values piece by piece and names the element", async () => {
  const n = 2 * HASH_PIECE + 10;
  const body = new Uint8Array(n).map((_, i) => i & 1);
  const bad = HASH_PIECE + 12_345;
  body[bad] = 7;
  const bytes = buildRaw({
    records: [meta(), tensor({ name: "mask", dtype: "bool", shape: [n], group: "params" }, body)],
  });
  await withDir(async (dir) => {
    const path = join(dir, "bool.ckpt");
    await Deno.writeFile(path, bytes);
    for (const source of [path, bytes]) {
      await assert.rejects(
        () => verifyCheckpoint(source),
        new RegExp(`bool tensor "mask" element ${bad} is 7, not 0 or 1 at offset \\d+`),
      );
    }
  });
});

Deno.test("verifyCheckpoint checks sha256 as loadCheckpoint does: stream digest or file SHA-256", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.ckpt");
    const saved = await saveCheckpoint(path, checkpoint(), { sha256sum: true });
    const bytes = await Deno.readFile(path);
    for (const source of [path, bytes]) {
      assert.equal((await verifyCheckpoint(source, { sha256: saved.digest })).digest, saved.digest);
      assert.equal((await verifyCheckpoint(source, { sha256: saved.sha256!.toUpperCase() })).digest, saved.digest);
      await assert.rejects(() => verifyCheckpoint(source, { sha256: "0".repeat(64) }), ChecksumMismatchError);
    }
    await assert.rejects(() => verifyCheckpoint(path, { sha256: undefined }), /Invalid sha256 option: undefined/);
    await assert.rejects(() => verifyCheckpoint(path, { sha256: "abc" }), /expected 64 hex digits/);
    await assert.rejects(
      // @ts-expect-error: not an option of verifyCheckpoint
      () => verifyCheckpoint(path, { reuseBuffers: true }),
      /Cannot verify checkpoint: unknown option "reuseBuffers"/,
    );
  });
});

Deno.test("verifyCheckpoint enforces the caps it is given", async () => {
  const bytes = await collect(encodeCheckpoint(checkpoint()));
  await assert.rejects(() => verifyCheckpoint(bytes, { maxTensorBytes: HASH_PIECE }), /exceeds maxTensorBytes 1048576/);
  await assert.rejects(() => verifyCheckpoint(bytes, { maxTensors: 2 }), /more than maxTensors 2/);
});
