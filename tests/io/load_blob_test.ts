// Loads from a Blob (given, or from a store that gives its objects as Blobs, as OPFS does): the
// index is read first, then each record of 1 MiB or more with one `slice().arrayBuffer()` whose
// memory becomes the tensor, hashed with one WebCrypto call in a page. Deno has no page, so the
// page's WebCrypto is stood in for by Deno's (as in binary_web_digest_test.ts); the browser
// suites load from OPFS through the real one. Every check of the streaming reader still holds:
// each damaged file below fails with the error the same bytes give from a stream.
import assert from "node:assert/strict";
import {
  type CheckpointInput,
  encodeCheckpoint,
  loadCheckpoint,
  MemoryStore,
  type TensorInput,
  verifyCheckpoint,
} from "../../mod.ts";
import { restore, spyWeb } from "../format/codecs/_web_spy.ts";
import { readPieces } from "../../src/format/codecs/binary_file.ts";
import { forgetRefusalForTests } from "../../src/storage/_piece_hasher.ts";
import { sha256 } from "../../src/format/_hash.ts";
import { assertSameTensors, collect } from "../_util.ts";
import { buildRaw, meta, tensor } from "../format/codecs/_binary_builder.ts";

const MiB = 2 ** 20;

/** Tensors over and under 1 MiB, small ones between them, sizes not all multiples of 64. */
function model(): CheckpointInput & { tensors: TensorInput[] } {
  const floats = (n: number, k: number) =>
    new Float32Array(n).map((_, j) => Math.fround(((j * 7919) % 997) * 1e-3 + k));
  return {
    metadata: { step: 7 },
    tensors: [
      { name: "a/kernel", dtype: "float32", shape: [MiB / 4 + 5], data: floats(MiB / 4 + 5, 1) },
      { name: "a/bias", dtype: "float32", shape: [3], data: floats(3, 2) },
      { name: "b/kernel", dtype: "float64", shape: [MiB / 8 + 1], data: new Float64Array(MiB / 8 + 1).fill(0.25) },
      { name: "mask", dtype: "bool", shape: [5], data: new Uint8Array([1, 0, 1, 1, 0]) },
      { name: "c/kernel", dtype: "float32", shape: [MiB / 2], data: floats(MiB / 2, 3) },
    ],
  };
}

/** The model, with 24 MiB more in 3 MiB tensors: more than one 16 MiB piece, so a page hashes on a worker. */
function largeModel(): CheckpointInput & { tensors: TensorInput[] } {
  const small = model();
  const extra = Array.from({ length: 8 }, (_, i) => ({
    name: `d${i}/kernel`,
    dtype: "float32" as const,
    shape: [3 * MiB / 4],
    data: new Float32Array(3 * MiB / 4).map((_, j) => (j % 1013) * 0.5 + i),
  }));
  return { ...small, tensors: [...small.tensors, ...extra] };
}

/** A memory store that also gives its objects as Blobs (what `OpfsStore` does with its files). */
class BlobStore extends MemoryStore {
  blobs = 0;
  async blob(key: string): Promise<Blob> {
    this.blobs++;
    return new Blob([await new Response((await this.get(key)).body).arrayBuffer()]);
  }
}

/** The error (class and message) a load of `source` ends with, or "no error". */
async function outcome(load: () => Promise<unknown>): Promise<string> {
  try {
    await load();
    return "no error";
  } catch (e) {
    return `${(e as Error).constructor.name}: ${(e as Error).message}`;
  }
}

Deno.test("a Blob of one piece loads bit for bit, each large tensor a view into it, hashed by one WebCrypto call here", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  const large = input.tensors.filter((t) => t.data.byteLength >= MiB).map((t) => t.data.byteLength);
  const calls = spyWeb();
  try {
    const back = await loadCheckpoint(new Blob([bytes as Uint8Array<ArrayBuffer>]));
    assertSameTensors(back.tensors, input.tensors);
    assert.equal(calls.length, large.length, `one call per large tensor, no worker for one piece: ${calls}`);
    calls.forEach((n, i) => assert.ok(n > large[i]! && n < large[i]! + 1024));
    for (const t of back.tensors.filter((t) => t.data.byteLength >= MiB)) {
      // A view into the piece its record was read into: no copy, aligned for its type.
      assert.equal(t.data.buffer.byteLength, bytes.byteLength, `${t.name}: in the one piece of this small file`);
      assert.equal(t.data.byteOffset % 64, 0);
    }
  } finally {
    restore();
  }
  // Without WebCrypto (Deno's own paths) the same tensors.
  assertSameTensors((await loadCheckpoint(new Blob([bytes as Uint8Array<ArrayBuffer>]))).tensors, input.tensors);
});

