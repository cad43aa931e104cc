// The binary decoder's native hashing thread (libcrypto through FFI, where granted): a load hashes
// each tensor of 1 MiB or more there while it reads or decodes the next. `deno task test` runs
// without FFI, so these tests put an asynchronous SHA-256 of their own in its place (a spy that
// can hold a digest back or fail), and check what the decoder does with it: which tensors go
// there, that none is handed out before its digest matched, that they come in order, that errors
// name the tensor, and that a reader never ends while a job still reads its buffers. The real
// binding is tested in a child process granted FFI (tests/format/sha256_ffi_test.ts). A load
// also reads each byte-grouped body while the one before it is decoded, with or without that
// thread: the tests of that read-ahead (its order, cancel, errors) sit here too.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  type CheckpointInput,
  ChecksumMismatchError,
  decodeCheckpoint,
  encodeCheckpoint,
  loadCheckpoint,
  readCheckpointIndex,
  type TensorInput,
  verifyCheckpoint,
} from "../../../mod.ts";
import { setHashThreadForTests, setNativeDigestForTests } from "../../../src/format/_hash.ts";
import type { ByteReader } from "../../../src/format/_byte_reader.ts";
import { decodeRecords } from "../../../src/format/codecs/binary.ts";
import type { Tensor } from "../../../src/format/types.ts";
import { assertSameTensors, chunked, collect, prng, withFile } from "../../_util.ts";

const MiB = 2 ** 20;

/** Float32 tensors around 1 MiB (under and over), with a small one between them. */
function model(): CheckpointInput & { tensors: TensorInput[] } {
  const sizes = [MiB / 4, MiB / 4 + 3, MiB / 4 - 1, MiB / 2];
  const tensors = sizes.map((n, i) => {
    const data = new Float32Array(n);
    for (let j = 0; j < n; j++) data[j] = Math.fround((((j * 2654435761) % 1000) - 500) * 1e-5 + i);
    return { name: `layer${i}/kernel`, dtype: "float32" as const, shape: [n], data };
  });
  tensors.splice(2, 0, { name: "scale", dtype: "float32", shape: [1], data: new Float32Array([7]) });
  return { metadata: { step: 3 }, tensors };
}

/** Names of the tensors of 1 MiB or more, the ones that go to the native thread. */
function large(input: { tensors: TensorInput[] }): string[] {
  return input.tensors.filter((t) => t.data.byteLength >= MiB).map((t) => t.name);
}

interface Job {
  bytes: number;
  settled: boolean;
  /** How its bytes came: in one array, or from an async iterable (a decoder's parts). */
  parts: "array" | "iterable";
}

/**
 * Installs an asynchronous SHA-256 as the native thread: each job resolves after `delay` ms (or
 * when `hold(job index)` resolves), and fails where `fail(job index)` says so. Parts from an
 * async iterable are taken as the real one takes them: the next asked for, then this one hashed
 * (`onPart` sees each as it comes).
 */
function spyNative(
  options: {
    delay?: number;
    hold?: (i: number) => Promise<void> | undefined;
    fail?: (i: number) => boolean;
    onStart?: (i: number) => void;
    onPart?: (i: number, part: Uint8Array) => void;
    /** Ms to wait before asking for the part after each (default 0: the next macrotask). */
    partDelay?: number;
  } = {},
): Job[] {
  const jobs: Job[] = [];
  setNativeDigestForTests(async (parts) => {
    const i = jobs.length;
    options.onStart?.(i);
    const iterable = Symbol.asyncIterator in parts;
    const job: Job = { bytes: 0, settled: false, parts: iterable ? "iterable" : "array" };
    jobs.push(job);
    const h = createHash("sha256");
    try {
      const list: Uint8Array[] = [];
      if (iterable) {
        const it = parts[Symbol.asyncIterator]();
        for (let next = it.next();;) {
          const got = await next;
          if (got.done) break;
          options.onPart?.(i, got.value);
          list.push(got.value);
          await new Promise((r) => setTimeout(r, options.partDelay ?? 0));
          next = it.next();
          next.catch(() => {});
        }
      } else list.push(...parts);
      job.bytes = list.reduce((n, p) => n + p.byteLength, 0);
      // Hashed at the end, as a thread reading the buffers all along would see them.
      await new Promise((r) => setTimeout(r, options.delay ?? 1));
      await options.hold?.(i);
      if (options.fail?.(i)) throw new Error("the native thread failed");
      for (const p of list) h.update(p);
      return new Uint8Array(h.digest());
    } finally {
      job.settled = true;
    }
  });
  return jobs;
}

/** The tensors of a record stream, in order; `onTensor` sees each as it comes out. */
async function tensorsOf(records: ReadableStream<unknown>, onTensor?: (t: Tensor) => void): Promise<Tensor[]> {
  const out: Tensor[] = [];
  for await (const r of records as ReadableStream<{ type: string; tensor?: Tensor }>) {
    if (r.type !== "tensor") continue;
    onTensor?.(r.tensor!);
    out.push(r.tensor!);
  }
  return out;
}

