// Shared test helpers: sample tensors of every dtype with edge values, a seeded PRNG, the three
// ways of feeding a stream, and a bit-for-bit comparison.
import assert from "node:assert/strict";
import { bytesOf } from "../src/format/dtype.ts";
import type { Checkpoint, CheckpointInput, DType, Tensor, TensorData, TensorInput } from "../src/format/types.ts";
import { DTYPES } from "../src/format/dtype.ts";

/** mulberry32: a small seeded PRNG, so failures reproduce. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Values, then raw bit patterns written through an integer view (spreading NaNs would lose payloads). */
function f32With(values: number[], bits: number[]): Float32Array {
  const a = new Float32Array(values.length + bits.length);
  a.set(values);
  new Uint32Array(a.buffer).set(bits, values.length);
  return a;
}

function f64With(values: number[], bits: bigint[]): Float64Array {
  const a = new Float64Array(values.length + bits.length);
  a.set(values);
  new BigUint64Array(a.buffer).set(bits, values.length);
  return a;
}

/** One tensor per dtype, holding the values that break naive codecs. */
export function edgeTensors(): TensorInput[] {
  return [
    {
      name: "f32",
      dtype: "float32",
      shape: [3, 4],
      data: f32With([
        0,
        -0,
        NaN,
        Infinity,
        -Infinity,
        1e-45, // smallest subnormal
        3.4028234663852886e38,
        0.1,
        -1.5,
        1.1754942106924411e-38, // largest subnormal
      ], [0x7fc00001, 0xffbfffff]), // NaNs with payloads (quiet, negative)
    },
    {
      name: "f64",
      dtype: "float64",
      shape: [9],
      data: f64With(
        [0, -0, Number.MIN_VALUE, Number.MAX_VALUE, 0.1 + 0.2, -Infinity],
        [0x7ff8000000000001n, 0xfff0000000000001n, 0x7ff8000000000000n],
      ),
    },
    {
      name: "f16",
      dtype: "float16",
      shape: [2, 4],
      data: new Uint16Array([0x0000, 0x8000, 0x0001, 0x03ff, 0x7bff, 0x7c00, 0x7e00, 0x7d01]),
      group: "buffers",
    },
    {
      name: "bf16",
      dtype: "bfloat16",
      shape: [6],
      data: new Uint16Array([0x3f80, 0x8000, 0x0001, 0x7f80, 0x7fc0, 0xffc1]),
    },
    { name: "i8", dtype: "int8", shape: [3], data: new Int8Array([-128, 0, 127]) },
    { name: "u8", dtype: "uint8", shape: [3], data: new Uint8Array([0, 1, 255]) },
    { name: "i16", dtype: "int16", shape: [2], data: new Int16Array([-32768, 32767]) },
    { name: "u16", dtype: "uint16", shape: [2], data: new Uint16Array([0, 65535]) },
    { name: "i32", dtype: "int32", shape: [2], data: new Int32Array([-2147483648, 2147483647]) },
    { name: "u32", dtype: "uint32", shape: [2], data: new Uint32Array([0, 4294967295]) },
    {
      name: "optimizer/iter",
      dtype: "int64",
      shape: [4],
      data: new BigInt64Array([-(2n ** 63n), 2n ** 63n - 1n, 2n ** 53n + 1n, 0n]),
      group: "optimizer",
    },
    { name: "u64", dtype: "uint64", shape: [2], data: new BigUint64Array([2n ** 64n - 1n, 2n ** 53n + 1n]) },
    { name: "mask", dtype: "bool", shape: [2, 2], data: new Uint8Array([1, 0, 0, 1]) },
    { name: "scalar", dtype: "float32", shape: [], data: new Float32Array([42]) },
    { name: "empty", dtype: "float32", shape: [0, 5], data: new Float32Array(0) },
    { name: "ünïcødé/名前 🙂", dtype: "int32", shape: [1], data: new Int32Array([7]) },
  ];
}