Deno.test("a Blob of several pieces has each large record hashed ahead on a worker; a flipped byte is the stream's error", async () => {
  const input = largeModel();
  const bytes = await collect(encodeCheckpoint(input));
  const calls = spyWeb();
  try {
    const back = await loadCheckpoint(new Blob([bytes as Uint8Array<ArrayBuffer>]));
    assertSameTensors(back.tensors, input.tensors);
    assert.deepEqual(calls, [], "no digest on this thread: the worker hashed each large record");
    const pieces = new Set(back.tensors.map((t) => t.data.buffer));
    assert.ok(pieces.size >= 2 && pieces.size < back.tensors.length, `tensors share their pieces: ${pieces.size}`);
    const bad = bytes.slice();
    bad[bytes.byteLength - MiB]! ^= 1; // inside the last tensor's body
    const expected = await outcome(() => loadCheckpoint(bad));
    assert.match(expected, /^ChecksumMismatchError: .*tensor "d7\/kernel"/);
    assert.equal(await outcome(() => loadCheckpoint(new Blob([bad as Uint8Array<ArrayBuffer>]))), expected);
  } finally {
    restore();
  }
});

Deno.test("where the hash worker cannot start or fails, each large record is hashed by one WebCrypto call here", async () => {
  const input = largeModel();
  const bytes = await collect(encodeCheckpoint(input));
  const large = input.tensors.filter((t) => t.data.byteLength >= MiB).map((t) => t.data.byteLength);
  const real = globalThis.Worker;
  /** A worker that fails as a page's policy makes a Blob-URL worker fail: an error event, no answer. */
  class Failing extends EventTarget {
    onerror: ((e: Event) => void) | null = null;
    onmessage: ((e: MessageEvent) => void) | null = null;
    postMessage(): void {
      setTimeout(() => this.onerror?.(new ErrorEvent("error", { message: "refused" })), 1);
    }
    terminate(): void {}
  }
  const calls = spyWeb();
  try {
    for (const worker of [undefined, Failing]) {
      calls.length = 0;
      (globalThis as { Worker?: unknown }).Worker = worker;
      const back = await loadCheckpoint(new Blob([bytes as Uint8Array<ArrayBuffer>]));
      assertSameTensors(back.tensors, input.tensors);
      assert.equal(calls.length, large.length, `one call per large tensor: ${calls}`);
      calls.forEach((n, i) => assert.ok(n > large[i]! && n < large[i]! + 1024));
    }
  } finally {
    globalThis.Worker = real;
    forgetRefusalForTests();
    restore();
  }
});

Deno.test("a store that gives Blobs: whole loads, selected tensors, a verify and the sha256 option read through them", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  const store = new BlobStore();
  await store.put("m.ckpt", bytes);
  const at = { store, key: "m.ckpt" };
  const calls = spyWeb();
  try {
    assertSameTensors((await loadCheckpoint(at)).tensors, input.tensors);
    assert.equal(calls.length, 3);
    const some = await loadCheckpoint(at, { only: ["mask", "c/kernel"] });
    assertSameTensors(some.tensors, [input.tensors[3]!, input.tensors[4]!]);
    const verified = await verifyCheckpoint(at);
    assert.equal(verified.tensors.length, 5);
    const file = sha256().update(bytes).digest("hex");
    assertSameTensors((await loadCheckpoint(at, { sha256: file })).tensors, input.tensors);
    assertSameTensors((await loadCheckpoint(at, { sha256: verified.digest })).tensors, input.tensors);
    const wrong = "0".repeat(64);
    assert.equal(
      await outcome(() => loadCheckpoint(at, { sha256: wrong })),
      await outcome(() => loadCheckpoint(bytes, { sha256: wrong })),
    );
    assert.ok(store.blobs >= 4, `read through blob(): ${store.blobs}`);
    assert.equal(
      await outcome(() => loadCheckpoint({ store, key: "absent.ckpt" })),
      await outcome(() => loadCheckpoint({ store: new MemoryStore(), key: "absent.ckpt" })),
    );
  } finally {
    restore();
  }
});