for (const compression of ["none", "bytegroup"] as const) {
  Deno.test(`a load hashes tensors of 1 MiB and more on the native thread (${compression}), in order, bit for bit`, async () => {
    const input = model();
    const bytes = await collect(encodeCheckpoint(input, { compression }));
    try {
      await withFile(bytes, async (path) => {
        // From a file every large tensor goes there; from a stream only decoded ones (a raw body
        // may be a view into the caller's chunk, which the reader does not own).
        for (const [source, expected] of [[() => path, large(input)], [() => chunked(bytes, 65536), []]] as const) {
          const jobs = spyNative();
          const names: string[] = [];
          const out = await tensorsOf(decodeCheckpoint(source()), (t) => {
            names.push(t.name);
            // No tensor comes out before its own job (and every one before it) has settled.
            assert.ok(jobs.slice(0, large(input).indexOf(t.name) + 1).every((j) => j.settled), t.name);
          });
          assertSameTensors(out, input.tensors);
          const sent = compression === "bytegroup" ? large(input) : expected;
          assert.equal(jobs.length, sent.length);
          // Each job hashed the record's prefix and the tensor's own (decoded) bytes.
          jobs.forEach((j, i) => {
            const t = input.tensors.find((x) => x.name === sent[i])!;
            assert.ok(j.bytes > t.data.byteLength && j.bytes < t.data.byteLength + 512, `${j.bytes} bytes`);
          });
        }
        const jobs = spyNative();
        assertSameTensors((await loadCheckpoint(path)).tensors, input.tensors);
        assert.equal(jobs.length, large(input).length);
      });
    } finally {
      setNativeDigestForTests("restore");
    }
  });
}

Deno.test("one thread asked for, reused buffers and a verify of raw bodies keep the native thread out", async () => {
  const input = model();
  for (const compression of ["none", "bytegroup"] as const) {
    const bytes = await collect(encodeCheckpoint(input, { compression }));
    try {
      await withFile(bytes, async (path) => {
        const jobs = spyNative();
        assertSameTensors((await loadCheckpoint(path, { parallelHash: false })).tensors, input.tensors);
        await tensorsOf(decodeCheckpoint(path, { reuseBuffers: true }));
        await verifyCheckpoint(path, { parallelHash: false });
        if (compression === "none") await verifyCheckpoint(path); // hashed piece by piece here
        assert.equal(jobs.length, 0);
      });
    } finally {
      setNativeDigestForTests("restore");
    }
  }
});

Deno.test("a verify hashes each byte-grouped tensor of 1 MiB or more on the native thread part by part as it is decoded; a corrupt one is named", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
  try {
    await withFile(bytes, async (path) => {
      const jobs = spyNative();
      const result = await verifyCheckpoint(path);
      assert.deepEqual(result.tensors.map((t) => t.name), input.tensors.map((t) => t.name));
      assert.deepEqual(jobs.map((j) => j.parts), ["iterable", "iterable", "iterable"]);
      // Each job hashed the record's prefix and the tensor's decoded bytes.
      jobs.forEach((j, i) => {
        const t = input.tensors.find((x) => x.name === large(input)[i])!;
        assert.ok(j.bytes > t.data.byteLength && j.bytes < t.data.byteLength + 512, `${j.bytes} bytes`);
      });
    });
    // A large tensor, a small one after large ones waiting to come out, the last one.
    for (const victim of ["layer1/kernel", "scale", "layer3/kernel"]) {
      const bad = bytes.slice();
      bad[(await digestEnd(bytes, victim)) - 1]! ^= 1;
      await withFile(bad, async (path) => {
        spyNative();
        await assert.rejects(() => verifyCheckpoint(path), (e: unknown) => {
          assert.ok(e instanceof ChecksumMismatchError, String(e));
          assert.match(e.message, new RegExp(`tensor "${victim}"`));
          return true;
        });
      });
    }
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a corrupt tensor hashed on the native thread is a ChecksumMismatchError naming it; the tensors before it come out, none after", async () => {
  const input = model();
  for (const compression of ["none", "bytegroup"] as const) {
    const bytes = await collect(encodeCheckpoint(input, { compression }));
    // A large tensor, a small one after large ones waiting to come out, the last one.
    for (const victim of ["layer1/kernel", "scale", "layer3/kernel"]) {
      // The last 4 bytes of a record are its digest's last bytes: flip one of them.
      const bad = bytes.slice();
      const at = await digestEnd(bytes, victim);
      bad[at - 1]! ^= 1;
      try {
        await withFile(bad, async (path) => {
          spyNative();
          const seen: string[] = [];
          await assert.rejects(
            () => tensorsOf(decodeCheckpoint(path), (t) => seen.push(t.name)),
            (e: unknown) => {
              assert.ok(e instanceof ChecksumMismatchError, String(e));
              assert.match(e.message, new RegExp(`tensor "${victim}"`));
              return true;
            },
          );
          const names = input.tensors.map((t) => t.name);
          assert.deepEqual(seen, names.slice(0, names.indexOf(victim)));
        });
      } finally {
        setNativeDigestForTests("restore");
      }
    }
  }
});

/** Where the record of tensor `name` ends in `bytes` (from the file's own index). */
async function digestEnd(bytes: Uint8Array, name: string): Promise<number> {
  return await withFile(bytes, async (path) => {
    const index = await readCheckpointIndex(path);
    const e = index.tensors.find((t) => t.name === name)!;
    return e.offset + e.length;
  });
}

