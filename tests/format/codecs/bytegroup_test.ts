import assert from "node:assert/strict";
import { constants as zlibConstants, deflateRawSync, inflateRawSync } from "node:zlib";
import {
  ChecksumMismatchError,
  decodeCheckpoint,
  encodeCheckpoint,
  loadCheckpoint,
  readCheckpointIndex,
  saveCheckpoint,
  sniffCheckpoint,
} from "../../../mod.ts";
import { BINARY_ALIGNMENT, decodeHeader, FLAG_BYTEGROUP } from "../../../src/format/codecs/binary.ts";
import {
  BYTEGROUP_HEADER_BYTES,
  BYTEGROUP_VERSION,
  decodeByteGroupParts,
  decodeByteGroups,
  encodeByteGroups,
  huffmanBits,
  joinPlanes,
  planByteGroups,
  PLANE_DEFLATE,
  PLANE_ENTRY_BYTES,
  PLANE_STORED,
  PlaneScratch,
  splitPlanes,
} from "../../../src/format/codecs/_bytegroup.ts";
import { inflateRaw } from "../../../src/format/_deflate.ts";
import { deflateLiterals } from "../../../src/format/_deflate_literals.ts";
import { bytesOf } from "../../../src/format/dtype.ts";
import type { CheckpointInput, DType, TensorInput } from "../../../src/format/types.ts";
import { assertSameCheckpoint, collect, edgeTensors, feeds, prng } from "../../_util.ts";
import { buildRaw, meta, type RawRecord, tensor } from "./_binary_builder.ts";
import { concatBytes } from "../../../src/format/dtype.ts";

const BYTEGROUP = { compression: "bytegroup" } as const;
const MIB = 2 ** 20;

/** N(0, sigma) float32 values, the shape of trained weights. */
function gaussian(n: number, seed: number, sigma = 0.02): Float32Array {
  const rand = prng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(rand() || 1e-12)) * sigma;
    const a = 2 * Math.PI * rand();
    out[i] = r * Math.cos(a);
    if (i + 1 < n) out[i + 1] = r * Math.sin(a);
  }
  return out;
}

/** Weight-like tensors of every float dtype with the edge values (NaN payloads, -0, subnormals, ±Inf) mixed in. */
function floatTensors(n: number, seed: number): TensorInput[] {
  const rand = prng(seed);
  const f32 = gaussian(n, seed);
  const f32Bits = new Uint32Array(f32.buffer);
  const edge32 = [0x80000000, 0x7fc00001, 0xffbfffff, 0x00000001, 0x007fffff, 0x7f800000, 0xff800000, 0x7fc00000];
  const f64 = Float64Array.from(f32, (v) => v * (1 + 1e-9));
  const f64Bits = new BigUint64Array(f64.buffer);
  const edge64 = [0x8000000000000000n, 0x7ff8000000000001n, 0xfff0000000000abcn, 1n, 0x000fffffffffffffn];
  const bf16 = Uint16Array.from(f32Bits, (b) => b >>> 16);
  const f16 = Uint16Array.from(f32, (v) => {
    // Weights scaled into float16's normal range: sign, 5-bit exponent, top 10 mantissa bits.
    const b = new Uint32Array(new Float32Array([v * 64]).buffer)[0]!;
    const e = ((b >>> 23) & 0xff) - 127 + 15;
    return ((b >>> 16) & 0x8000) | (e <= 0 ? 0 : e >= 31 ? 0x7c00 : (e << 10) | ((b >>> 13) & 0x3ff));
  });
  const edge16 = [0x8000, 0x7e01, 0xfd00, 0x0001, 0x03ff, 0x7c00, 0xfc00];
  for (let k = 0; k < 64; k++) {
    const i = Math.floor(rand() * n);
    f32Bits[i] = edge32[k % edge32.length]!;
    f64Bits[i] = edge64[k % edge64.length]!;
    bf16[i] = edge16[k % edge16.length]!;
    f16[i] = edge16[(k + 3) % edge16.length]!;
  }
  return [
    { name: "dense/kernel", dtype: "float32", shape: [n / 16, 16], data: f32 },
    { name: "dense/kernel64", dtype: "float64", shape: [n], data: f64 },
    { name: "bf16", dtype: "bfloat16", shape: [n], data: bf16 },
    { name: "f16", dtype: "float16", shape: [n], data: f16 },
    { name: "step", dtype: "int64", shape: [], data: new BigInt64Array([5n]), group: "optimizer" },
  ];
}

const weights = (n = 4096, seed = 1): CheckpointInput => ({ metadata: { step: 3 }, tensors: floatTensors(n, seed) });

