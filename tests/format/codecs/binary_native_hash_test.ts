// The binary decoder's native hashing thread (libcrypto through FFI, where granted): a load hashes
// each tensor of 1 MiB or more there while it reads or decodes the next. `deno task test` runs
// without FFI, so these tests put an asynchronous SHA-256 of their own in its place (a spy that
// can hold a digest back or fail), and check what the decoder does with it: which tensors go
// there, that none is handed out before its digest matched, that they come in order, that errors
// name the tensor, and that a reader never ends while a job still reads its buffers. The real
// binding is tested in a child process granted FFI (tests/format/sha256_ffi_test.ts).
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
import { setNativeDigestForTests } from "../../../src/format/_hash.ts";
import type { Tensor } from "../../../src/format/types.ts";
import { assertSameTensors, chunked, collect, withFile } from "../../_util.ts";

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
}

/**
 * Installs an asynchronous SHA-256 as the native thread: each job resolves after `delay` ms (or
 * when `hold(job index)` resolves), and fails where `fail(job index)` says so.
 */
function spyNative(
  options: { delay?: number; hold?: (i: number) => Promise<void> | undefined; fail?: (i: number) => boolean } = {},
): Job[] {
  const jobs: Job[] = [];
  setNativeDigestForTests(async (parts) => {
    const i = jobs.length;
    const job = { bytes: parts.reduce((n, p) => n + p.byteLength, 0), settled: false };
    jobs.push(job);
    const h = createHash("sha256");
    // Hashed at the end, as a thread reading the buffers all along would see them.
    await new Promise((r) => setTimeout(r, options.delay ?? 1));
    await options.hold?.(i);
    try {
      if (options.fail?.(i)) throw new Error("the native thread failed");
      for (const p of parts) h.update(p);
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

Deno.test("one thread asked for, reused buffers and a verify keep the native thread out", async () => {
  const input = model();
  for (const compression of ["none", "bytegroup"] as const) {
    const bytes = await collect(encodeCheckpoint(input, { compression }));
    try {
      await withFile(bytes, async (path) => {
        const jobs = spyNative();
        assertSameTensors((await loadCheckpoint(path, { parallelHash: false })).tensors, input.tensors);
        await tensorsOf(decodeCheckpoint(path, { reuseBuffers: true }));
        await verifyCheckpoint(path);
        assert.equal(jobs.length, 0);
      });
    } finally {
      setNativeDigestForTests("restore");
    }
  }
});

Deno.test("a corrupt tensor hashed on the native thread is a ChecksumMismatchError naming it; the tensors before it come out, none after", async () => {
  const input = model();
  for (const compression of ["none", "bytegroup"] as const) {
    const bytes = await collect(encodeCheckpoint(input, { compression }));
    for (const victim of ["layer1/kernel", "layer3/kernel"]) {
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
      // Cancelled after the first tensor, while the second is being hashed.
      let jobs = spyNative({ delay: 100 });
      const reader = decodeCheckpoint(path).getReader();
      await reader.read();
      await reader.read();
      assert.equal(jobs.length, 2);
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