Deno.test("a tensor is not handed out before its native digest matched, and a failing job names its tensor", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
  try {
    await withFile(bytes, async (path) => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      spyNative({ hold: (i) => i === 0 ? gate : undefined });
      const reader = decodeCheckpoint(path).getReader();
      assert.equal((await reader.read()).value?.type, "metadata");
      const next = reader.read();
      const early = await Promise.race([next.then(() => "out"), new Promise((r) => setTimeout(() => r("held"), 200))]);
      assert.equal(early, "held");
      release();
      const r1 = await next;
      assert.equal(r1.value!.type === "tensor" && r1.value!.tensor.name, "layer0/kernel");
      await reader.cancel();

      spyNative({ fail: (i) => i === 1 });
      await assert.rejects(
        () => loadCheckpoint(path),
        (e: unknown) => {
          assert.ok(e instanceof Error && !(e instanceof ChecksumMismatchError), String(e));
          assert.match(
            e.message,
            /^Cannot verify checkpoint: tensor "layer1\/kernel" at offset \d+: the native thread failed$/,
          );
          return true;
        },
      );
    });
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a reader cancelled, abandoned or failing while a job is on the native thread ends only after the job", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  try {
    await withFile(bytes, async (path) => {
      // Cancelled after the first tensor, while the ones after it are being hashed.
      let jobs = spyNative({ delay: 100 });
      const reader = decodeCheckpoint(path).getReader();
      await reader.read();
      await reader.read();
      assert.ok(jobs.length >= 2 && jobs.some((j) => !j.settled), `${jobs.length} jobs`);
      await reader.cancel();
      assert.ok(jobs.every((j) => j.settled), "cancel resolved while a job still read its buffers");

      // The file ends inside the next record while a job is out: the error, after the job.
      jobs = spyNative({ delay: 100 });
      const index = await readCheckpointIndex(path);
      const cut = bytes.subarray(0, index.tensors[2]!.offset + 100);
      await withFile(cut, async (short) => {
        await assert.rejects(() => loadCheckpoint(short), SyntaxError);
      });
      assert.ok(jobs.length >= 1 && jobs.every((j) => j.settled), "the load failed while a job still read its buffers");
    });
  } finally {
    setNativeDigestForTests("restore");
  }
});

/**
 * Decodes `bytes` from a logged file with the first native job held back until the reader has
 * gone as far as it goes: how many jobs had started and tensors come out by then, and, once the
 * job is let go, what the decode handed out (see {@linkcode outcome}) and its jobs. "As far as it
 * goes" is `expected` jobs started (waited for, however slow the machine), then 300 ms more in
 * which no other may start: a slow machine can only hide an extra job, never fail a right count.
 */
