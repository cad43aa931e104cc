// loadCheckpoint's `into`: a restore into buffers the caller already has, bit for bit, by every
// read path (a local binary file with one thread, a hash thread, a range hasher and, where the
// test runs with FFI, the native thread; a stream; safetensors; byte-grouped bodies; `only`).
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  ChecksumMismatchError,
  loadCheckpoint,
  safetensorsCodec,
  saveCheckpoint,
  type TensorInput,
} from "../../mod.ts";
import { setRangeHashForTests } from "../../src/format/codecs/binary.ts";

/** Tensors of several dtypes and sizes (two above the 1 MiB from which bodies go to other threads). */
function tensors(): TensorInput[] {
  const big = new Float32Array(2 ** 19 + 3).map((_, i) => Math.sin(i) * 1e-3);
  const big2 = new Float32Array(2 ** 19).map((_, i) => i % 977);
  return [
    { name: "dense/kernel", dtype: "float32", shape: [big.length], data: big },
    { name: "dense/bias", dtype: "float32", shape: [3], data: new Float32Array([1.5, -2, 3e-9]) },
    { name: "conv/kernel", dtype: "float32", shape: [big2.length], data: big2 },
    { name: "step", dtype: "int32", shape: [2], data: new Int32Array([7, -1]) },
    { name: "mask", dtype: "bool", shape: [3], data: new Uint8Array([1, 0, 1]) },
    { name: "iterations", dtype: "int64", shape: [], data: new BigInt64Array([123n]) },
  ];
}

/** Buffers of the right sizes, filled with garbage (a model's weights before the restore). */
function buffers(names: string[]): Map<string, Float32Array | Int32Array | Uint8Array | BigInt64Array> {
  const into = new Map<string, Float32Array | Int32Array | Uint8Array | BigInt64Array>();
  for (const t of tensors()) {
    if (!names.includes(t.name)) continue;
    const data = t.data as Float32Array | Int32Array | Uint8Array | BigInt64Array;
    const mine = new (data.constructor as new (n: number) => typeof data)(data.length);
    new Uint8Array(mine.buffer).fill(0xa5);
    into.set(t.name, mine);
  }
  return into;
}

const bytes = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

