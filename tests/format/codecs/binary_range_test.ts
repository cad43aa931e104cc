// A verify (bodies hashed, not kept) of a local file hands every other large body to a second
// thread that reads it from the file itself (src/storage/_range_hash.ts): tensors still come out
// in order, each only once its digest matched, and a fault on either thread is named.
import assert from "node:assert/strict";
import {
  ChecksumMismatchError,
  loadCheckpoint,
  saveCheckpoint,
  type Tensor,
  type TensorInput,
  verifyCheckpoint,
} from "../../../mod.ts";
import { assertSameTensors } from "../../_util.ts";
import type { RangeHasher } from "../../../src/format/_byte_reader.ts";
import { decodeRecords, setRangeHashForTests } from "../../../src/format/codecs/binary.ts";
import { settled } from "../../../src/format/_pair.ts";
import { sha256 } from "../../../src/format/_hash.ts";
import { fileReader } from "../../../src/storage/_file_io.ts";
import { FileRangeHasher } from "../../../src/storage/_range_hash.ts";

const MiB = 2 ** 20;

/** Six 1 MiB float32 tensors with a 2 MiB bool between the third and fourth, and a small one. */
function tensors(): TensorInput[] {
  const f = (i: number): TensorInput => {
    const data = new Float32Array(MiB / 4).map((_, k) => (k + i * MiB) / 7); // no two tensors share a run
    return { name: `w${i}`, dtype: "float32", shape: [data.length], data };
  };
  const mask = new Uint8Array(2 * MiB).map((_, k) => k & 1);
  return [
    f(0),
    f(1),
    f(2),
    { name: "mask", dtype: "bool", shape: [mask.length], data: mask },
    f(3),
    f(4),
    f(5),
    { name: "b", dtype: "int32", shape: [3], data: new Int32Array([1, 2, 3]) },
  ];
}

/** Where `t`'s bytes begin in `file` (found by its first 64 bytes). */
function bodyOffset(file: Uint8Array, t: TensorInput): number {
  const head = new Uint8Array(t.data.buffer, 0, 64);
  const at = file.findIndex((_, i) => head.every((b, k) => file[i + k] === b));
  assert.ok(at > 0);
  return at;
}