/** A checkpoint with every dtype and rich metadata. */
export function edgeCheckpoint(): CheckpointInput {
  return {
    metadata: {
      step: 1234,
      epoch: 3,
      createdAt: "2026-12-02T10:00:00.000Z",
      metrics: { loss: 0.125, nanLoss: NaN, inf: Infinity, negZero: -0 },
      custom: { lr: 0.001, tags: ["a", "b"], nested: { ok: true, none: null } },
    },
    tensors: edgeTensors(),
  };
}

const DTYPE_LIST = Object.keys(DTYPES) as DType[];

/** A random checkpoint: random dtypes, shapes (zero-size and rank 0 included), names and bits. */
export function randomCheckpoint(seed: number): CheckpointInput {
  const rand = prng(seed);
  const n = Math.floor(rand() * 6);
  const tensors: TensorInput[] = [];
  for (let i = 0; i < n; i++) {
    const dtype = DTYPE_LIST[Math.floor(rand() * DTYPE_LIST.length)]!;
    const rank = Math.floor(rand() * 4);
    const shape = Array.from({ length: rank }, () => Math.floor(rand() * (rank > 2 ? 4 : 40)));
    const count = shape.reduce((a, b) => a * b, 1);
    const info = DTYPES[dtype];
    const data = new info.array(count);
    const bytes = bytesOf(data);
    for (let j = 0; j < bytes.length; j++) bytes[j] = Math.floor(rand() * 256);
    if (dtype === "bool") { for (let j = 0; j < count; j++) data[j] = bytes[j]! & 1; }
    tensors.push({
      name: `layer${i}/${rand().toString(36).slice(2, 6)}`,
      dtype,
      shape,
      data,
      group: rand() < 0.2 ? "optimizer" : "params",
    });
  }
  return { metadata: { step: Math.floor(rand() * 1e6), metrics: { loss: rand() } }, tensors };
}

/** Collects a byte stream into one array. */
export async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** The same bytes fed three ways: whole, one byte per chunk, and split at random points. */
export function feeds(bytes: Uint8Array, seed = 1): { name: string; stream: () => ReadableStream<Uint8Array> }[] {
  const rand = prng(seed);
  const cuts: number[] = [];
  for (let i = 0; i < bytes.length; i += 1 + Math.floor(rand() * 97)) cuts.push(i);
  cuts.push(bytes.length);
  return [
    { name: "whole", stream: () => ReadableStream.from([bytes.slice()]) },
    {
      name: "one byte per chunk",
      stream: () =>
        ReadableStream.from((function* () {
          for (let i = 0; i < bytes.length; i++) yield bytes.slice(i, i + 1);
        })()),
    },
    {
      name: "random splits",
      stream: () =>
        ReadableStream.from((function* () {
          for (let i = 0; i + 1 < cuts.length; i++) yield bytes.slice(cuts[i], cuts[i + 1]);
        })()),
    },
  ];
}

function rawBytes(data: TensorData): Uint8Array {
  return bytesOf(data);
}

/**
 * Asserts two byte arrays are equal, naming the first byte that differs. For large arrays: on a
 * mismatch, `assert.deepEqual` spends minutes building a diff of every element.
 */
export function assertSameBytes(actual: Uint8Array, expected: Uint8Array, what: string): void {
  const n = Math.min(actual.byteLength, expected.byteLength);
  let i = 0;
  while (i < n && actual[i] === expected[i]) i++;
  if (i < n) assert.fail(`${what}: byte ${i} is ${actual[i]}, expected ${expected[i]}`);
  if (actual.byteLength !== expected.byteLength) {
    assert.fail(`${what}: ${actual.byteLength} bytes, expected ${expected.byteLength}`);
  }
}

