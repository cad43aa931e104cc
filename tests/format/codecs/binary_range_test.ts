// A verify (bodies hashed, not kept) of a local file hands every other large body to a second
// thread that reads it from the file itself (src/storage/_range_hash.ts), decoding it first when
// it is byte-grouped: tensors still come out in order, each only once its digest matched, and a
// fault on either thread is named.
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
import type { EncodedBody, RangeHasher } from "../../../src/format/_byte_reader.ts";
import { decodeRecords, setRangeHashForTests } from "../../../src/format/codecs/binary.ts";
import { settled } from "../../../src/format/_pair.ts";
import { sha256 } from "../../../src/format/_hash.ts";
import { fileReader } from "../../../src/storage/_file_io.ts";
import { FileRangeHasher } from "../../../src/storage/_range_hash.ts";
import { concatBytes } from "../../../src/format/dtype.ts";
import { BINARY_ALIGNMENT } from "../../../src/format/codecs/_binary_layout.ts";
import {
  BYTEGROUP_HEADER_BYTES,
  BYTEGROUP_VERSION,
  encodeByteGroups,
  PLANE_ENTRY_BYTES,
  PLANE_STORED,
} from "../../../src/format/codecs/_bytegroup.ts";

const MiB = 2 ** 20;

/**
 * Six float32 tensors of `mib` MiB with a 2 MiB bool between the third and fourth, and a small
 * one. `grouped`: values like weights (random low bytes), 2 MiB each, so that byte-grouped their
 * mantissa planes are stored as they are and their bodies (about 1.8 MiB) are over the range
 * thread's 1 MiB.
 */