async function withFile(fn: (path: string, ts: TensorInput[], digest: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  setRangeHashForTests({ fileMin: 0, waitReady: true });
  try {
    const path = `${dir}/r.ckpt`;
    const ts = tensors();
    const saved = await saveCheckpoint(path, { metadata: { step: 2 }, tensors: ts });
    await fn(path, ts, saved.digest);
  } finally {
    setRangeHashForTests("restore");
    await Deno.remove(dir, { recursive: true });
  }
}

/** decodeRecords over the file, counting the ranges the second thread hashed. */
async function decodeCounting(
  path: string,
  options: { parallelHash?: boolean; reuseBuffers?: boolean } = {},
  bodies: "keep" | "hash" = "hash",
): Promise<{ names: string[]; ranges: number; digest: string; tensors: Tensor[] }> {
  using file = await Deno.open(path);
  const reader = fileReader(file, path);
  let ranges = 0;
  const start = reader.rangeHasher!;
  reader.rangeHasher = async () => {
    const real = (await start()) as RangeHasher;
    return {
      get ready() {
        return real.ready;
      },
      up: real.up,
      digest(prefix: Uint8Array, offset: number, length: number) {
        ranges++;
        return real.digest(prefix, offset, length);
      },
      close: () => real.close(),
    };
  };
  const digest = settled<string>();
  const names: string[] = [];
  const tensors: Tensor[] = [];
  for await (const r of decodeRecords(reader, options, undefined, digest, bodies)) {
    if (r.type === "tensor") {
      if (bodies === "hash") assert.equal(r.tensor.data.length, 0, "a verify keeps no data");
      else if (!options.reuseBuffers) tensors.push(r.tensor);
      names.push(r.tensor.name);
    }
  }
  return { names, ranges, digest: await digest.promise, tensors };
}

Deno.test("a verify hands every other large tensor to the range thread and hands all out in order", async () => {
  await withFile(async (path, ts, digest) => {
    const got = await decodeCounting(path);
    assert.deepEqual(got.names, ts.map((t) => t.name));
    // w0 there, w1 here (handed out after w0), w2 there, the bool here (its values are checked
    // here), w3 there, w4 here, w5 there, the small tensor here: whenever the other thread is
    // idle, the next large body goes to it.
    assert.equal(got.ranges, 4);
    assert.equal(got.digest, digest);
    const one = await decodeCounting(path, { parallelHash: false });
    assert.deepEqual([one.names, one.ranges, one.digest], [got.names, 0, digest]);
    const summary = await verifyCheckpoint(path);
    assert.equal(summary.digest, digest);
    assert.deepEqual(summary.tensors.map((t) => t.byteLength), ts.map((t) => t.data.byteLength));
  });
});

Deno.test("a verify names a tensor corrupted on either thread, the first in the file first", async () => {
  await withFile(async (path, ts) => {
    const good = await Deno.readFile(path);
    // By index in tensors(): w0 (there), w1 (here), w2 and w3 (there, there), w4 (here), w5 (there).
    for (const bad of [[0], [1], [2, 4], [4, 5], [5], [6]]) {
      const bytes = good.slice();
      for (const i of bad) bytes[bodyOffset(good, ts[i]!) + 1000]! ^= 4;
      await Deno.writeFile(path, bytes);
      await assert.rejects(() => verifyCheckpoint(path), (e: Error) => {
        assert.ok(e instanceof ChecksumMismatchError, `${e.constructor.name}: ${e.message}`);
        assert.match(e.message, new RegExp(`tensor "${ts[bad[0]!]!.name}"`), `corrupted ${bad}`);
        return true;
      });
    }
  });
});

Deno.test("a verify of a file cut inside a tensor the range thread would take says where it ends", async () => {
  await withFile(async (path, ts) => {
    const good = await Deno.readFile(path);
    const cut = bodyOffset(good, ts[4]!) + 5000; // inside w3, which goes to the range thread
    await Deno.writeFile(path, good.subarray(0, cut));
    await assert.rejects(() => verifyCheckpoint(path), new RegExp(`truncated, stream ends at offset ${cut}`));
  });
});

Deno.test("FileRangeHasher hashes prefix and range from the file, and refuses a file that is not the reader's", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/f.bin`;
    const bytes = new Uint8Array(3 * MiB + 7).map((_, i) => (i * 31) & 0xff);
    await Deno.writeFile(path, bytes);
    using file = await Deno.open(path);
    const { dev, ino } = await file.stat();
    const h = new FileRangeHasher(path, { dev, ino });
    try {
      assert.equal(await h.up, true);
      const prefix = new Uint8Array([1, 2, 3]);
      const d = await h.digest(prefix, 1000, 2 * MiB + 5);
      assert.deepEqual(d, sha256().update(prefix).update(bytes.subarray(1000, 1000 + 2 * MiB + 5)).digest());
      await assert.rejects(
        () => h.digest(prefix, 3 * MiB, MiB),
        /file ended at offset 3145735 with 1048569 bytes missing/,
      );
    } finally {
      h.close();
    }
    // Another file now at that path (an atomic save replaced it): never used.
    await Deno.writeFile(`${path}.new`, bytes);
    await Deno.rename(`${path}.new`, path);
    const other = new FileRangeHasher(path, { dev, ino });
    assert.equal(await other.up, false);
    assert.equal(other.ready, false);
    await assert.rejects(() => other.digest(new Uint8Array(), 0, 1), /not ready/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a load with parallelHash reads every tensor here while the range thread hashes every other one: bit for bit", async () => {
  await withFile(async (path, ts, digest) => {
    // Not by default: a load keeps to one thread unless parallelHash is true.
    assert.equal((await decodeCounting(path, {}, "keep")).ranges, 0);
    const got = await decodeCounting(path, { parallelHash: true }, "keep");
    assert.equal(got.ranges, 4);
    assert.equal(got.digest, digest);
    assertSameTensors(got.tensors, ts);
    // Not with reuseBuffers: a buffer overwritten by the next tensor cannot wait for the other thread.
    assert.equal((await decodeCounting(path, { reuseBuffers: true, parallelHash: true }, "keep")).ranges, 0);
    assertSameTensors((await loadCheckpoint(path, { parallelHash: true })).tensors, ts);
    // A tensor corrupted where the other thread hashes it, and one where this thread does.
    const good = await Deno.readFile(path);
    for (const i of [2, 5]) {
      const bytes = good.slice();
      bytes[bodyOffset(good, ts[i]!) + 77]! ^= 2;
      await Deno.writeFile(path, bytes);
      await assert.rejects(
        () => loadCheckpoint(path, { parallelHash: true }),
        new RegExp(`Checksum mismatch for tensor "${ts[i]!.name}"`),
      );
    }
  });
});