Deno.test("a damaged Blob fails with the error its bytes give from a stream: flipped bytes, truncations, trailing bytes", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  // Bytes outside the tensor bodies (headers, heads, padding, digests, index, footer: one in
  // seven, every field hit), and some inside each body.
  const bodies: [number, number][] = [];
  for (const t of input.tensors) {
    const raw = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    const at = bytes.findIndex((_, i) => i % 64 === 0 && raw.every((b, j) => j > 64 || bytes[i + j] === b));
    bodies.push([at, at + raw.byteLength]);
  }
  const inBody = (i: number) => bodies.some(([a, b]) => i >= a && i < b);
  const flips = [...bytes.keys()].filter((i) => inBody(i) ? i % 99_991 === 0 : i % 7 === 0);
  const cuts = [
    0,
    8,
    16,
    100,
    ...bodies.flatMap(([a, b]) => [a - 1, a, a + 1, b - 1, b, b + 31, b + 32]),
    bytes.length - 1,
  ];
  const damaged = [
    ...flips.map((i) => {
      const bad = bytes.slice();
      bad[i]! ^= 0x40;
      return [`flip at ${i}`, bad] as const;
    }),
    ...cuts.map((n) => [`cut to ${n}`, bytes.slice(0, n)] as const),
    [`trailing byte`, new Uint8Array([...bytes, 0])] as const,
  ];
  for (const web of [true, false]) {
    if (web) spyWeb();
    try {
      for (const [what, bad] of damaged) {
        const expected = await outcome(() => loadCheckpoint(bad));
        assert.notEqual(expected, "no error", what);
        const got = await outcome(() => loadCheckpoint(new Blob([bad as Uint8Array<ArrayBuffer>])));
        assert.equal(got, expected, `${what}${web ? " (WebCrypto)" : ""}`);
      }
    } finally {
      restore();
    }
  }
});

Deno.test("an index that lies (its own digest right) only changes how a Blob is read: the stream's error, caps kept", async () => {
  const W = { name: "w", dtype: "float32", shape: [MiB / 4], group: "params" };
  const body = new Uint8Array(MiB).map((_, i) => i & 255);
  const records = [meta(), tensor(W, body), tensor({ ...W, name: "v", shape: [2] }, new Uint8Array(8))];
  const good = buildRaw({ records });
  const entries = (length: number, offset = 0) =>
    JSON.stringify({
      tensors: [
        { name: "w", dtype: "float32", shape: [MiB / 4], group: "params", offset: 100 + offset, length },
        { name: "v", dtype: "float32", shape: [2], group: "params", offset: 12, length: 4 * MiB },
      ],
    });
  const lies = [
    buildRaw({ records, index: entries(good.length * 4) }), // longer than the file
    buildRaw({ records, index: entries(MiB + 200, 64) }), // a piece that cuts the body
    buildRaw({ records, index: entries(MiB + 200, -60) }),
    buildRaw({ records, index: '{"tensors":[]}' }),
  ];
  for (const bad of lies) {
    const expected = await outcome(() => loadCheckpoint(bad));
    assert.match(expected, /SyntaxError: .*index/);
    assert.equal(await outcome(() => loadCheckpoint(new Blob([bad as Uint8Array<ArrayBuffer>]))), expected);
  }
  for (const limits of [{ maxTensorBytes: 4 }, { maxHeaderBytes: 8 }, { maxTensors: 1 }]) {
    assert.equal(
      await outcome(() => loadCheckpoint(new Blob([good as Uint8Array<ArrayBuffer>]), limits)),
      await outcome(() => loadCheckpoint(good, limits)),
      JSON.stringify(limits),
    );
  }
});

Deno.test("readPieces: whole records together up to 16 MiB, cut just before a record, never past the file", () => {
  let next = 64;
  const record = (length: number, shape = [length - 160]) => {
    const e = { name: `t${next}`, dtype: "uint8" as const, shape, group: "params", offset: next, length };
    next += length;
    return e;
  };
  const entries = [
    record(3 * MiB + 5),
    record(40),
    record(6 * MiB),
    record(9 * MiB + 3),
    record(20 * MiB),
    record(100),
  ];
  const size = next + 500; // the index and the footer
  const ends = readPieces(size, entries);
  assert.equal(ends.at(-1), size);
  assert.ok(ends.every((x, i) => i === 0 || x > ends[i - 1]!));
  const starts = [0, ...ends.slice(0, -1)];
  for (const e of entries) {
    const i = starts.findIndex((s, k) => s <= e.offset && ends[k]! >= e.offset + e.length - 32);
    assert.ok(i >= 0, `record at ${e.offset} lies in one piece`);
    assert.equal(starts[i]! % 8, 0);
  }
  // Grouped: the first three records in one piece, then the 9 MiB one, then the 20 MiB one alone.
  assert.equal(ends.length, 4, `${ends}`);
  assert.ok(ends.every((x, i) => x - starts[i]! <= 16 * MiB || x - starts[i]! <= 20 * MiB + 1024));
  // Without an index, 4 MiB pieces; a length over what the shape allows is not trusted.
  assert.deepEqual(readPieces(10 * MiB), [4 * MiB, 8 * MiB, 10 * MiB]);
  next = 64;
  const lying = [record(30 * MiB, [4])];
  assert.deepEqual(readPieces(40 * MiB, lying), [4, 8, 12, 16, 20, 24, 28, 32, 36, 40].map((n) => n * MiB));
  assert.deepEqual(readPieces(0), []);
});
