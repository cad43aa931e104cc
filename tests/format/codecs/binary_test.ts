import assert from "node:assert/strict";
import {
  ChecksumMismatchError,
  decodeCheckpoint,
  encodeCheckpoint,
  loadCheckpoint,
  verifyCheckpoint,
} from "../../../mod.ts";
import { binaryCodec } from "../../../src/format/codecs/binary.ts";
import type { Checkpoint, CheckpointInput } from "../../../src/format/types.ts";
import { assertSameCheckpoint, collect, edgeCheckpoint, feeds, randomCheckpoint } from "../../_util.ts";
import { buildRaw, meta, tensor } from "./_binary_builder.ts";

const f32 = (...v: number[]) => new Uint8Array(new Float32Array(v).buffer);
const W = { name: "w", dtype: "float32", shape: [2], group: "params" };

async function decodeBytes(bytes: Uint8Array | ReadableStream<Uint8Array>): Promise<Checkpoint> {
  return await loadCheckpoint(bytes instanceof Uint8Array ? ReadableStream.from([bytes]) : bytes);
}

/** Each read fails alike: a load, and a verify (bodies hashed, not kept) of the bytes and of a file holding them. */
async function rejects(bytes: Uint8Array, cls: ErrorConstructor | typeof ChecksumMismatchError, pattern: RegExp) {
  const path = await Deno.makeTempFile();
  await Deno.writeFile(path, bytes);
  try {
    const reads: [string, () => Promise<unknown>][] = [
      ["load", () => decodeBytes(bytes)],
      ["verify", () => verifyCheckpoint(bytes)],
      ["verify a file", () => verifyCheckpoint(path)],
    ];
    for (const [how, read] of reads) {
      await assert.rejects(read, (e: Error) => {
        assert.ok(e instanceof cls, `${how}: expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
        assert.match(e.message, pattern, how);
        return true;
      });
    }
  } finally {
    await Deno.remove(path);
  }
}

Deno.test("binary codec round-trips every dtype bit for bit, NaN payloads included, fed three ways", async () => {
  const ckpt = edgeCheckpoint();
  const bytes = await collect(encodeCheckpoint(ckpt));
  for (const feed of feeds(bytes)) {
    const back = await decodeBytes(feed.stream());
    assertSameCheckpoint(back, ckpt);
  }
});

Deno.test("binary encoder hashes each slice of a tensor's body once it is handed on, when the next chunk is asked for", async () => {
  // A save writes a slice while it asks for the next chunk: the slice's hash then runs during its
  // write. Seen here by changing each slice between the two: the record digests are those of the
  // changed bytes.
  const n = (6 * 2 ** 20) / 4; // two slices of the body: 4 MiB and 2 MiB
  const fill = (seed: number) => new Float32Array(n).map((_, i) => ((i * 7919 + seed) % 1000) * 0.5);
  const data = fill(1);
  const later = fill(2);
  const reader = encodeCheckpoint({
    metadata: { step: 1 },
    tensors: [{ name: "w", dtype: "float32", shape: [n], data }],
  }).getReader();
  const out: Uint8Array[] = [];
  let position = 0;
  let start = -1;
  let slices = 0;
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    out.push(r.value.slice());
    position += r.value.byteLength;
    if (r.value.buffer !== data.buffer) continue;
    if (slices++ === 0) start = position - r.value.byteLength;
    const at = r.value.byteOffset / 4;
    data.set(later.subarray(at, at + r.value.byteLength / 4), at);
  }
  assert.equal(slices, 2);
  const expected = await collect(encodeCheckpoint({
    metadata: { step: 1 },
    tensors: [{ name: "w", dtype: "float32", shape: [n], data: later }],
  }));
  const got = new Uint8Array(await new Blob(out as Uint8Array<ArrayBuffer>[]).arrayBuffer());
  // The body as handed on held the first values; everything else (digests included) is the later save's.
  assert.deepEqual(got.subarray(start, start + n * 4), new Uint8Array(fill(1).buffer));
  got.set(new Uint8Array(later.buffer), start);
  assert.deepEqual(got, expected);
});

Deno.test("binary codec is deterministic: the same checkpoint gives the same bytes", async () => {
  const a = await collect(encodeCheckpoint(edgeCheckpoint()));
  const b = await collect(encodeCheckpoint(edgeCheckpoint()));
  assert.deepEqual(a, b);
});

Deno.test("binary codec aligns every tensor's data to 64 bytes and the whole-buffer decode needs no copy", async () => {
  const bytes = await collect(encodeCheckpoint(edgeCheckpoint()));
  const back = await decodeBytes(bytes);
  for (const t of back.tensors) {
    if (t.data.byteLength === 0) continue;
    assert.equal(t.data.buffer, bytes.buffer, `${t.name} is a view into the input`);
    assert.equal(t.data.byteOffset % 64, 0, `${t.name} is aligned`);
  }
});

Deno.test("binary codec round-trips random checkpoints split at random points", async () => {
  for (let seed = 1; seed <= 40; seed++) {
    const ckpt = randomCheckpoint(seed);
    const bytes = await collect(encodeCheckpoint(ckpt));
    const [, , random] = feeds(bytes, seed);
    assertSameCheckpoint(await decodeBytes(random!.stream()), ckpt);
  }
});

Deno.test("binary decoder hands out tensors one at a time, metadata first", async () => {
  const ckpt = edgeCheckpoint();
  const types: string[] = [];
  for await (const r of decodeCheckpoint(encodeCheckpoint(ckpt))) types.push(r.type);
  assert.deepEqual(types, ["metadata", ...(ckpt.tensors as unknown[]).map(() => "tensor")]);
});

Deno.test("binary builder reproduces the encoder byte for byte (so hostile files differ only where intended)", async () => {
  const ckpt: CheckpointInput = {
    metadata: { step: 1 },
    tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
  };
  const real = await collect(encodeCheckpoint(ckpt));
  assert.deepEqual(buildRaw({ records: [meta(), tensor(W, f32(1, 2))] }), real);
});

Deno.test("binary decoder rejects every truncation of a valid stream, never a shorter valid checkpoint", async () => {
  const bytes = buildRaw({ records: [meta(), tensor(W, f32(1, 2))] });
  for (let n = 0; n < bytes.length; n++) {
    await assert.rejects(() => decodeBytes(bytes.slice(0, n)), SyntaxError, `prefix of ${n} bytes`);
    await assert.rejects(() => verifyCheckpoint(bytes.slice(0, n)), SyntaxError, `verify a prefix of ${n} bytes`);
  }
});

Deno.test("binary decoder rejects every single flipped byte", async () => {
  const bytes = buildRaw({ records: [meta(), tensor(W, f32(1, 2))] });
  for (let i = 0; i < bytes.length; i++) {
    const bad = bytes.slice();
    bad[i]! ^= 0x40;
    await assert.rejects(() => decodeBytes(bad), Error, `flip at ${i}`);
    await assert.rejects(() => verifyCheckpoint(bad), Error, `verify, flip at ${i}`);
  }
});

Deno.test("binary decoder errors name the problem and the offset", async (t) => {
  const ok = [meta(), tensor(W, f32(1, 2))];
  const cases: [string, Uint8Array, ErrorConstructor | typeof ChecksumMismatchError, RegExp][] = [
    [
      "wrong magic",
      buildRaw({ magic: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], records: ok }),
      SyntaxError,
      /unrecognised format at offset 0 \(first bytes 89 50 4e 47/,
    ],
    [
      "unknown version",
      buildRaw({ version: 2, records: ok }),
      SyntaxError,
      /unsupported format version 2 .* at offset 8/,
    ],
    ["unknown flags", buildRaw({ flags: 3, records: ok }), SyntaxError, /unknown flags 0x3 at offset 12/],
    [
      "tensor digest",
      buildRaw({ records: [meta(), tensor(W, f32(1, 2), { badDigest: true })] }),
      ChecksumMismatchError,
      /tensor "w" at offset 74: expected sha256 [0-9a-f]{64}, got [0-9a-f]{64}$/,
    ],
    [
      "metadata digest",
      buildRaw({ records: [{ ...meta(), badDigest: true }] }),
      ChecksumMismatchError,
      /metadata at offset 16/,
    ],
    ["stream digest", buildRaw({ records: ok, badStreamDigest: true }), ChecksumMismatchError, /stream at offset \d+/],
    [
      "trailing garbage",
      buildRaw({ records: ok, trailing: new Uint8Array([0]) }),
      SyntaxError,
      /trailing bytes after the footer at offset 426/,
    ],
    [
      "end magic",
      buildRaw({ records: ok, endMagic: [0, 0, 0, 0, 0, 0, 0, 0] }),
      SyntaxError,
      /wrong end magic at offset 418/,
    ],
    [
      "footer index offset",
      buildRaw({ records: ok, indexOffset: 99n }),
      SyntaxError,
      /footer points to index at 99, found it at 232 at offset 378/,
    ],
    [
      "unknown record kind",
      buildRaw({ records: [meta(), { kind: 9, head: "{}" }] }),
      SyntaxError,
      /unknown record kind 9 at offset 74/,
    ],
    [
      "tensor before metadata",
      buildRaw({ records: [tensor(W, f32(1, 2))] }),
      SyntaxError,
      /record kind 2 before the metadata record at offset 16/,
    ],
    ["second metadata", buildRaw({ records: [meta(), meta()] }), SyntaxError, /second metadata record at offset 74/],
    [
      "metadata not JSON",
      buildRaw({ records: [meta("{step:1}")] }),
      SyntaxError,
      /metadata is not valid JSON .* at offset 32/,
    ],
    [
      "metadata field type",
      buildRaw({ records: [meta('{"step":"1"}')] }),
      SyntaxError,
      /invalid metadata at offset 32: step is "1", not a non-negative integer/,
    ],
    ["metadata unknown field", buildRaw({ records: [meta('{"step":1,"x":2}')] }), SyntaxError, /unknown field "x"/],
    ["head not UTF-8", buildRaw({ records: [meta(), { kind: 2, head: "\uFFFD" }] }), SyntaxError, /not valid JSON/],
    [
      "duplicate names",
      buildRaw({ records: [meta(), tensor(W, f32(1, 2)), tensor(W, f32(1, 2))] }),
      SyntaxError,
      /duplicate tensor name "w" at offset \d+/,
    ],
    [
      "__proto__ name",
      buildRaw({ records: [meta(), tensor({ ...W, name: "__proto__" }, f32(1, 2))] }),
      SyntaxError,
      /tensor name "__proto__" is reserved/,
    ],
    [
      "empty name",
      buildRaw({ records: [meta(), tensor({ ...W, name: "" }, f32(1, 2))] }),
      SyntaxError,
      /tensor name must not be empty/,
    ],
    [
      "unknown dtype",
      buildRaw({ records: [meta(), tensor({ ...W, dtype: "complex64" }, f32(1, 2))] }),
      SyntaxError,
      /unknown dtype "complex64"/,
    ],
    [
      "negative dimension",
      buildRaw({ records: [meta(), tensor({ ...W, shape: [-2] }, f32(1, 2))] }),
      SyntaxError,
      /dimension 0 is -2, not a non-negative integer/,
    ],
    [
      "fractional dimension",
      buildRaw({ records: [meta(), tensor({ ...W, shape: [1.5] }, f32(1, 2))] }),
      SyntaxError,
      /dimension 0 is 1.5/,
    ],
    [
      "string dimension",
      buildRaw({ records: [meta(), tensor({ ...W, shape: ["2"] }, f32(1, 2))] }),
      SyntaxError,
      /dimension 0 is "2"/,
    ],
    [
      "overflowing shape",
      buildRaw({ records: [meta(), tensor({ ...W, shape: [2 ** 31, 2 ** 31, 2 ** 31] }, f32(1, 2))] }),
      SyntaxError,
      /more than 2\^53 elements/,
    ],
    [
      "shape over maxTensorBytes",
      buildRaw({ records: [meta(), tensor({ ...W, shape: [2 ** 40] }, f32(1, 2))] }),
      RangeError,
      /needs 4398046511104 bytes, over maxTensorBytes/,
    ],
    [
      "rank over maxRank",
      buildRaw({ records: [meta(), tensor({ ...W, shape: new Array(65).fill(1) }, f32(1))] }),
      RangeError,
      /rank 65, over maxRank 64/,
    ],
    [
      "body length disagrees with shape",
      buildRaw({ records: [meta(), tensor({ ...W, shape: [3] }, f32(1, 2))] }),
      SyntaxError,
      /needs 12 bytes but its record declares 8 at offset 82/,
    ],
    [
      "absurd body length",
      buildRaw({ records: [meta(), tensor(W, f32(1, 2), { bodyBytes: 2n ** 63n })] }),
      RangeError,
      /tensor body of 9223372036854775808 bytes exceeds maxTensorBytes 17179869184 at offset 82/,
    ],
    [
      "body on a metadata record",
      buildRaw({ records: [{ kind: 1, head: '{"step":1}', bodyBytes: 5n }] }),
      SyntaxError,
      /record kind 1 must have no body, declares 5 at offset 24/,
    ],
    [
      "non-zero padding",
      buildRaw({
        records: [
          meta(),
          tensor(W, f32(1, 2), { pad: new Uint8Array(Array(81).fill(0).map((_, i) => (i === 3 ? 1 : 0))) }),
        ],
      }),
      SyntaxError,
      /non-zero padding before tensor "w"/,
    ],
    [
      "bool out of range",
      buildRaw({ records: [meta(), tensor({ ...W, dtype: "bool" }, new Uint8Array([1, 2]))] }),
      SyntaxError,
      /bool tensor "w" element 1 is 2, not 0 or 1/,
    ],
    [
      "unknown descriptor field",
      buildRaw({ records: [meta(), tensor({ ...W, extra: 1 }, f32(1, 2))] }),
      SyntaxError,
      /unknown field "extra"/,
    ],
    [
      "index disagrees",
      buildRaw({ records: [meta(), tensor(W, f32(1, 2))], index: '{"tensors":[]}' }),
      SyntaxError,
      /index does not match the tensors in the stream at offset 232/,
    ],
    [
      "index not an object",
      buildRaw({ records: [meta()], index: "[]" }),
      SyntaxError,
      /invalid index at offset \d+: not a JSON object/,
    ],
  ];
  for (const [name, bytes, cls, pattern] of cases) {
    await t.step(name, () => rejects(bytes, cls, pattern));
  }
});

Deno.test("binary decoder enforces caps given as options", async () => {
  const bytes = buildRaw({ records: [meta(), tensor(W, f32(1, 2))] });
  await assert.rejects(() => loadCheckpoint(bytes, { maxTensorBytes: 4 }), RangeError);
  await assert.rejects(() => loadCheckpoint(bytes, { maxHeaderBytes: 8 }), /exceeds maxHeaderBytes 8 at offset 20/);
  await assert.rejects(() => loadCheckpoint(bytes, { maxTensors: 0 }), RangeError);
  await assert.rejects(() => loadCheckpoint(bytes, { maxRank: 0 }), /Invalid limit maxRank: 0/);
  await assert.rejects(() => loadCheckpoint(bytes, { maxRank: -1 }), /Invalid limit maxRank: -1/);
});

Deno.test("binary decoder never allocates from a declared length before the bytes arrive", async () => {
  // Claims a 15 GiB tensor (under the default cap) in a 300-byte stream: must fail fast on truncation.
  const raw = buildRaw({
    records: [meta(), tensor({ ...W, shape: [15 * 2 ** 28] }, f32(1, 2), { bodyBytes: 15n * 2n ** 30n })],
  });
  await assert.rejects(() => decodeBytes(raw), /stream ends at offset \d+ with \d+ bytes of tensor "w" missing/);
});

Deno.test("binary encoder rejects invalid checkpoints with the tensor named", async () => {
  const enc = (tensors: CheckpointInput["tensors"], metadata: CheckpointInput["metadata"] = { step: 1 }) =>
    collect(encodeCheckpoint({ metadata, tensors }));
  await assert.rejects(
    () => enc([{ name: "a", dtype: "float32", shape: [3], data: new Float32Array(2) }]),
    /tensor "a": shape \[3\] has 3 elements but data has 2/,
  );
  await assert.rejects(
    () => enc([{ name: "a", dtype: "int64", shape: [1], data: new Float64Array(1) }]),
    /dtype int64 needs a BigInt64Array, got Float64Array/,
  );
  await assert.rejects(
    () => enc([{ name: "a", dtype: "int32", shape: [1], data: new Float32Array(1) }]),
    /dtype int32 needs an Int32Array, got Float32Array/,
  );
  await assert.rejects(
    () => enc([{ name: "a", dtype: "uint8", shape: [1], data: new Int8Array(1) }]),
    /dtype uint8 needs a Uint8Array, got Int8Array/,
  );
  await assert.rejects(
    () => enc([{ name: "a", dtype: "bool", shape: [1], data: new Uint8Array([3]) }]),
    /bool element 0 is 3/,
  );
  const t = { name: "a", dtype: "int8" as const, shape: [1], data: new Int8Array(1) };
  await assert.rejects(() => enc([t, t]), /duplicate tensor name "a"/);
  await assert.rejects(() => enc([{ ...t, name: "__proto__" }]), /reserved/);
  await assert.rejects(() => enc([], { step: -1 }), /step is -1/);
  await assert.rejects(() => enc([], { step: 1, custom: { x: NaN } }), /custom.x is NaN, not a finite number/);
});

Deno.test("binaryCodec.detect recognises only its magic", () => {
  assert.ok(binaryCodec.detect(new Uint8Array([0x89, 0x43, 0x4b, 0x50, 0x54, 0x0d, 0x0a, 0x1a])));
  assert.ok(!binaryCodec.detect(new Uint8Array([0x89, 0x43, 0x4b])));
  assert.ok(!binaryCodec.detect(new TextEncoder().encode('{"ckpt":"jsonl"')));
});
