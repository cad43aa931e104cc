// The binary encoder in a page: a raw tensor of 1 MiB or more with room reserved in front of it
// (tfjs snapshot's buffers) is hashed with one WebCrypto call over its record, laid out whole in
// that room, with no copy of the body; one without room (a caller's own array) whose record is at
// most 4 MiB + 64 KiB is hashed with one WebCrypto call over a copy of its record; other tensors
// keep the incremental hash. Deno has no page,
// so Deno's own `crypto.subtle.digest` stands in for the page's (the browser suites, tests/web,
// save through the real one). Every case must give the bytes of a save without WebCrypto.
import assert from "node:assert/strict";
import { type CheckpointInput, encodeCheckpoint, loadCheckpoint, type TensorInput } from "../../../mod.ts";
import { setNativeDigestForTests, setWebDigestForTests } from "../../../src/format/_hash.ts";
import { headroomOf, reserveHeadroom } from "../../../src/format/_headroom.ts";
import { prefixRoom } from "../../../src/format/codecs/binary.ts";
import { assertSameTensors, collect, withFile } from "../../_util.ts";

const MiB = 2 ** 20;

function values(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  for (let j = 0; j < n; j++) a[j] = Math.fround((((j * 2654435761) % 1000) - 500) * 1e-5 + seed);
  return a;
}

/** Tensors over and under 1 MiB, packed in one buffer as snapshot packs them (room in front of each when `room`). */
function packed(room: boolean): CheckpointInput & { tensors: TensorInput[] } {
  const sizes = [MiB / 4, 3, MiB / 4 + 5, MiB / 2];
  const descs = sizes.map((n, i) => ({ name: `layer${i}/kernel`, dtype: "float32" as const, shape: [n] }));
  const rooms = descs.map((d) => (room ? prefixRoom(d) : 0));
  let total = 0;
  const offsets = descs.map((d, i) => {
    const at = total + rooms[i]!;
    total = at + d.shape[0]! * 4;
    return at;
  });
  const buffer = new ArrayBuffer(total);
  // What lies in the room before the encoder writes there must not matter.
  new Uint8Array(buffer).fill(0xa5);
  const tensors = descs.map((d, i) => {
    const data = new Float32Array(buffer, offsets[i]!, d.shape[0]!);
    data.set(values(d.shape[0]!, i));
    if (room) reserveHeadroom(data, rooms[i]!);
    return { ...d, data };
  });
  return { metadata: { step: 9 }, tensors };
}

/** Installs Deno's WebCrypto as the page's (no native thread); returns what each call was given. */
function spyWeb(fail = false): Uint8Array[] {
  const calls: Uint8Array[] = [];
  setNativeDigestForTests(null);
  setWebDigestForTests(async (bytes) => {
    calls.push(bytes.slice(0, 16));
    if (fail) throw new Error("no WebCrypto today");
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  });
  return calls;
}

function restore(): void {
  setWebDigestForTests("restore");
  setNativeDigestForTests("restore");
}

Deno.test("a page's save hashes a raw tensor with room in front with one WebCrypto call over its record, bit for bit", async () => {
  const expected = await collect(encodeCheckpoint(packed(false)));
  const input = packed(true);
  const calls = spyWeb();
  try {
    const bytes = await collect(encodeCheckpoint(input));
    assert.deepEqual(bytes, expected);
    // The tensors of 1 MiB or more: layer0 (1 MiB), layer2, layer3; each call starts at its record's kind byte.
    assert.equal(calls.length, 3);
    for (const head of calls) assert.equal(head[0], 2);
    // The tensors themselves are untouched.
    for (const [i, t] of input.tensors.entries()) assert.deepEqual(t.data, values(t.shape[0]!, i));
    await withFile(bytes, async (path) => assertSameTensors((await loadCheckpoint(path)).tensors, input.tensors));
  } finally {
    restore();
  }
});