async function withFile(
  fn: (path: string, dir: string) => Promise<void>,
  options: Parameters<typeof saveCheckpoint>[2] = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-into-" });
  try {
    const path = join(dir, "c.ckpt");
    await saveCheckpoint(path, { metadata: { step: 3 }, tensors: tensors() }, options);
    await fn(path, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Checks every tensor bit for bit, and that the named ones are views of the given buffers. */
function assertRestored(loaded: Awaited<ReturnType<typeof loadCheckpoint>>, into: Map<string, ArrayBufferView>) {
  const want = new Map(tensors().map((t) => [t.name, t]));
  assert.equal(loaded.tensors.length, want.size);
  for (const t of loaded.tensors) {
    assert.deepEqual(bytes(t.data), bytes(want.get(t.name)!.data), t.name);
    const mine = into.get(t.name);
    if (mine) {
      assert.equal(t.data.buffer, mine.buffer, `${t.name} is a view of the given buffer`);
      assert.equal(t.data.byteOffset, mine.byteOffset);
      assert.deepEqual(bytes(mine), bytes(want.get(t.name)!.data), `${t.name}: the given buffer holds the tensor`);
    } else {
      assert.ok(![...into.values()].some((b) => b.buffer === t.data.buffer), `${t.name} is in fresh memory`);
    }
  }
}

const NAMED = ["dense/kernel", "dense/bias", "step", "mask", "iterations"]; // conv/kernel left to fresh memory

for (const parallelHash of [false, true, undefined]) {
  Deno.test(`loadCheckpoint into given buffers restores a local binary file bit for bit (parallelHash: ${parallelHash})`, async () => {
    await withFile(async (path) => {
      const into = buffers(NAMED);
      assertRestored(await loadCheckpoint(path, { into, parallelHash }), into);
    });
  });
}

Deno.test("loadCheckpoint into given buffers beside a range hasher restores bit for bit", async () => {
  setRangeHashForTests({ fileMin: 0, waitReady: true });
  try {
    await withFile(async (path) => {
      const into = buffers(NAMED);
      assertRestored(await loadCheckpoint(path, { into }), into);
    });
  } finally {
    setRangeHashForTests("restore");
  }
});

Deno.test("loadCheckpoint into given buffers restores from a stream, a safetensors file, byte-grouped bodies and with only", async () => {
  await withFile(async (path) => {
    const into = buffers(NAMED);
    const f = await Deno.open(path);
    assertRestored(await loadCheckpoint(f.readable, { into }), into);
  });
  await withFile(async (path) => {
    const into = buffers(NAMED);
    assertRestored(await loadCheckpoint(path, { into }), into);
  }, { codec: safetensorsCodec });
  await withFile(async (path) => {
    const into = buffers(NAMED);
    assertRestored(await loadCheckpoint(path, { into }), into);
  }, { compression: "bytegroup" });
  await withFile(async (path) => {
    const into = buffers(["dense/kernel"]);
    const some = await loadCheckpoint(path, { only: ["dense/kernel", "step"], into });
    assert.deepEqual(some.tensors.map((t) => t.name), ["dense/kernel", "step"]);
    assert.equal(some.tensors[0]!.data.buffer, into.get("dense/kernel")!.buffer);
    assert.deepEqual(bytes(into.get("dense/kernel")!), bytes(tensors()[0]!.data));
  });
});

Deno.test("loadCheckpoint into rejects a buffer of the wrong size, a name no tensor has, buffers that overlap, and what is not a Map", async () => {
  await withFile(async (path) => {
    await assert.rejects(
      loadCheckpoint(path, { into: new Map([["dense/bias", new Float32Array(4)]]) }),
      (e: unknown) =>
        e instanceof RangeError &&
        e.message ===
          'Cannot load checkpoint into the given buffers: tensor "dense/bias" has 12 bytes, the buffer given for it 16',
    );
    await assert.rejects(
      loadCheckpoint(path, { into: new Map([["dense/bais", new Float32Array(3)]]) }),
      /^RangeError: Cannot load checkpoint into the given buffers: no tensor named "dense\/bais" among those loaded$/,
    );
    await assert.rejects(
      loadCheckpoint(path, { only: ["step"], into: new Map([["dense/bias", new Float32Array(3)]]) }),
      /no tensor named "dense\/bias" among those loaded/,
    );
    await assert.rejects(
      // @ts-expect-error: a plain object is not a Map
      loadCheckpoint(path, { into: { "dense/bias": new Float32Array(3) } }),
      /^TypeError: Invalid into option: expected a Map from tensor names to typed arrays$/,
    );
    await assert.rejects(
      // @ts-expect-error: a number is not a typed array
      loadCheckpoint(path, { into: new Map([["dense/bias", 3]]) }),
      /^TypeError: Invalid into option: the entry "dense\/bias" is not a typed array or DataView$/,
    );
    const shared = new Float32Array(4);
    await assert.rejects(
      loadCheckpoint(path, {
        into: new Map([["dense/bias", shared.subarray(0, 3)], ["step", new Float32Array(shared.buffer, 8, 2)]]),
      }),
      /^TypeError: Invalid into option: the entries "dense\/bias" and "step" share memory$/,
    );
  });
});

Deno.test("loadCheckpoint into a given buffer still fails on a flipped bit, naming the tensor", async () => {
  await withFile(async (path) => {
    const file = await Deno.readFile(path);
    const at = file.byteLength >> 2; // inside dense/kernel's body
    file[at]! ^= 0x10;
    await Deno.writeFile(path, file);
    const into = buffers(NAMED);
    await assert.rejects(
      loadCheckpoint(path, { into }),
      (e: unknown) => e instanceof ChecksumMismatchError && /tensor "dense\/kernel"/.test(e.message),
    );
    // From a local binary file the body was read straight into the given buffer (no fresh memory):
    // so it holds the bytes read, the flipped one included, as the option's doc says.
    const mine = bytes(into.get("dense/kernel")!);
    const want = bytes(tensors()[0]!.data);
    const differ = mine.reduce((n, b, i) => n + (b === want[i] ? 0 : 1), 0);
    assert.equal(differ, 1, "the given buffer holds the file's bytes, one bit off");
  });
});