async function withFirstJobHeld(bytes: Uint8Array, expected: number): Promise<{
  started: number;
  early: number;
  out: string[];
  jobs: Job[];
}> {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  try {
    const jobs = spyNative({ hold: (i) => i === 0 ? gate : undefined });
    let early = 0;
    let released = false;
    const out = outcome((async function* () {
      for await (const r of decodeRecords(loggedFile(bytes, []))) {
        if (r.type === "tensor" && !released) early++;
        yield r;
      }
    })());
    for (const deadline = Date.now() + 60_000; jobs.length < expected && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise((r) => setTimeout(r, 300));
    const started = jobs.length;
    released = true;
    release();
    return { started, early, out: await out, jobs };
  } finally {
    release();
    setNativeDigestForTests("restore");
  }
}

Deno.test("a raw load from a file hashes two to four tensors on the native thread at once, in order, bit for bit", async () => {
  // Eight raw float32 tensors of 1 MiB: the first one's digest is held back.
  const input = {
    metadata: { step: 4 },
    tensors: Array.from({ length: 8 }, (_, i): TensorInput => {
      const data = new Float32Array(MiB / 4).map((_, j) => Math.fround(Math.sin(j * 0.3 + i) * 0.02));
      return { name: `dense${i}/kernel`, dtype: "float32", shape: [MiB / 4], data };
    }),
  };
  const bytes = await collect(encodeCheckpoint(input));
  const { started, early, out, jobs } = await withFirstJobHeld(bytes, 3);
  // One per core, at least two (then the reader waits for the first before it starts a
  // third job's successor: three started), at most four (five started).
  assert.ok(started >= 3 && started <= 5, `${started} jobs started while the first was held`);
  assert.equal(early, 0, "a tensor came out before the first one's digest");
  assert.deepEqual(out, await outcome(decodeRecords(loggedFile(bytes, []), { reuseBuffers: true })));
  assert.equal(jobs.length, 8);
});

Deno.test("a raw load keeps at most 64 MiB on the native thread at once: larger tensors go there one at a time", async () => {
  // Three raw tensors of 33 MiB: two would pass 64 MiB, so the first comes out before the third
  // one's job starts (two started while it was held; three with the count alone).
  const n = 33 * MiB / 4;
  const input = {
    metadata: { step: 6 },
    tensors: [0, 1, 2].map((i): TensorInput => ({
      name: `embedding${i}`,
      dtype: "float32",
      shape: [n],
      data: new Float32Array(n).fill(i + 0.5),
    })),
  };
  const bytes = await collect(encodeCheckpoint(input));
  const { started, early, out } = await withFirstJobHeld(bytes, 2);
  assert.equal(started, 2, `${started} jobs of 33 MiB started while the first was held`);
  assert.equal(early, 0);
  assert.deepEqual(out, await outcome(decodeRecords(loggedFile(bytes, []), { reuseBuffers: true })));
});

Deno.test("a raw load holds small tensors back behind the tensor on the native thread, so the next kernels' jobs start", async () => {
  // Three kernels of 1 MiB and more, each followed by a bias and a counter (read here).
  const input = layers(true);
  const bytes = await collect(encodeCheckpoint(input));
  const { started, early, out } = await withFirstJobHeld(bytes, 3);
  assert.equal(started, 3, "a small tensor after a kernel made the reader wait for the kernel's digest");
  assert.equal(early, 0);
  assert.deepEqual(out.map((l) => l.split(" ")[0]), [...input.tensors.map((t) => t.name), "ok"]);
  assert.deepEqual(out, await outcome(decodeRecords(loggedFile(bytes, []), { reuseBuffers: true })));
});

/**
 * Three byte-grouped float32 tensors of 1 MiB and more, one after another; with `small`, each
 * followed by small tensors (a float32 bias and an int32 counter), as in a model.
 */
function layers(small = false): CheckpointInput & { tensors: TensorInput[] } {
  const tensors = [MiB / 4, MiB / 4 + 5, MiB / 2].flatMap((n, i): TensorInput[] => {
    const data = new Float32Array(n);
    for (let j = 0; j < n; j++) data[j] = Math.fround(Math.sin(j * 0.37 + i) * 0.02);
    const kernel = { name: `dense${i}/kernel`, dtype: "float32" as const, shape: [n], data };
    if (!small) return [kernel];
    const bias = new Float32Array(300).map((_, j) => Math.fround(Math.cos(j + i) * 0.01));
    return [
      kernel,
      { name: `dense${i}/bias`, dtype: "float32", shape: [300], data: bias },
      { name: `dense${i}/steps`, dtype: "int32", shape: [2], data: new Int32Array([i, -i]) },
    ];
  });
  return { metadata: { step: 5 }, tensors };
}

/** {@linkcode layers}, byte-grouped, and where each tensor's record starts. */
async function encodedLayers(small = false) {
  const input = layers(small);
  const bytes = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
  const offsets = await withFile(bytes, async (path) => (await readCheckpointIndex(path)).tensors.map((t) => t.offset));
  return { input, bytes, offsets };
}

/**
 * A file-like reader over `bytes` that logs where each read starts; a read from `hold.from` on
 * lands only once `hold.gate` resolves.
 */
function loggedFile(bytes: Uint8Array, reads: number[], hold?: { from: number; gate: Promise<void> }): ByteReader {
  let at = 0;
  return {
    read(into) {
      const start = at;
      reads.push(start);
      const n = Math.min(into.byteLength, bytes.byteLength - start);
      if (n <= 0) return Promise.resolve(null);
      into.set(bytes.subarray(start, start + n));
      at += n;
      return hold && start >= hold.from ? hold.gate.then(() => n) : Promise.resolve(n);
    },
    stat: () => Promise.resolve({ size: bytes.byteLength }),
  };
}

for (const thread of ["the native thread", "no native thread"]) {
  Deno.test(`a byte-grouped load reads each body while the tensor before it is decoded (${thread})`, async () => {
    const { input, bytes, offsets } = await encodedLayers();
    const reads: number[] = [];
    // When tensor i, just decoded, is hashed on the native thread, the read of the next record's
    // body has been asked for already; and when tensor i comes out, that of the one after next.
    const sent: boolean[] = [];
    const out: Tensor[] = [];
    const early: boolean[] = [];
    try {
      if (thread === "the native thread") {
        spyNative({ onStart: (i) => sent.push(reads.some((at) => at > offsets[i + 1]!)) });
      } else setNativeDigestForTests(null);
      for await (const r of decodeRecords(loggedFile(bytes, reads))) {
        if (r.type !== "tensor") continue;
        early.push(reads.some((at) => at > offsets[out.length + 2]!));
        out.push(r.tensor);
      }
      assertSameTensors(out, input.tensors);
      assert.deepEqual(early, [true, false, false]);
      assert.deepEqual(sent, thread === "the native thread" ? [true, true, false] : []);
    } finally {
      setNativeDigestForTests("restore");
    }
  });
}

for (const thread of ["the native thread", "no native thread"]) {
  Deno.test(`a byte-grouped load holds small tensors back so that the next large body is read while the one before it is decoded (${thread})`, async () => {
    const { input, bytes, offsets } = await encodedLayers(true);
    const kernels = [0, 3, 6].map((i) => offsets[i]!);
    const reads: number[] = [];
    // When dense{i}/kernel comes out, the next kernel's body is being read already (the bias and
    // counter between them were read, verified and held back); they come out after it, in order.
    const early: boolean[] = [];
    const out: Tensor[] = [];
    try {
      if (thread === "the native thread") spyNative();
      else setNativeDigestForTests(null);
      for await (const r of decodeRecords(loggedFile(bytes, reads))) {
        if (r.type !== "tensor") continue;
        const k = kernels.indexOf(offsets[out.length]!);
        if (k >= 0 && k < 2) early.push(reads.some((at) => at > kernels[k + 1]!));
        out.push(r.tensor);
      }
      assert.deepEqual(out.map((t) => t.name), input.tensors.map((t) => t.name));
      assertSameTensors(out, input.tensors);
      assert.deepEqual(early, [true, true]);
    } finally {
      setNativeDigestForTests("restore");
    }
  });
}

Deno.test("a load holds back at most 4 MiB of small tensors: past that the large one before them comes out first", async () => {
  // A kernel, then six float32 tensors of just under 1 MiB each (small: decoded and hashed here).
  const kernel = layers().tensors[0]!;
  const n = MiB / 4 - 1;
  const smalls = Array.from({ length: 6 }, (_, i): TensorInput => {
    const data = new Float32Array(n).map((_, j) => Math.fround(Math.sin(j * 0.11 + i) * 0.02));
    return { name: `small${i}`, dtype: "float32", shape: [n], data };
  });
  const input = { metadata: { step: 2 }, tensors: [kernel, ...smalls] };
  // Byte-grouped with and without the native thread, and raw behind the kernel's native job.
  for (const [native, compression] of [[true, "bytegroup"], [false, "bytegroup"], [true, "none"]] as const) {
    const { readWhenFirstOut, offsets } = await whenFirstOut(input, native, compression);
    const what = `native ${native}, ${compression}`;
    // Four small ones (4 MiB less 16 bytes) were held back; the fifth would pass 4 MiB, so the
    // kernel came out while it was read, before anything of the sixth.
    assert.ok(readWhenFirstOut > offsets[5]!, `${what}: the kernel came out before the fifth small tensor`);
    assert.ok(readWhenFirstOut < offsets[6]!, `${what}: the kernel was held past 4 MiB of small tensors`);
  }
  // Raw, the 4 MiB are for all tensors held behind those on the native thread: three small ones
  // behind the first kernel and one behind the second; the next makes the first kernel come out.
  const second = { ...kernel, name: "second/kernel" };
  const two = { metadata: { step: 2 }, tensors: [kernel, ...smalls.slice(0, 3), second, ...smalls.slice(3)] };
  const { readWhenFirstOut, offsets } = await whenFirstOut(two, true, "none");
  assert.ok(readWhenFirstOut > offsets[6]!, "the first kernel came out before 4 MiB of small tensors were held");
  assert.ok(readWhenFirstOut < offsets[7]!, "more than 4 MiB of small tensors were held behind two kernels");
});

/**
 * Decodes `input`, byte-grouped (or raw), from a logged file: where the furthest read had started
 * when the first tensor came out, and where each tensor's record starts; every tensor checked bit
 * for bit.
 */
async function whenFirstOut(
  input: CheckpointInput & { tensors: TensorInput[] },
  native: boolean,
  compression: "bytegroup" | "none" = "bytegroup",
) {
  const bytes = await collect(encodeCheckpoint(input, { compression }));
  const offsets = await withFile(bytes, async (path) => (await readCheckpointIndex(path)).tensors.map((t) => t.offset));
  const reads: number[] = [];
  let readWhenFirstOut = -1;
  try {
    if (native) spyNative();
    else setNativeDigestForTests(null);
    const out: Tensor[] = [];
    for await (const r of decodeRecords(loggedFile(bytes, reads))) {
      if (r.type !== "tensor") continue;
      if (out.length === 0) readWhenFirstOut = Math.max(...reads);
      out.push(r.tensor);
    }
    assertSameTensors(out, input.tensors);
  } finally {
    setNativeDigestForTests("restore");
  }
  return { readWhenFirstOut, offsets };
}

Deno.test("a load holds back at most 4096 small tensors behind a large one", async () => {
  const kernel = layers().tensors[0]!;
  const tiny = Array.from({ length: 6000 }, (_, i): TensorInput => ({
    name: `step${i}`,
    dtype: "int32",
    shape: [1],
    data: new Int32Array([i]),
  }));
  const input = { metadata: { step: 2 }, tensors: [kernel, ...tiny] };
  for (const compression of ["bytegroup", "none"] as const) {
    const { readWhenFirstOut, offsets } = await whenFirstOut(input, true, compression);
    // The 4097th tiny tensor (record 4097) made the kernel come out; reads go 64 KiB at a time
    // (about 300 such records).
    assert.ok(
      readWhenFirstOut > offsets[4097 - 400]!,
      `${compression}: the kernel came out before 4096 were held back`,
    );
    assert.ok(readWhenFirstOut < offsets[4097 + 400]!, `${compression}: the kernel was held behind more than 4096`);
  }
});

Deno.test("a byte-grouped load whose native thread lags keeps a tensor's stored body and planes until its decode is done", async () => {
  // Each part is asked for 15 ms after the one before: the reader reaches the next large bodies,
  // and small tensors, while a tensor is still being decoded from its buffers. Four kernels of one
  // size: the third body's read would land in the first one's buffer.
  const kernels = layers().tensors.slice(0, 1);
  for (let i = 1; i < 4; i++) {
    const data = (kernels[0]!.data as Float32Array).map((x) => Math.fround(x * (i + 1)));
    kernels.push({ ...kernels[0]!, name: `dense${i}/kernel`, data });
  }
  const sets = [layers(true), { metadata: { step: 1 }, tensors: kernels }];
  try {
    spyNative({ partDelay: 15 });
    for (const input of sets) {
      const bytes = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
      const out: Tensor[] = [];
      for await (const r of decodeRecords(loggedFile(bytes, []))) if (r.type === "tensor") out.push(r.tensor);
      assertSameTensors(out, input.tensors);
    }
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a byte-grouped load cancelled while the next body is read ends only once that read landed", async () => {
  const { bytes, offsets } = await encodedLayers();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  try {
    spyNative();
    // The read of the third body is held: the first tensor comes out meanwhile.
    const records = decodeRecords(loggedFile(bytes, [], { from: offsets[2]! + 1, gate }));
    assert.equal((await records.next()).value?.type, "metadata");
    const first = (await records.next()).value;
    assert.equal(first?.type === "tensor" && first.tensor.name, "dense0/kernel");
    const done = records.return(undefined);
    const early = await Promise.race([done.then(() => "ended"), new Promise((r) => setTimeout(() => r("held"), 200))]);
    assert.equal(early, "held", "the reader ended while a read into its buffer was in flight");
    release();
    await done;
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a malformed byte-grouped body is the error of a load, not a broken record after it", async () => {
  const { bytes, offsets } = await encodedLayers();
  const bad = bytes.slice();
  // The second tensor's plane table (version 1, 4 planes, 6 zero bytes, on a 64-byte boundary)
  // gets version 9; the third record's kind byte becomes 200.
  let table = offsets[1]!;
  while (![1, 4, 0, 0, 0, 0, 0, 0].every((b, i) => bad[table + i] === b)) table += 64 - (table % 64);
  bad[table] = 9;
  bad[offsets[2]!] = 200;
  try {
    await withFile(bad, async (path) => {
      spyNative();
      const message = /tensor "dense1\/kernel" has byte-group version 9 \(this reader knows 1\) at offset \d+$/;
      await assert.rejects(
        () => loadCheckpoint(path),
        (e: unknown) => e instanceof SyntaxError && message.test(e.message),
      );
      // As one thread reports it.
      await assert.rejects(() => loadCheckpoint(path, { parallelHash: false }), SyntaxError, "byte-group version 9");
    });
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a tensor after a byte-grouped one waiting to be decoded comes out after it, whichever thread hashes it", async () => {
  // A stream (raw bodies stay off the native thread) asked for a second thread: the raw tensor
  // after the byte-grouped one goes to that thread while the byte-grouped one waits.
  const floats = layers().tensors[0]!;
  const ints = new Int32Array(MiB / 4).map((_, i) => i * 7919);
  const input: CheckpointInput & { tensors: TensorInput[] } = {
    metadata: { step: 1 },
    tensors: [floats, { name: "steps", dtype: "int32", shape: [ints.length], data: ints }],
  };
  const bytes = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
  const taken: number[] = [];
  try {
    spyNative();
    setHashThreadForTests(() => ({
      ready: true,
      digest(buffer, offset, length) {
        taken.push(length);
        const digest = new Uint8Array(createHash("sha256").update(new Uint8Array(buffer, offset, length)).digest());
        return new Promise((r) => setTimeout(() => r({ digest, buffer }), 5));
      },
      close() {},
    }));
    const out = await tensorsOf(decodeCheckpoint(chunked(bytes, 65536), { parallelHash: true }));
    assert.deepEqual(out.map((t) => t.name), [floats.name, "steps"]);
    assertSameTensors(out, input.tensors);
  } finally {
    setNativeDigestForTests("restore");
    setHashThreadForTests("restore");
  }
});

/** `input` with its tensors handed over one at a time; `onPull(k)` runs as tensor k is asked for. */
function fed(input: CheckpointInput & { tensors: TensorInput[] }, onPull: (k: number) => void): CheckpointInput {
  return {
    metadata: input.metadata,
    tensors: (async function* () {
      for (const [k, t] of input.tensors.entries()) {
        onPull(k);
        yield t;
      }
    })(),
  };
}

Deno.test("a byte-grouped save hashes tensors of 1 to 16 MiB on the native thread, from a copy, while it encodes the next; the bytes are one thread's", async () => {
  const input = layers();
  // A small tensor (hashed here) and one over 16 MiB (hashed here: two copies of it would cost
  // too much memory).
  input.tensors.splice(1, 0, { name: "scale", dtype: "float32", shape: [3], data: new Float32Array([1, 2, 3]) });
  const big = new Float32Array(4 * MiB + 16).map((_, i) => Math.fround(Math.cos(i) * 0.01));
  input.tensors.push({ name: "embedding", dtype: "float32", shape: [big.length], data: big });
  try {
    setNativeDigestForTests(null);
    const expected = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
    const jobs = spyNative({ delay: 30 });
    // When the next tensor is asked for, the one before it is still being hashed there.
    const hashing: boolean[] = [];
    const bytes = await collect(
      encodeCheckpoint(fed(input, (k) => k > 0 && hashing.push(jobs.some((j) => !j.settled))), {
        compression: "bytegroup",
      }),
    );
    assert.deepEqual(bytes, expected);
    const sent = ["dense0/kernel", "dense1/kernel", "dense2/kernel"];
    assert.equal(jobs.length, sent.length);
    jobs.forEach((j, i) => {
      const t = input.tensors.find((x) => x.name === sent[i])!;
      assert.ok(j.bytes > t.data.byteLength && j.bytes < t.data.byteLength + 512, `${j.bytes} bytes`);
    });
    // Asked for: scale (after dense0, out), dense1, dense2 (after dense1, out), embedding (after dense2, out).
    assert.deepEqual(hashing, [true, false, true, true]);
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("an uncompressed save hashes each tensor of 1 MiB or more on the native thread where it lies, while its body goes out; the bytes are one thread's", async () => {
  const input = layers();
  input.tensors.splice(1, 0, { name: "scale", dtype: "float32", shape: [3], data: new Float32Array([1, 2, 3]) });
  const big = new Float32Array(4 * MiB + 16).map((_, i) => Math.fround(Math.cos(i) * 0.01));
  input.tensors.push({ name: "embedding", dtype: "float32", shape: [big.length], data: big });
  const sent = ["dense0/kernel", "dense1/kernel", "dense2/kernel", "embedding"];
  try {
    setNativeDigestForTests(null);
    const expected = await collect(encodeCheckpoint(input));
    for (const fail of [false, true]) {
      // Each job: its parts, whether it had settled when the bytes after its body went out.
      const jobs: { parts: Uint8Array[]; settled: boolean }[] = [];
      setNativeDigestForTests(async (parts) => {
        const job = { parts: [...(parts as Uint8Array[])], settled: false }; // a save's jobs are arrays
        jobs.push(job);
        await new Promise((r) => setTimeout(r, 20));
        job.settled = true;
        if (fail) throw new Error("the native thread failed");
        const h = createHash("sha256");
        for (const p of job.parts) h.update(p);
        return new Uint8Array(h.digest());
      });
      let bodies = 0;
      let early = 0;
      const bytes = await collect(
        encodeCheckpoint(input).pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, c) {
              // The chunk after a body is that record's digest: its job has settled by then.
              const body = jobs.findIndex((j) => j.parts[1]!.buffer === chunk.buffer);
              if (body >= 0) bodies = Math.max(bodies, body + 1);
              else if (bodies > 0 && !jobs[bodies - 1]!.settled) early++;
              c.enqueue(chunk.slice());
            },
          }),
        ),
      );
      assert.deepEqual(bytes, expected, fail ? "a failed job is hashed on this thread" : "same bytes");
      assert.equal(bodies, sent.length);
      assert.equal(early, 0);
      // The prefix and the caller's own array, not a copy: the one over 16 MiB goes there too.
      assert.deepEqual(jobs.map((j) => j.parts.length), sent.map(() => 2));
      jobs.forEach((j, i) => {
        const t = input.tensors.find((x) => x.name === sent[i])!;
        assert.equal(j.parts[1]!.buffer, t.data.buffer, sent[i]);
        assert.equal(j.parts[1]!.byteLength, t.data.byteLength, sent[i]);
      });
    }
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("an uncompressed save cancelled while the native thread hashes a body ends only once that job has settled", async () => {
  let started = 0;
  let settled = false;
  let release!: () => void;
  const held = new Promise<void>((r) => release = r);
  try {
    setNativeDigestForTests(async (parts) => {
      started++;
      await held;
      settled = true;
      const h = createHash("sha256");
      for (const p of parts as Uint8Array[]) h.update(p);
      return new Uint8Array(h.digest());
    });
    const reader = encodeCheckpoint(layers()).getReader();
    while (started === 0) await reader.read(); // into the first tensor's body, its job held back
    let cancelled = false;
    const cancelling = reader.cancel().then(() => cancelled = true);
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(cancelled, false, "the encoder ended while the native thread still read the caller's array");
    release();
    await cancelling;
    assert.ok(settled);
    assert.equal(started, 1);
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a byte-grouped save starts a tensor's native digest before it codes the tensor: the next one's starts before the digest before it is written", async () => {
  const input = layers();
  const digests: Uint8Array[] = [];
  try {
    setNativeDigestForTests(null);
    const expected = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
    let chunks = 0;
    const startedAt: number[] = [];
    setNativeDigestForTests(async (parts) => {
      startedAt.push(chunks);
      await new Promise((r) => setTimeout(r, 20));
      const h = createHash("sha256");
      for (const p of parts as Uint8Array[]) h.update(p); // a save's jobs are arrays
      const d = new Uint8Array(h.digest());
      digests.push(d);
      return d;
    });
    let firstDigestAt = -1;
    const counted = encodeCheckpoint(input, { compression: "bytegroup" }).pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          if (
            firstDigestAt < 0 && digests[0] && chunk.byteLength === 32 && chunk.every((b, i) => b === digests[0]![i])
          ) {
            firstDigestAt = chunks;
          }
          chunks++;
          c.enqueue(chunk.slice());
        },
      }),
    );
    assert.deepEqual(await collect(counted), expected);
    assert.equal(startedAt.length, 3);
    assert.ok(firstDigestAt > 0, "the first tensor's digest was written");
    assert.ok(
      startedAt[1]! <= firstDigestAt,
      `job 1 started after ${startedAt[1]} chunks, digest 0 at ${firstDigestAt}`,
    );
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a tensor changed by the caller while its digest is computed on the native thread saves as it was handed over", async () => {
  const input = layers();
  const original = input.tensors.map((t) => (t.data as Float32Array).slice());
  try {
    spyNative({ delay: 30 });
    // Each tensor is overwritten as soon as the encoder asks for the next one.
    const bytes = await collect(
      encodeCheckpoint(fed(input, (k) => k > 0 && (input.tensors[k - 1]!.data as Float32Array).fill(7)), {
        compression: "bytegroup",
      }),
    );
    setNativeDigestForTests(null);
    const out = await tensorsOf(decodeCheckpoint(chunked(bytes, 65536)));
    out.forEach((t, i) => assert.deepEqual(t.data, original[i], t.name));
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a byte-grouped save cancelled while a job is on the native thread ends after the job; a failing job is hashed here instead", async () => {
  const input = layers();
  try {
    // Cancelled while the first job is out, and while the second is out but the first one's
    // digest is being written.
    for (const out of [1, 2]) {
      const jobs = spyNative({ delay: 100 });
      const reader = encodeCheckpoint(input, { compression: "bytegroup" }).getReader();
      for (let r = await reader.read(); !r.done && jobs.length < out; r = await reader.read());
      assert.equal(jobs.length, out);
      await reader.cancel();
      assert.ok(
        jobs.every((j) => j.settled),
        `cancel resolved while job ${jobs.findIndex((j) => !j.settled)} still read its copy`,
      );
    }

    setNativeDigestForTests(null);
    const expected = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
    const failing = spyNative({ fail: (i) => i === 1 });
    assert.deepEqual(await collect(encodeCheckpoint(input, { compression: "bytegroup" })), expected);
    assert.equal(failing.length, 3);
  } finally {
    setNativeDigestForTests("restore");
  }
});

Deno.test("a load hashes each byte-grouped tensor of 1 MiB or more part by part as it is decoded", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input, { compression: "bytegroup" }));
  try {
    await withFile(bytes, async (path) => {
      // layer0 (one part) is decoded while layer1's body is read, layer1 while layer3's (the small
      // tensor and layer2, under 1 MiB, decoded and hashed here, held back), layer3 (2 MiB) at the
      // end.
      const firstParts: { job: number; undecoded: boolean }[] = [];
      const seen = new Map<number, number>();
      const jobs = spyNative({
        onPart: (i, part) => {
          const n = (seen.get(i) ?? 0) + 1;
          seen.set(i, n);
          assert.ok(part.byteLength <= MiB, `${part.byteLength} bytes in one part`);
          // Part 1 is the record's prefix, part 2 the tensor's first bytes: the rest of its
          // buffer is not decoded yet (still zero).
          const rest = new Uint8Array(part.buffer, part.byteOffset + part.byteLength);
          if (n !== 2 || rest.byteLength === 0) return;
          firstParts.push({ job: i, undecoded: rest.every((b) => b === 0) });
        },
      });
      assertSameTensors((await loadCheckpoint(path)).tensors, input.tensors);
      assert.deepEqual(jobs.map((j) => j.parts), ["iterable", "iterable", "iterable"]);
      assert.deepEqual(firstParts, [{ job: 1, undecoded: true }, { job: 2, undecoded: true }]);
      // The prefix, then: 1 MiB; 1 MiB and 12 bytes; 1 MiB and 1 MiB.
      assert.deepEqual([...seen.values()], [2, 3, 3]);
    });
  } finally {
    setNativeDigestForTests("restore");
  }
});

/** What a decode hands out before it ends: each tensor's name and a hash of its bytes, then how it ended. */
async function outcome(records: AsyncIterable<{ type: string; tensor?: Tensor }>): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const r of records) {
      if (r.type !== "tensor") continue;
      const t = r.tensor!;
      out.push(`${t.name} ${createHash("sha256").update(t.data as Uint8Array).digest("hex").slice(0, 16)}`);
    }
    out.push("ok");
  } catch (e) {
    out.push(`${(e as Error).name}: ${(e as Error).message}`);
  }
  return out;
}