/** Asserts two tensor lists are equal: names, dtypes, shapes, groups, and data bit for bit. */
export function assertSameTensors(actual: Tensor[], expected: TensorInput[]): void {
  assert.equal(actual.length, expected.length, "tensor count");
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    assert.equal(a.name, e.name);
    assert.equal(a.dtype, e.dtype, `dtype of ${e.name}`);
    assert.deepEqual([...a.shape], [...e.shape], `shape of ${e.name}`);
    assert.equal(a.group, e.group ?? "params", `group of ${e.name}`);
    assert.equal(a.data.constructor, e.data.constructor, `array type of ${e.name}`);
    assertSameBytes(rawBytes(a.data), rawBytes(e.data), `bits of ${e.name}`);
  }
}

/** Asserts a loaded checkpoint equals its input, metadata and tensors, bit for bit. */
export function assertSameCheckpoint(actual: Checkpoint, expected: CheckpointInput): void {
  assert.deepEqual(actual.metadata, expected.metadata);
  assertSameTensors(actual.tensors, expected.tensors as TensorInput[]);
}

/** Runs `fn` with a new temporary directory, removed afterwards. */
export async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Runs `fn` with the path of a new temporary file holding `bytes`, removed afterwards. */
export async function withFile<T>(bytes: Uint8Array, fn: (path: string) => Promise<T>): Promise<T> {
  const path = await Deno.makeTempFile({ suffix: ".ckpt" });
  try {
    await Deno.writeFile(path, bytes);
    return await fn(path);
  } finally {
    await Deno.remove(path);
  }
}

/** `bytes` as a stream of copies of `size` bytes each (the last one shorter). */
export function chunked(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.byteLength) return c.close();
      c.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  });
}

/**
 * Runs the Deno script at `path` in a child process with `flags` (before the script: permissions)
 * and `args` (after it) and gives the one JSON line it printed; a child that fails fails the test
 * with its stderr.
 */
export async function jsonChild<T>(path: string, flags: string[], args: string[] = []): Promise<T> {
  const out = await new Deno.Command(Deno.execPath(), { args: ["run", ...flags, path, ...args], stderr: "piped" })
    .output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout).trim()) as T;
}

/** An `assert.rejects`/`assert.throws` check: a `TypeError` whose message matches `pattern`. */
export function typeError(pattern: RegExp): (e: unknown) => boolean {
  return (e: unknown) => {
    if (!(e instanceof TypeError)) throw new Error(`expected a TypeError, got ${String(e)}`);
    if (!pattern.test(e.message)) throw new Error(`${JSON.stringify(e.message)} does not match ${pattern}`);
    return true;
  };
}

/**
 * Each line of a child's output as it arrives (the last one also when it has no newline), so a
 * test can act on a line (send a signal) while the child runs.
 */
export async function* linesOf(stream: ReadableStream<Uint8Array<ArrayBuffer>>): AsyncGenerator<string> {
  let pending = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    pending += chunk;
    const parts = pending.split("\n");
    pending = parts.pop()!;
    yield* parts;
  }
  if (pending) yield pending;
}

/**
 * Writes `dir/import_map.json`, which gives a script written for the npm package (tests/node's
 * children, docs/npm.md's loop) this checkout as `@ckpt/ckpt` and `@ckpt/ckpt/tfjs`, beside
 * the tools' imports (tools.imports.json); run it with `deno run --no-lock --import-map=<that file>`. Returns its path.
 */
export async function packageImportMap(dir: string): Promise<string> {
  const root = new URL("../", import.meta.url);
  // The tools' import map: a user's project imports `@tensorflow/tfjs`, which deno.json's imports
  // (the library and the default demos) no longer hold.
  const imports = JSON.parse(await Deno.readTextFile(new URL("tools.imports.json", root))).imports;
  imports["@ckpt/ckpt"] = new URL("mod.ts", root).href;
  imports["@ckpt/ckpt/tfjs"] = new URL("src/tfjs/mod.ts", root).href;
  const path = `${dir}/import_map.json`;
  await Deno.writeTextFile(path, JSON.stringify({ imports }));
  return path;
}