/** The head of each tensor record, parsed, in file order. */
function heads(bytes: Uint8Array): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const v = new DataView(bytes.buffer, bytes.byteOffset);
  let at = 16;
  for (;;) {
    const kind = bytes[at]!;
    const headBytes = v.getUint32(at + 4, true);
    const body = Number(v.getBigUint64(at + 8, true));
    const headEnd = at + 16 + headBytes;
    if (kind === 3) return out;
    if (kind === 2) out.push(JSON.parse(new TextDecoder().decode(bytes.subarray(at + 16, headEnd))));
    const pad = kind === 2 ? (BINARY_ALIGNMENT - (headEnd % BINARY_ALIGNMENT)) % BINARY_ALIGNMENT : 0;
    at = headEnd + pad + body + 32;
  }
}

Deno.test("bytegroup round-trips every float dtype bit for bit (NaN payloads, -0, subnormals, ±Inf), fed three ways", async () => {
  const ckpt = weights();
  const bytes = await collect(encodeCheckpoint(ckpt, BYTEGROUP));
  assert.deepEqual(heads(bytes).map((h) => h.encoding), [
    "bytegroup",
    "bytegroup",
    "bytegroup",
    "bytegroup",
    undefined,
  ]);
  for (const feed of feeds(bytes)) assertSameCheckpoint(await loadCheckpoint(feed.stream()), ckpt);
});