function tensors(grouped = false): TensorInput[] {
  const f = (i: number): TensorInput => {
    const data = grouped
      ? new Float32Array(MiB / 2).map((_, k) => Math.sin(k + i * MiB) / 64)
      : new Float32Array(MiB / 4).map((_, k) => (k + i * MiB) / 7); // no two tensors share a run
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

async function withFile(
  fn: (path: string, ts: TensorInput[], digest: string) => Promise<void>,
  compression: "none" | "bytegroup" = "none",
): Promise<void> {
  const dir = await Deno.makeTempDir();
  setRangeHashForTests({ fileMin: 0, waitReady: true });
  try {
    const path = `${dir}/r.ckpt`;
    const ts = tensors(compression === "bytegroup");
    const saved = await saveCheckpoint(path, { metadata: { step: 2 }, tensors: ts }, { compression });
    await fn(path, ts, saved.digest);
  } finally {
    setRangeHashForTests("restore");
    await Deno.remove(dir, { recursive: true });
  }
}

/** decodeRecords over the file, counting the ranges the second thread hashed and the bodies it decoded. */
async function decodeCounting(
  path: string,
  options: { parallelHash?: boolean; reuseBuffers?: boolean } = {},
  bodies: "keep" | "hash" = "hash",
): Promise<{ names: string[]; ranges: number; decoded: number; digest: string; tensors: Tensor[] }> {
  using file = await Deno.open(path);
  const reader = fileReader(file, path);
  let ranges = 0;
  let decoded = 0;
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
      decode(prefix: Uint8Array, offset: number, length: number, body: EncodedBody) {
        decoded++;
        return real.decode!(prefix, offset, length, body);
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
  return { names, ranges, decoded, digest: await digest.promise, tensors };
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

/** Where byte-grouped `t`'s body begins in `file`: its plane table, the first aligned one after its name. */
function groupedBodyOffset(file: Uint8Array, t: TensorInput): number {
  const name = new TextEncoder().encode(JSON.stringify(t.name));
  const at = file.findIndex((_, i) => name.every((b, k) => file[i + k] === b));
  const table = [BYTEGROUP_VERSION, 4, 0, 0, 0, 0, 0, 0];
  for (let i = Math.ceil(at / BINARY_ALIGNMENT) * BINARY_ALIGNMENT; i < file.byteLength; i += BINARY_ALIGNMENT) {
    if (table.every((b, k) => file[i + k] === b)) return i;
  }
  throw new Error(`no body for ${t.name}`);
}

Deno.test("a verify of a byte-grouped file decodes every other large tensor on the range thread, all handed out in order", async () => {
  await withFile(async (path, ts, digest) => {
    const got = await decodeCounting(path);
    assert.deepEqual(got.names, ts.map((t) => t.name));
    // As for raw bodies: w0 there, w1 here, w2 there, the bool here, w3 there, w4 here, w5 there, b here.
    assert.deepEqual([got.decoded, got.ranges], [4, 0]);
    assert.equal(got.digest, digest);
    const one = await decodeCounting(path, { parallelHash: false });
    assert.deepEqual([one.names, one.decoded, one.digest], [got.names, 0, digest]);
    assert.equal((await verifyCheckpoint(path)).digest, digest);
  }, "bytegroup");
});

Deno.test("a byte-grouped tensor corrupted or malformed on either thread fails the same way as on one", async () => {
  await withFile(async (path, ts) => {
    const good = await Deno.readFile(path);
    // w0 and w2 are decoded on the range thread, w1 and w4 here.
    for (const i of [0, 1, 2, 5]) {
      const name = ts[i]!.name;
      const body = groupedBodyOffset(good, ts[i]!);
      // A flipped mantissa byte (plane 0, stored as is): the decoded bytes do not match the digest.
      assert.equal(good[body + BYTEGROUP_HEADER_BYTES], PLANE_STORED);
      const flipped = good.slice();
      flipped[body + BYTEGROUP_HEADER_BYTES + 4 * PLANE_ENTRY_BYTES + 99]! ^= 1;
      await Deno.writeFile(path, flipped);
      await assert.rejects(() => verifyCheckpoint(path), (e: Error) => {
        assert.ok(
          e instanceof ChecksumMismatchError || e instanceof SyntaxError,
          `${e.constructor.name}: ${e.message}`,
        );
        assert.match(e.message, new RegExp(`tensor "${name}"`));
        return true;
      });
      // An unknown body version: the decoder's SyntaxError, word for word, on either thread.
      const versioned = good.slice();
      versioned[body] = 9;
      await Deno.writeFile(path, versioned);
      const expected =
        `Cannot decode checkpoint: tensor "${name}" has byte-group version 9 (this reader knows ${BYTEGROUP_VERSION}) at offset ${body}`;
      for (const parallelHash of [undefined, false]) {
        await assert.rejects(() => verifyCheckpoint(path, { parallelHash }), (e: Error) => {
          assert.ok(e instanceof SyntaxError, `${e.constructor.name}: ${e.message}`);
          assert.equal(e.message, expected);
          return true;
        });
      }
      await assert.rejects(() => loadCheckpoint(path, { parallelHash: true }), {
        name: "SyntaxError",
        message: expected,
      });
    }
  }, "bytegroup");
});

Deno.test("a load of a byte-grouped file decodes every other tensor on the range thread by default: bit for bit", async () => {
  await withFile(async (path, ts, digest) => {
    // Unlike a load of raw bodies, which takes a second thread only with parallelHash: true.
    for (const parallelHash of [undefined, true]) {
      const got = await decodeCounting(path, { parallelHash }, "keep");
      assert.deepEqual([got.decoded, got.ranges], [4, 0]);
      assert.equal(got.digest, digest);
      assertSameTensors(got.tensors, ts);
    }
    assertSameTensors((await loadCheckpoint(path)).tensors, ts);
    const one = await decodeCounting(path, { parallelHash: false }, "keep");
    assert.deepEqual([one.decoded, one.digest], [0, digest]);
    assertSameTensors(one.tensors, ts);
    // Not with reuseBuffers: a buffer overwritten by the next tensor cannot wait for the other thread.
    assert.equal((await decodeCounting(path, { reuseBuffers: true }, "keep")).decoded, 0);
  }, "bytegroup");
});

Deno.test("FileRangeHasher decodes a byte-grouped body from the file: its digest, and its bytes when kept", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const data = new Float32Array(MiB).map((_, k) => Math.sin(k) / 64);
    const bytes = new Uint8Array(data.buffer);
    const grouped = (encodeByteGroups("float32", bytes))!;
    const body = concatBytes(grouped.parts);
    const path = `${dir}/g.bin`;
    await Deno.writeFile(path, concatBytes([new Uint8Array(100).fill(7), body, new Uint8Array(5)]));
    using file = await Deno.open(path);
    const { dev, ino } = await file.stat();
    const h = new FileRangeHasher(path, { dev, ino });
    try {
      assert.equal(await h.up, true);
      const prefix = new Uint8Array([4, 5]);
      const spec = { name: "g", dtype: "float32" as const, count: data.length, keep: true };
      const kept = await h.decode(prefix, 100, body.byteLength, spec);
      assert.deepEqual(kept.data, bytes);
      assert.deepEqual(kept.digest, sha256().update(prefix).update(bytes).digest());
      const hashed = await h.decode(prefix, 100, body.byteLength, { ...spec, keep: false });
      assert.deepEqual([hashed.data, hashed.digest], [undefined, kept.digest]);
      // A body that is not what the descriptor says: the decoder's SyntaxError, its offset in the file.
      await assert.rejects(
        () => h.decode(prefix, 100, body.byteLength, { ...spec, count: data.length + 4 }),
        {
          name: "SyntaxError",
          message:
            /^Cannot decode checkpoint: tensor "g" plane 0 is stored with \d+ bytes, needs \d+ .* at offset 1\d\d$/,
        },
      );
      await assert.rejects(() => h.decode(prefix, 100, body.byteLength + 6, spec), /file ended at offset/);
      assert.equal(h.ready, true, "a failed job leaves the thread usable");
    } finally {
      h.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
