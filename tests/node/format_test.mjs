// The format core under Node from the installed package: every codec and compression round-trips
// bit for bit through streams, and corrupt bytes are refused with the classes Deno uses.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ChecksumMismatchError,
  decodeCheckpoint,
  DEFAULT_READ_CODECS,
  encodeCheckpoint,
  loadCheckpoint,
  safetensorsCodec,
  saveCheckpoint,
} from "@ckpt/ckpt";

const INPUT = {
  metadata: { step: 42, metrics: { loss: 0.5 } },
  tensors: [
    {
      name: "dense/kernel",
      dtype: "float32",
      shape: [2, 3],
      data: new Float32Array([1, -0, NaN, Infinity, 1e-45, 0.1]),
    },
    { name: "dense/bias", dtype: "float16", shape: [2], data: new Uint16Array([0x3c00, 0x7e01]) },
    { name: "step", dtype: "int64", shape: [], data: new BigInt64Array([42n]), group: "optimizer" },
    { name: "mask", dtype: "bool", shape: [3], data: new Uint8Array([1, 0, 1]) },
  ],
};

/** The bytes of a typed array (to compare bit for bit, NaN payloads and -0 included). */
function bytesOf(a) {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

async function collect(stream) {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

const COMBINATIONS = [["binary", "none"], ["binary", "gzip"], ["binary", "bytegroup"], ["json", "none"], [
  "json",
  "gzip",
]];

for (const [codec, compression] of COMBINATIONS) {
  test(`${codec} with ${compression} round-trips bit for bit under Node`, async () => {
    const chunks = [];
    const sink = new WritableStream({ write: (c) => void chunks.push(c.slice()) });
    const saved = await saveCheckpoint(sink, INPUT, { codec, compression, sha256sum: true });
    const bytes = new Uint8Array(await new Blob(chunks).arrayBuffer());
    const back = await loadCheckpoint(new Blob([bytes]), { sha256: saved.sha256 });
    assert.equal(back.metadata.step, 42);
    assert.deepEqual(back.tensors.map((t) => t.name), INPUT.tensors.map((t) => t.name));
    for (const [i, t] of back.tensors.entries()) {
      assert.deepEqual(bytesOf(t.data), bytesOf(INPUT.tensors[i].data), t.name);
    }
    // One byte per chunk gives the same checkpoint.
    const trickle = new ReadableStream({
      start(c) {
        for (const b of bytes) c.enqueue(new Uint8Array([b]));
        c.close();
      },
    });
    const again = await loadCheckpoint(trickle);
    assert.deepEqual(again.tensors.map((t) => bytesOf(t.data)), back.tensors.map((t) => bytesOf(t.data)));
  });
}

test("byte grouping with the JSON codec is refused with Deno's TypeError", async () => {
  const sink = new WritableStream();
  await assert.rejects(saveCheckpoint(sink, INPUT, { codec: "json", compression: "bytegroup" }), {
    name: "TypeError",
    message: 'Compression "bytegroup" needs the binary codec, not "json"',
  });
});

test("a flipped byte is a ChecksumMismatchError under Node, as in Deno", async () => {
  const data = new Float32Array(4096).map((_, i) => i);
  const input = { metadata: { step: 1 }, tensors: [{ name: "w", dtype: "float32", shape: [4096], data }] };
  const bytes = await collect(encodeCheckpoint(input));
  const bad = bytes.slice();
  bad[bytes.length >> 1] ^= 0xff; // inside the tensor's 16 KiB
  await assert.rejects(loadCheckpoint(new Blob([bad])), (e) => {
    assert.ok(e instanceof ChecksumMismatchError, String(e));
    assert.match(e.message, /"w"/);
    return true;
  });
});

test("a truncated checkpoint is refused, never a shorter valid one", async () => {
  const bytes = await collect(encodeCheckpoint(INPUT));
  await assert.rejects(loadCheckpoint(new Blob([bytes.subarray(0, bytes.length - 3)])), SyntaxError);
});

test("decodeCheckpoint streams records from a stream of bytes", async () => {
  const names = [];
  for await (const r of decodeCheckpoint(encodeCheckpoint(INPUT))) if (r.type === "tensor") names.push(r.tensor.name);
  assert.deepEqual(names, INPUT.tensors.map((t) => t.name));
});

test("the package recognises safetensors bytes with no codecs option (the interop layer registers it)", async () => {
  assert.deepEqual(DEFAULT_READ_CODECS.map((c) => c.name), ["binary", "json", "safetensors"]);
  const bytes = await collect(encodeCheckpoint(INPUT, { codec: safetensorsCodec }));
  const loaded = await loadCheckpoint(new Blob([bytes]));
  for (const t of INPUT.tensors) {
    const got = loaded.tensors.find((l) => l.name === t.name);
    assert.deepEqual(bytesOf(got.data), bytesOf(t.data), t.name);
  }
});