Deno.test("bytegroup round-trips random bit patterns of every float dtype, through a file and by name", async () => {
  const rand = prng(7);
  const dir = await Deno.makeTempDir();
  try {
    for (let round = 0; round < 8; round++) {
      const tensors: TensorInput[] = (["float32", "float64", "float16", "bfloat16"] as DType[]).map((dtype, k) => {
        const n = 1 + Math.floor(rand() * 20_000);
        const data = dtype === "float32"
          ? new Float32Array(n)
          : dtype === "float64"
          ? new Float64Array(n)
          : new Uint16Array(n);
        const b = bytesOf(data);
        // Random bits in every byte, except a top byte from a narrow set half the time (so planes
        // compress and the grouped path runs, with arbitrary bits in every other plane).
        const width = b.byteLength / n;
        for (let i = 0; i < b.length; i++) b[i] = Math.floor(rand() * 256);
        if (round % 2 === 0) { for (let i = width - 1; i < b.length; i += width) b[i] = 0x3c + (b[i]! & 3); }
        return { name: `t${k}`, dtype, shape: [n], data };
      });
      const ckpt = { metadata: { step: round }, tensors };
      const path = `${dir}/r${round}.ckpt`;
      await saveCheckpoint(path, ckpt, BYTEGROUP);
      assertSameCheckpoint(await loadCheckpoint(path), ckpt);
      const some = await loadCheckpoint(path, { only: ["t2", "t0"] });
      assertSameCheckpoint(some, { metadata: ckpt.metadata, tensors: [tensors[0]!, tensors[2]!] });
      if (round % 2 === 0) {
        assert.ok(heads(await Deno.readFile(path)).every((h) => h.encoding === "bytegroup"));
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bytegroup deflates exactly the planes that pay, for every width, alignment and sample size", () => {
  // One plane takes four values, the others random bytes: only that plane is deflated, whether the
  // tensor is judged whole or by its first 64 Ki elements, from a word-aligned view or not.
  const rand = prng(12);
  const dtypes: [DType, number][] = [["float16", 2], ["bfloat16", 2], ["float32", 4], ["float64", 8]];
  for (const [dtype, width] of dtypes) {
    for (const count of [999, 200_001]) {
      for (const skip of [0, 1, 2]) {
        for (let k = 0; k < width; k++) {
          const buffer = new Uint8Array(skip + count * width);
          const bytes = buffer.subarray(skip);
          for (let i = 0; i < bytes.length; i++) {
            bytes[i] = i % width === k ? 0x40 + Math.floor(rand() * 4) : Math.floor(rand() * 256);
          }
          const what = `${dtype}, ${count} elements from byte ${skip}, plane ${k}`;
          const grouped = encodeByteGroups(dtype, bytes);
          assert.ok(grouped, `${what}: left raw`);
          const table = grouped.parts[0]!;
          const methods = Array.from({ length: width }, (_, j) => table[8 + 16 * j]);
          const expected = methods.map((_, j) => j === k ? PLANE_DEFLATE : PLANE_STORED);
          assert.deepEqual(methods, expected, what);
        }
      }
    }
  }
});

Deno.test("planByteGroups: the size planned from byte counts read across the elements is the body's, and its planes are deflateLiterals of the split planes", () => {
  const rand = prng(21);
  for (const [dtype, width] of [["float16", 2], ["bfloat16", 2], ["float32", 4], ["float64", 8]] as const) {
    // Element counts at the deflate's 256 Ki block boundary and off the 4-element unrolling.
    for (const count of [1001, 4099, 262_144, 262_147]) {
      for (const skip of [0, 1, 2, 4]) {
        const buffer = new Uint8Array(skip + count * width);
        const bytes = buffer.subarray(skip);
        // Low planes random, the top ones few values (and plane 1 of wide types in between).
        for (let i = 0; i < bytes.length; i++) {
          const k = i % width;
          bytes[i] = k === width - 1
            ? 0x3c + Math.floor(rand() ** 3 * 4)
            : k === 1
            ? Math.floor(rand() * 12)
            : rand() * 256;
        }
        const what = `${dtype}, ${count} elements from byte ${skip}`;
        const plan = planByteGroups(dtype, bytes);
        assert.ok(plan, `${what}: left raw`);
        const parts = [...plan.parts()];
        assert.equal(parts.reduce((n, p) => n + p.byteLength, 0), plan.byteLength, what);
        const planes = splitPlanes(bytes, width);
        planes.forEach((plane, k) => {
          const method = parts[0]![8 + 16 * k];
          assert.deepEqual(
            parts[k + 1],
            method === PLANE_DEFLATE ? deflateLiterals(plane) : plane,
            `${what}, plane ${k}`,
          );
        });
        assert.equal(parts[0]![8 + 16 * (width - 1)], PLANE_DEFLATE, `${what}: top plane deflated`);
        assert.throws(() => plan.parts(), /already/);
      }
    }
  }
});

Deno.test("planByteGroups: parts() splits the planes at once and codes a deflated plane only when the parts reach it", async () => {
  // Weights: planes 0 and 1 stored, the top plane deflated (after them).
  const weights = new Float32Array(100_000).map((_, i) => Math.fround(Math.sin(i * 0.37) * 0.02));
  const bytes = new Uint8Array(weights.buffer);
  const taken: number[] = [];
  const scratch = new PlaneScratch();
  const take = scratch.take.bind(scratch);
  scratch.take = (k, n) => (taken.push(k), take(k, n));
  const plan = planByteGroups("float32", bytes, { scratch, transient: true })!;
  const it = plan.parts()[Symbol.iterator]();
  const splitTaken = [...taken];
  // The tensor's bytes are read only by parts() itself: changing them afterwards changes nothing.
  const original = bytes.slice();
  bytes.fill(0x55);
  const table = it.next().value!;
  const methods = [0, 1, 2, 3].map((k) => table[BYTEGROUP_HEADER_BYTES + k * PLANE_ENTRY_BYTES]);
  assert.deepEqual([methods[0], methods[1], methods[3]], [PLANE_STORED, PLANE_STORED, PLANE_DEFLATE]);
  const before = [it.next().value!, it.next().value!];
  const coded = methods[2] === PLANE_DEFLATE ? [2, 3] : [3];
  // Split into scratch at once (deflated planes, and with `transient` the stored ones); no deflate
  // output (scratch 4 + k) taken until the parts reach the first deflated plane.
  assert.deepEqual(splitTaken.filter((k) => k >= 4), []);
  assert.deepEqual(taken.filter((k) => k >= 4), []);
  const rest = [...{ [Symbol.iterator]: () => it }];
  assert.deepEqual(taken.filter((k) => k >= 4), coded.map((k) => 4 + k));
  const planes = splitPlanes(original, 4);
  assert.deepEqual(before, [planes[0], planes[1]]);
  assert.deepEqual(rest.at(-1), deflateLiterals(planes[3]!));
  const body = concatBytes([table, ...before, ...rest]);
  assert.equal(body.byteLength, plan.byteLength);
  assert.deepEqual(await decodeByteGroups(body, "float32", weights.length, "w", 0), original);
});

Deno.test("bytegroup deflates the sign and exponent plane of weights and stores the mantissa planes as they are", () => {
  const bytes = bytesOf(gaussian(1 << 18, 3));
  const grouped = (encodeByteGroups("float32", bytes))!;
  const table = grouped.parts[0]!;
  const methods = [0, 1, 2, 3].map((k) => table[8 + 16 * k]);
  assert.deepEqual(methods, [PLANE_STORED, PLANE_STORED, PLANE_STORED, PLANE_DEFLATE]);
  assert.ok(grouped.byteLength < 0.9 * bytes.byteLength, `ratio ${grouped.byteLength / bytes.byteLength}`);
  // Every plane of a slowly varying tensor pays: all deflated.
  const smooth = bytesOf(Float32Array.from({ length: 1 << 16 }, (_, i) => 1 + (i % 8) / 8));
  const all = (encodeByteGroups("float32", smooth))!;
  assert.deepEqual([0, 1, 2, 3].map((k) => all.parts[0]![8 + 16 * k]), [1, 1, 1, 1]);
  // Random bits do not compress: the tensor is left raw.
  const noise = new Uint8Array(1 << 16);
  const rand = prng(5);
  for (let i = 0; i < noise.length; i++) noise[i] = rand() * 256;
  assert.equal(encodeByteGroups("float32", noise), undefined);
  assert.equal(encodeByteGroups("int32", smooth), undefined);
});

Deno.test("huffmanBits is the Huffman code's size, which a Huffman-only deflate of the plane matches within 1%", () => {
  assert.equal(huffmanBits([]), 0);
  assert.equal(huffmanBits([0, 7]), 7); // one symbol: a bit each
  assert.equal(huffmanBits([1, 1, 1, 1]), 8);
  assert.equal(huffmanBits([8, 4, 2, 1, 1]), 30); // codes of 1, 2, 3, 4, 4 bits
  const [, , , exponent] = splitPlanes(bytesOf(gaussian(1 << 18, 9)), 4);
  const counts = new Array(256).fill(0);
  for (const b of exponent!) counts[b]++;
  const estimate = huffmanBits(counts) / 8;
  const deflated = deflateLiterals(exponent!).byteLength;
  assert.ok(Math.abs(deflated - estimate) < 0.01 * estimate, `deflate ${deflated} bytes, estimate ${estimate}`);
});

Deno.test("bytegroup leaves integers, bool and tiny tensors raw, and the file still decodes as before", async () => {
  const ckpt: CheckpointInput = { metadata: { step: 1 }, tensors: edgeTensors() };
  const bytes = await collect(encodeCheckpoint(ckpt, BYTEGROUP));
  assert.ok(heads(bytes).every((h) => h.encoding === undefined));
  assert.equal(decodeHeader(bytes), FLAG_BYTEGROUP);
  assertSameCheckpoint(await loadCheckpoint(bytes), ckpt);
});

Deno.test("bytegroup output is deterministic and smaller than the raw file", async () => {
  const a = await collect(encodeCheckpoint(weights(), BYTEGROUP));
  const b = await collect(encodeCheckpoint(weights(), BYTEGROUP));
  assert.deepEqual(a, b);
  const raw = await collect(encodeCheckpoint(weights()));
  assert.ok(a.byteLength < raw.byteLength * 0.9, `${a.byteLength} vs ${raw.byteLength}`);
});

Deno.test("splitPlanes and joinPlanes are inverses for every width, from unaligned views too", () => {
  const rand = prng(11);
  for (const width of [2, 4, 8]) {
    const buf = new Uint8Array(8 + width * 1001);
    for (let i = 0; i < buf.length; i++) buf[i] = rand() * 256;
    for (const start of [0, 1, 4, 8]) {
      const view = buf.subarray(start, start + width * 1000);
      const planes = splitPlanes(view, width);
      assert.equal(planes.length, width);
      for (let k = 0; k < width; k++) assert.equal(planes[k]![7], view[7 * width + k]);
      assert.deepEqual(joinPlanes(planes, width), view.slice());
      // Into a buffer the caller allocates: a view 16 bytes into a larger one (as a huge-page
      // aligned allocation is), written there and nowhere else.
      const outer = new Uint8Array(width * 1000 + 64).fill(0xee);
      const joined = joinPlanes(planes, width, (n) => outer.subarray(16, 16 + n));
      assert.equal(joined.byteOffset, 16);
      assert.deepEqual(joined, view);
      assert.ok(
        outer.subarray(0, 16).every((b) => b === 0xee) && outer.subarray(16 + view.length).every((b) => b === 0xee),
      );
    }
  }
  assert.throws(
    () => joinPlanes([new Uint8Array(4), new Uint8Array(4)], 2, (n) => new Uint8Array(n + 2).subarray(2)),
    /alloc gave 8 bytes at offset 2/,
  );
});

Deno.test("deflated planes are plain raw deflate: node:zlib and DecompressionStream read them, and what zlib wrote for earlier versions still reads", async () => {
  const plane = splitPlanes(bytesOf(gaussian(1 << 16, 2)), 4)[3]!;
  const packed = deflateLiterals(plane);
  const viaWeb = new Uint8Array(
    await new Response(
      ReadableStream.from([packed]).pipeThrough(
        new DecompressionStream("deflate-raw") as ReadableWritablePair<Uint8Array, Uint8Array>,
      ),
    ).arrayBuffer(),
  );
  assert.deepEqual(viaWeb, plane);
  assert.deepEqual(new Uint8Array(inflateRawSync(packed)), plane);
  // Before 2026-12-04 planes were node:zlib's (or pako's) Huffman-only deflate: 16 Ki symbols a block.
  const zlibMade = deflateRawSync(plane, { strategy: zlibConstants.Z_HUFFMAN_ONLY });
  assert.ok(Math.abs(zlibMade.byteLength - packed.byteLength) < 0.01 * packed.byteLength);
  assert.deepEqual(await inflateRaw(zlibMade, plane.byteLength, "p", 0), plane);
  assert.deepEqual(await inflateRaw(packed, plane.byteLength, "p", 0, "web"), plane);
  for (const backend of ["node:zlib", "web"] as const) {
    await assert.rejects(() => inflateRaw(packed, plane.byteLength - 1, "plane 3", 9, backend), {
      name: "SyntaxError",
      message: `Cannot decode checkpoint: plane 3 inflates to more than ${plane.byteLength - 1} bytes at offset 9`,
    });
    await assert.rejects(
      () => inflateRaw(packed, plane.byteLength + 1, "plane 3", 9, backend),
      /plane 3 inflates to \d+ bytes, not \d+ at offset 9/,
    );
    await assert.rejects(
      () => inflateRaw(packed.subarray(0, 100), plane.byteLength, "plane 3", 9, backend),
      /Cannot decode checkpoint: plane 3 (is not valid deflate data|inflates to \d+ bytes)/,
    );
  }
});

Deno.test("inflateRaw: literals-only planes decode into the caller's buffer; any other deflate stream goes to the runtime's inflater", async () => {
  const plane = splitPlanes(bytesOf(gaussian(1 << 16, 4)), 4)[3]!;
  const into = new Uint8Array(plane.byteLength);
  const fast = await inflateRaw(deflateLiterals(plane), plane.byteLength, "p", 0, undefined, into);
  assert.equal(fast, into, "decoded in place");
  assert.deepEqual(into, plane);
  // Another writer's deflate with matches (zlib's default level): still read, by node:zlib and by
  // DecompressionStream, into buffers of their own.
  const repetitive = new Uint8Array(plane.byteLength).map((_, i) => plane[i % 4096]!);
  const matched = deflateRawSync(repetitive);
  for (const backend of ["node:zlib", "web"] as const) {
    const other = new Uint8Array(plane.byteLength);
    const out = await inflateRaw(matched, plane.byteLength, "p", 0, backend, other);
    assert.notEqual(out, other);
    assert.deepEqual(out, repetitive);
  }
  await assert.rejects(() => inflateRaw(matched, plane.byteLength, "p", 0, undefined, into.subarray(1)), RangeError);
});

Deno.test("bytegroup keeps random access: the index names the encoding, only reads what it asks for", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/w.ckpt`;
    const tensors = floatTensors(8192, 4);
    const ckpt = { metadata: { step: 3 }, tensors };
    await saveCheckpoint(path, ckpt, BYTEGROUP);
    const index = await readCheckpointIndex(path);
    assert.deepEqual(index.tensors.map((t) => t.encoding), [
      "bytegroup",
      "bytegroup",
      "bytegroup",
      "bytegroup",
      undefined,
    ]);
    const some = await loadCheckpoint(path, { only: ["bf16", "step"] });
    assertSameCheckpoint(some, { metadata: ckpt.metadata, tensors: [tensors[2]!, tensors[4]!] });
    assert.equal((await sniffCheckpoint(path)).compression, "bytegroup");
    const records = [];
    for await (const r of decodeCheckpoint(path, { reuseBuffers: true })) records.push(r.type);
    assert.equal(records.length, 6);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bytegroup is refused where it cannot apply", () => {
  const ckpt = weights(64);
  assert.throws(() => encodeCheckpoint(ckpt, { codec: "json", compression: "bytegroup" }), {
    name: "TypeError",
    message: 'Compression "bytegroup" needs the binary codec, not "json"',
  });
  assert.throws(() => encodeCheckpoint(ckpt, { compression: "zstd" as "gzip" }), /use "none", "gzip" or "bytegroup"/);
});

// ---- error paths, from bytes built field by field ----

const N = 64;
const ONES = new Float32Array(N).fill(1); // bytes 00 00 80 3f per element
const W = { name: "w", dtype: "float32", shape: [N], group: "params", encoding: "bytegroup" };

interface Plane {
  method: number;
  bytes: Uint8Array;
  declared?: bigint;
  reserved?: number;
}

/** A byte-grouped body: version, plane count, the plane table, the planes. */
function body(planes: Plane[], { version = 1, count = planes.length, pad = 0 } = {}): Uint8Array {
  const table = new Uint8Array(8 + 16 * planes.length);
  const v = new DataView(table.buffer);
  table[0] = version;
  table[1] = count;
  table[2] = pad;
  planes.forEach((p, k) => {
    table[8 + 16 * k] = p.method;
    table[8 + 16 * k + 1] = p.reserved ?? 0;
    v.setBigUint64(8 + 16 * k + 8, p.declared ?? BigInt(p.bytes.byteLength), true);
  });
  const out = new Uint8Array(table.byteLength + planes.reduce((n, p) => n + p.bytes.byteLength, 0));
  out.set(table);
  let at = table.byteLength;
  for (const p of planes) {
    out.set(p.bytes, at);
    at += p.bytes.byteLength;
  }
  return out;
}

const stored = (byte: number, n = N): Plane => ({ method: PLANE_STORED, bytes: new Uint8Array(n).fill(byte) });
const deflated = (byte: number, n = N): Plane => ({
  method: PLANE_DEFLATE,
  bytes: new Uint8Array(deflateRawSync(new Uint8Array(n).fill(byte))),
});
const goodPlanes = (): Plane[] => [stored(0), stored(0), deflated(0x80), deflated(0x3f)];

function grouped(planes: Plane[], extra: Partial<RawRecord> = {}, desc: Record<string, unknown> = W): RawRecord {
  return tensor(desc, body(planes), { digestBody: new Uint8Array(ONES.buffer), ...extra });
}

async function rejectsBoth(
  raw: Uint8Array,
  cls: ErrorConstructor | typeof ChecksumMismatchError,
  pattern: RegExp,
): Promise<void> {
  const check = (e: Error) => {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
    assert.match(e.message, pattern);
    return true;
  };
  await assert.rejects(() => loadCheckpoint(ReadableStream.from([raw])), check);
  // The random-access reader refuses the same bytes.
  const path = await Deno.makeTempFile();
  try {
    await Deno.writeFile(path, raw);
    await assert.rejects(() => loadCheckpoint(path, { only: ["w"] }), check);
  } finally {
    await Deno.remove(path);
  }
}

Deno.test("a hand-built byte-grouped file decodes, streamed and by name", async () => {
  const raw = buildRaw({ flags: 1, records: [meta(), grouped(goodPlanes())] });
  const expected = { metadata: { step: 1 }, tensors: [{ ...W, encoding: undefined, data: ONES }] };
  delete (expected.tensors[0] as { encoding?: string }).encoding;
  assertSameCheckpoint(await loadCheckpoint(raw), expected as CheckpointInput);
  const path = await Deno.makeTempFile();
  await Deno.writeFile(path, raw);
  assertSameCheckpoint(await loadCheckpoint(path, { only: ["w"] }), expected as CheckpointInput);
  await Deno.remove(path);
});

Deno.test("byte-grouped decoders name what is wrong and where", async (t) => {
  // Offsets: the tensor record starts at 74, its body at 192 (64-aligned), its plane table at 192 + 8.
  const cases: [string, Uint8Array, ErrorConstructor | typeof ChecksumMismatchError, RegExp][] = [
    [
      "encoding without the header flag",
      buildRaw({ records: [meta(), grouped(goodPlanes())] }),
      SyntaxError,
      /tensor "w" is byte-grouped but the header does not set flag 1 at offset 74/,
    ],
    [
      "unknown encoding",
      buildRaw({ flags: 1, records: [meta(), grouped(goodPlanes(), {}, { ...W, encoding: "zip" })] }),
      SyntaxError,
      /tensor "w" has unknown encoding "zip"/,
    ],
    [
      "encoding on an integer tensor",
      buildRaw({ flags: 1, records: [meta(), grouped(goodPlanes(), {}, { ...W, dtype: "int32" })] }),
      SyntaxError,
      /tensor "w" of dtype int32 cannot be byte-grouped/,
    ],
    [
      "body longer than the tensor plus its table",
      buildRaw({ flags: 1, records: [meta(), grouped([stored(0), stored(0), stored(0), stored(0, N + 1)])] }),
      SyntaxError,
      /byte-grouped tensor "w" of 256 bytes declares a body of 329, over 328 at offset 82/,
    ],
    [
      "body shorter than its plane table",
      buildRaw({
        flags: 1,
        records: [meta(), tensor(W, new Uint8Array(40), { digestBody: new Uint8Array(ONES.buffer) })],
      }),
      SyntaxError,
      /tensor "w" has a byte-grouped body of 40 bytes, shorter than its 72-byte plane table at offset 192/,
    ],
    [
      "unknown version",
      buildRaw({ flags: 1, records: [meta(), tensor(W, body(goodPlanes(), { version: 2 }))] }),
      SyntaxError,
      /tensor "w" has byte-group version 2 \(this reader knows 1\) at offset 192/,
    ],
    [
      "wrong plane count",
      buildRaw({ flags: 1, records: [meta(), tensor(W, body(goodPlanes(), { count: 2 }))] }),
      SyntaxError,
      /tensor "w" declares 2 byte planes, dtype float32 has 4 at offset 193/,
    ],
    [
      "non-zero reserved byte",
      buildRaw({ flags: 1, records: [meta(), tensor(W, body(goodPlanes(), { pad: 9 }))] }),
      SyntaxError,
      /tensor "w" has non-zero reserved bytes at offset 194/,
    ],
    [
      "unknown plane method",
      buildRaw({
        flags: 1,
        records: [meta(), grouped([stored(0), { ...stored(0), method: 7 }, stored(0x80), stored(0x3f)])],
      }),
      SyntaxError,
      /tensor "w" plane 1 has unknown method 7 at offset 216/,
    ],
    [
      "plane entry reserved byte",
      buildRaw({
        flags: 1,
        records: [meta(), grouped([stored(0), stored(0), { ...stored(0x80), reserved: 1 }, stored(0x3f)])],
      }),
      SyntaxError,
      /tensor "w" plane 2 has non-zero reserved bytes at offset 233/,
    ],
    [
      "plane declares more than remains",
      buildRaw({
        flags: 1,
        records: [meta(), grouped([stored(0), stored(0), { ...deflated(0x80), declared: 2n ** 40n }, deflated(0x3f)])],
      }),
      SyntaxError,
      /tensor "w" plane 2 declares 1099511627776 bytes but \d+ remain at offset 240/,
    ],
    [
      "stored plane of the wrong length",
      buildRaw({ flags: 1, records: [meta(), grouped([stored(0, N - 1), stored(0), stored(0x80), deflated(0x3f)])] }),
      SyntaxError,
      /tensor "w" plane 0 is stored with 63 bytes, needs 64 \(one per element\) at offset 208/,
    ],
    [
      "deflated plane no smaller than stored",
      buildRaw({
        flags: 1,
        records: [
          meta(),
          grouped([stored(0), stored(0), { method: PLANE_DEFLATE, bytes: new Uint8Array(N) }, deflated(0x3f)]),
        ],
      }),
      SyntaxError,
      /tensor "w" plane 2 is deflated to 64 bytes, not between 1 and 63 at offset 240/,
    ],
    [
      "bytes after the last plane",
      buildRaw({
        flags: 1,
        records: [
          meta(),
          tensor(W, new Uint8Array([...body(goodPlanes()), 0]), { digestBody: new Uint8Array(ONES.buffer) }),
        ],
      }),
      SyntaxError,
      /tensor "w" has 1 bytes after its last plane at offset \d+/,
    ],
    [
      "deflate data that is not deflate",
      buildRaw({
        flags: 1,
        records: [
          meta(),
          grouped([stored(0), stored(0), stored(0x80), {
            method: PLANE_DEFLATE,
            bytes: new Uint8Array([0xff, 0xff, 0xff]),
          }]),
        ],
      }),
      SyntaxError,
      /tensor "w" plane 3 is not valid deflate data .* at offset 456/,
    ],
    [
      "deflate data that inflates to too much",
      buildRaw({ flags: 1, records: [meta(), grouped([stored(0), stored(0), stored(0x80), deflated(0x3f, N + 1)])] }),
      SyntaxError,
      /tensor "w" plane 3 inflates to more than 64 bytes at offset 456/,
    ],
    [
      "deflate data that inflates to too little",
      buildRaw({ flags: 1, records: [meta(), grouped([stored(0), stored(0), stored(0x80), deflated(0x3f, N - 1)])] }),
      SyntaxError,
      /tensor "w" plane 3 inflates to 63 bytes, not 64 at offset 456/,
    ],
    [
      "planes that decode to other bytes than the digest covers",
      buildRaw({ flags: 1, records: [meta(), grouped([stored(0), stored(0), deflated(0x80), deflated(0x3e)])] }),
      ChecksumMismatchError,
      /Checksum mismatch for (tensor "w"|record at offset 74)/,
    ],
  ];
  for (const [name, bytes, cls, pattern] of cases) {
    await t.step(name, () => rejectsBoth(bytes, cls, pattern));
  }
});

Deno.test("byte-grouped decoders never allocate from a declared length before the bytes arrive", async () => {
  // A 15 GiB float32 tensor (under the default cap) whose grouped body claims 15 GiB, in a tiny stream.
  const raw = buildRaw({
    flags: 1,
    records: [
      meta(),
      tensor({ ...W, shape: [15 * 2 ** 28] }, body(goodPlanes()), { bodyBytes: 15n * 2n ** 30n }),
    ],
  });
  await assert.rejects(() => loadCheckpoint(raw), /stream ends at offset \d+ with \d+ bytes of tensor "w" missing/);
  // A body over maxTensorBytes is refused before any of it is read.
  const big = buildRaw({ flags: 1, records: [meta(), grouped(goodPlanes())] });
  await assert.rejects(() => loadCheckpoint(big, { maxTensorBytes: 200 }), RangeError);
});

Deno.test("PlaneScratch: given back, its buffers serve the next save or load; two at once never share; over 64 MiB idle is dropped", () => {
  const a = PlaneScratch.acquire();
  const b = PlaneScratch.acquire();
  const fromA = a.take(0, 4096);
  assert.notEqual(b.take(0, 4096).buffer, fromA.buffer, "two users, two sets of buffers");
  a.release();
  a.release(); // once only: a second release does not put it back twice
  const again = PlaneScratch.acquire();
  assert.equal(again.take(0, 100).buffer, fromA.buffer);
  const other = PlaneScratch.acquire();
  assert.notEqual(other, again, "released once, handed out once");
  b.release();
  again.release();
  other.release();
  // A scratch that grew past the cap is not kept for later.
  const big = PlaneScratch.acquire();
  for (let k = 0; k < 5; k++) big.take(k, 16 * 2 ** 20);
  assert.ok(big.byteLength >= 80 * 2 ** 20);
  const held = big.take(0, 1).buffer;
  big.release();
  for (let i = 0; i < 3; i++) assert.notEqual(PlaneScratch.acquire().take(0, 1).buffer, held);
});

/** A float32 body of `planes` 0-2 stored and plane 3 as `top` (any raw deflate stream). */
function bodyWith(planes: Uint8Array[], top: Uint8Array): Uint8Array {
  const table = new Uint8Array(BYTEGROUP_HEADER_BYTES + 4 * PLANE_ENTRY_BYTES);
  table[0] = BYTEGROUP_VERSION;
  table[1] = 4;
  const v = new DataView(table.buffer);
  for (let k = 0; k < 4; k++) {
    const e = BYTEGROUP_HEADER_BYTES + k * PLANE_ENTRY_BYTES;
    table[e] = k === 3 ? PLANE_DEFLATE : PLANE_STORED;
    v.setBigUint64(e + 8, BigInt(k === 3 ? top.byteLength : planes[k]!.byteLength), true);
  }
  return concatBytes([table, planes[0]!, planes[1]!, planes[2]!, top]);
}

Deno.test("decodeByteGroupParts: 1 MiB parts, each right when it comes, also when the plane turns out to need zlib after the first part", async () => {
  const count = 600_000; // parts of 262 144 elements: 1 MiB, 1 MiB, the rest
  const bytes = bytesOf(gaussian(count, 6));
  const planes = splitPlanes(bytes, 4);
  const top = planes[3]!;
  // Huffman-only blocks for the first 400 000 bytes of the plane (ending in a sync flush, so the
  // next block starts on a byte), then blocks with matches: literals for the first part only.
  const head = deflateRawSync(top.subarray(0, 400_000), {
    strategy: zlibConstants.Z_HUFFMAN_ONLY,
    finishFlush: zlibConstants.Z_SYNC_FLUSH,
  });
  const tail = deflateRawSync(top.subarray(400_000));
  const streams = {
    "our own": deflateLiterals(top),
    "zlib's Huffman-only (16 Ki-symbol blocks)": deflateRawSync(top, { strategy: zlibConstants.Z_HUFFMAN_ONLY }),
    "literals, then matches": concatBytes([head, tail]),
  };
  for (const [what, stream] of Object.entries(streams)) {
    const body = bodyWith(planes, stream);
    const scratch = new PlaneScratch();
    const { data, parts } = decodeByteGroupParts(body, "float32", count, "w", 64, { scratch });
    const sizes: number[] = [];
    let at = 0;
    for await (const part of parts) {
      assert.deepEqual(part, bytes.subarray(at, at + part.byteLength), `${what}: part at ${at}`);
      assert.equal(part.buffer, data.buffer);
      sizes.push(part.byteLength);
      at += part.byteLength;
    }
    assert.deepEqual(sizes, [MIB, MIB, 4 * count - 2 * MIB], what);
    assert.deepEqual(data, bytes, what);
  }
  // A stream that ends (its final block) before the second part's bytes: that part is the error,
  // not bytes of an earlier plane left in the scratch buffer.
  const short = bodyWith(planes, deflateRawSync(top.subarray(0, 400_000), { strategy: zlibConstants.Z_HUFFMAN_ONLY }));
  const cut = decodeByteGroupParts(short, "float32", count, "w", 64, { scratch: new PlaneScratch() }).parts;
  assert.equal((await cut.next()).done, false);
  await assert.rejects(() => cut.next(), {
    name: "SyntaxError",
    message: /^Cannot decode checkpoint: tensor "w" plane 3 inflates to 400000 bytes, not 600000 at offset \d+$/,
  });
  // Malformed after its first part: the part comes out, then the error names the plane.
  const body = bodyWith(planes, concatBytes([head, new Uint8Array([0xff, 0xff, 0xff, 0xff])]));
  const { parts } = decodeByteGroupParts(body, "float32", count, "w", 64);
  const first = await parts.next();
  assert.equal(first.done, false);
  await assert.rejects(() => parts.next(), {
    name: "SyntaxError",
    message: /^Cannot decode checkpoint: tensor "w" plane 3 is not valid deflate data .* at offset \d+$/,
  });
});