Deno.test("a page's save: no room in front, or too little, hashes a copy of each record up to 4 MiB + 64 KiB with one WebCrypto call; a failed call gives the same bytes", async () => {
  const expected = await collect(encodeCheckpoint(packed(false)));
  let calls = spyWeb();
  try {
    const input = packed(false);
    assert.deepEqual(await collect(encodeCheckpoint(input)), expected);
    // The same three records as with room, each copied whole (it starts at its kind byte).
    assert.equal(calls.length, 3);
    for (const head of calls) assert.equal(head[0], 2);
    for (const [i, t] of input.tensors.entries()) assert.deepEqual(t.data, values(t.shape[0]!, i));
    const small = packed(false);
    const t = small.tensors[3]!;
    // Room, but less than the prefix needs.
    reserveHeadroom(t.data, 8);
    assert.equal(headroomOf(t.data), 8);
    calls.length = 0;
    assert.deepEqual(await collect(encodeCheckpoint(small)), expected);
    assert.equal(calls.length, 3);
    calls = spyWeb(true);
    assert.deepEqual(await collect(encodeCheckpoint(packed(true))), expected);
    assert.equal(calls.length, 3);
    calls = spyWeb(true);
    assert.deepEqual(await collect(encodeCheckpoint(packed(false))), expected);
    assert.equal(calls.length, 3);
  } finally {
    restore();
  }
});

Deno.test("a page's save of a caller's arrays: records over 4 MiB + 64 KiB keep the incremental hash, smaller ones share one copy buffer", async () => {
  // 4 MiB (copied), 4 MiB + 64 KiB (its record is over the bound: incremental), 2 MiB (copied).
  const sizes = [MiB, MiB + 16 * 1024, MiB / 2];
  const input = {
    metadata: { step: 3 },
    tensors: sizes.map((n, i) => ({ name: `w${i}`, dtype: "float32" as const, shape: [n], data: values(n, i) })),
  };
  const expected = await collect(encodeCheckpoint(input));
  const given: Uint8Array[] = [];
  setNativeDigestForTests(null);
  // WebCrypto copies its input when called, so the encoder reuses its copy buffer at once.
  setWebDigestForTests(async (bytes) => {
    given.push(bytes);
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  });
  try {
    assert.deepEqual(await collect(encodeCheckpoint(input)), expected);
    // The records of w0 and w2 (a prefix of under 4 KiB, then the body), not w1's.
    assert.equal(given.length, 2);
    for (const [b, n] of [[given[0]!, sizes[0]!], [given[1]!, sizes[2]!]] as const) {
      assert.ok(b.byteLength > n * 4 && b.byteLength < n * 4 + 4096, `${b.byteLength} for a body of ${n * 4}`);
    }
    // Both records lie in the one buffer the first one made, none in a caller's array.
    assert.equal(given[0]!.buffer, given[1]!.buffer);
    assert.ok(given.every((b) => input.tensors.every((t) => t.data.buffer !== b.buffer)));
  } finally {
    restore();
  }
});

Deno.test("reserveHeadroom refuses more room than lies before the view", () => {
  const data = new Float32Array(new ArrayBuffer(64), 16, 4);
  assert.throws(() => reserveHeadroom(data, 17), RangeError);
  assert.throws(() => reserveHeadroom(data, -1), RangeError);
  reserveHeadroom(data, 16);
  assert.equal(headroomOf(data), 16);
});

Deno.test("a save ended early waits for every record hash it started, the next record's included, before it ends", async () => {
  // Two caller's arrays of 1 MiB: the second record's hash starts before the first's digest is
  // written; the save is cancelled right there, and must not end while that hash still runs (a
  // native hash reads the caller's bytes where they lie).
  const tensors = [0, 1].map((i) => ({
    name: `w${i}`,
    dtype: "float32" as const,
    shape: [MiB / 4],
    data: values(MiB / 4, i),
  }));
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  let calls = 0;
  setNativeDigestForTests(null);
  setWebDigestForTests(async (bytes) => {
    const second = ++calls === 2; // counted when called, as the encoder starts it
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
    if (second) await held;
    return digest;
  });
  try {
    const reader = encodeCheckpoint({ metadata: { step: 1 }, tensors }).getReader();
    while (calls < 2) assert.equal((await reader.read()).done, false);
    let ended = false;
    const cancel = reader.cancel().then(() => ended = true);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(ended, false, "the save ended while the second record's hash still ran");
    release();
    await cancel;
    assert.equal(ended, true);
  } finally {
    release();
    restore();
  }
});
