// Deno.bench groups for the core, each with a baseline that does the unavoidable work on the
// same bytes (a copy plus one SHA-256 pass), so the ratio shows what ckpt adds.
import { createHash } from "node:crypto";
import { decodeCheckpoint, encodeCheckpoint, type TensorInput } from "../mod.ts";

const MiB = 2 ** 20;
const tensors: TensorInput[] = Array.from({ length: 8 }, (_, i) => {
  const data = new Float32Array(4 * MiB / 4);
  for (let j = 0; j < data.length; j++) data[j] = Math.sin(i * 7 + j) * 0.01;
  return { name: `layer${i}/kernel`, dtype: "float32", shape: [data.length], data };
});
const checkpoint = { metadata: { step: 1 }, tensors };
const bytes = new Uint8Array(await new Response(encodeCheckpoint(checkpoint)).arrayBuffer());
const json = new Uint8Array(
  await new Response(encodeCheckpoint({ metadata: { step: 1 }, tensors: tensors.slice(0, 1) }, { codec: "json" }))
    .arrayBuffer(),
);
const sink = new Uint8Array(8 * MiB);

async function drain(stream: ReadableStream<unknown>): Promise<void> {
  for await (const _ of stream) { /* consume */ }
}

Deno.bench("copy + sha256 of 32 MiB (baseline)", { group: "encode 32 MiB", baseline: true }, () => {
  const h = createHash("sha256");
  for (const t of tensors) {
    const b = new Uint8Array(t.data.buffer);
    sink.set(b.subarray(0, sink.length));
    h.update(b);
  }
  h.digest();
});
Deno.bench("binary encode 32 MiB", { group: "encode 32 MiB" }, async () => {
  await drain(encodeCheckpoint(checkpoint));
});

Deno.bench("sha256 of the encoded bytes (baseline)", { group: "decode 32 MiB", baseline: true }, () => {
  createHash("sha256").update(bytes).digest();
});
Deno.bench("binary decode + verify, whole buffer", { group: "decode 32 MiB" }, async () => {
  await drain(decodeCheckpoint(bytes));
});
Deno.bench("binary decode + verify, 64 KiB chunks", { group: "decode 32 MiB" }, async () => {
  const chunks = [];
  for (let o = 0; o < bytes.length; o += 65536) chunks.push(bytes.subarray(o, o + 65536));
  await drain(decodeCheckpoint(ReadableStream.from(chunks), { reuseBuffers: true }));
});

Deno.bench("JSON.stringify of the same floats (baseline)", { group: "json 4 MiB of float32", baseline: true }, () => {
  JSON.stringify(Array.from(tensors[0]!.data as Float32Array));
});
Deno.bench("json encode", { group: "json 4 MiB of float32" }, async () => {
  await drain(encodeCheckpoint({ metadata: { step: 1 }, tensors: tensors.slice(0, 1) }, { codec: "json" }));
});
Deno.bench("json decode + verify", { group: "json 4 MiB of float32" }, async () => {
  await drain(decodeCheckpoint(json));
});