for (const compression of ["bytegroup", "none"] as const) {
  Deno.test(`a load (${compression}) hands out the same tensors, in the same order, then the same error, as a decode that holds nothing back`, async () => {
    // Random models of large tensors (1 MiB and more) and small ones between them, some damaged (a
    // flipped bit, a cut); the reference is a decode with reuseBuffers, which hands each tensor out
    // as soon as it is verified (copied here, as its buffer is reused).
    const rand = prng(compression === "bytegroup" ? 20261205 : 20261206);
    const kernels = layers().tensors;
    for (let c = 0; c < 24; c++) {
      const tensors: TensorInput[] = [];
      for (let i = 0, n = 3 + Math.floor(rand() * 5); i < n; i++) {
        if (rand() < 0.5) {
          const k = kernels[Math.floor(rand() * kernels.length)]!;
          tensors.push({ ...k, name: `c${c}/big${i}` });
        } else {
          const len = 1 + Math.floor(rand() * 2000);
          const data = new Float32Array(len).map((_, j) => Math.fround(Math.sin(j + i + c) * 0.02));
          tensors.push({ name: `c${c}/small${i}`, dtype: "float32", shape: [len], data });
        }
      }
      const good = await collect(encodeCheckpoint({ metadata: { step: c }, tensors }, { compression }));
      const kind = c % 3; // intact, a flipped bit, cut short
      const bytes = kind === 2 ? good.slice(0, Math.floor(rand() * good.byteLength)) : good.slice();
      if (kind === 1) bytes[Math.floor(rand() * bytes.byteLength)]! ^= 1 << Math.floor(rand() * 8);
      const copies = async function* (records: AsyncIterable<{ type: string; tensor?: Tensor }>) {
        for await (const r of records) {
          yield r.type === "tensor"
            ? { ...r, tensor: { ...r.tensor!, data: (r.tensor!.data as Uint8Array).slice() } }
            : r;
        }
      };
      const reference = await outcome(copies(decodeRecords(loggedFile(bytes, []), { reuseBuffers: true })));
      for (const thread of ["the native thread", "no native thread"]) {
        try {
          if (thread === "the native thread") spyNative();
          else setNativeDigestForTests(null);
          const got = await outcome(decodeRecords(loggedFile(bytes, [])));
          assert.deepEqual(got, reference, `case ${c} (${["intact", "a flipped bit", "cut"][kind]}), ${thread}`);
        } finally {
          setNativeDigestForTests("restore");
        }
      }
    }
  });
}
