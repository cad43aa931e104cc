// The binary decoder's second hashing thread (`parallelHash: true`): tensors of 1 MiB and more
// alternate between a Worker and the reader's own thread. A spy around a Worker started beforehand (the decoder only
// starts one after 32 MiB, and it takes ~100 ms to come up) shows which tensors went there; the
// tests check that no tensor is handed out before its digest matched, that they come in order,
// that errors name the tensor, and that a failing, cancelled or abandoned reader leaves nothing
// running.
import assert from "node:assert/strict";
import { ChecksumMismatchError, decodeCheckpoint, encodeCheckpoint, loadCheckpoint } from "../../../mod.ts";
import { type HashThread, setHashThreadForTests } from "../../../src/format/_hash.ts";
import { WorkerHashThread } from "../../../src/format/_hash_thread.ts";
import type { Tensor } from "../../../src/format/types.ts";
import { chunked, collect, withFile } from "../../_util.ts";

const MiB = 2 ** 20;

interface F32 {
  name: string;
  dtype: "float32";
  shape: number[];
  data: Float32Array;
}

/** Four float32 tensors of 1–2 MiB (odd sizes too) and a small one between them. */
function model(): { metadata: { step: number }; tensors: F32[] } {
  // The second of each thread's pair no larger than the first: reused buffers then never grow.
  const sizes = [MiB / 2, MiB / 2 + 3, MiB / 4 + 1, MiB / 2];
  const tensors: F32[] = sizes.map((n, i) => {
    const data = new Float32Array(n);
    for (let j = 0; j < n; j++) data[j] = i * MiB + j * 0.5; // no 64 bytes of one tensor recur in another
    return { name: `layer${i}/kernel`, dtype: "float32" as const, shape: [n], data };
  });
  tensors.splice(2, 0, { name: "scale", dtype: "float32", shape: [1], data: new Float32Array([7]) });
  return { metadata: { step: 3 }, tensors };
}

const WORKER = new URL("../../../src/runtime/_hash_thread_worker.ts", import.meta.url);

/** A Worker hash thread that is already up. */
async function warmThread(): Promise<HashThread> {
  const t = new WorkerHashThread(WORKER);
  while (!t.ready) await new Promise((r) => setTimeout(r, 5));
  return t;
}

/**
 * The next reader gets a started Worker, wrapped by `wrap` (a spy by default), and starts it at
 * once; `calls` lists the byte counts it was given to hash.
 */
async function spy(
  wrap = (t: HashThread, calls: number[]): HashThread => ({
    get ready() {
      return t.ready;
    },
    digest(buffer, offset, length) {
      calls.push(length);
      return t.digest(buffer, offset, length);
    },
    close: () => t.close(),
  }),
): Promise<{ calls: number[] }> {
  const calls: number[] = [];
  const thread = wrap(await warmThread(), calls);
  let given = false;
  setHashThreadForTests(() => {
    if (given) return undefined;
    given = true;
    return thread;
  });
  return { calls };
}

/** Each tensor as it is handed out: its name and a copy of its bytes (reused buffers change later). */
async function drain(
  records: ReadableStream<unknown>,
): Promise<{ name: string; bytes: Uint8Array; buffer: unknown }[]> {
  const out = [];
  for await (const r of records as ReadableStream<{ type: string; tensor?: Tensor }>) {
    if (r.type !== "tensor") continue;
    const t = r.tensor!;
    const view = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    out.push({ name: t.name, bytes: view.slice(), buffer: t.data.buffer });
  }
  return out;
}

function bytesOfTensor(t: F32): Uint8Array {
  return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
}

/** Where the first byte of a tensor's data sits in the encoded bytes. */
function bodyOffset(bytes: Uint8Array, expected: Uint8Array): number {
  outer: for (let i = 0; i + expected.byteLength <= bytes.byteLength; i += 64) {
    for (let j = 0; j < 64; j++) if (bytes[i + j] !== expected[j]) continue outer;
    return i;
  }
  throw new Error("body not found");
}

Deno.test("tensors of 1 MiB and more alternate between two threads and come out in order, as on one thread", async (t) => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  const expected = input.tensors.map((x) => x.name);
  try {
    await withFile(bytes, async (path) => {
      for (const reuseBuffers of [false, true]) {
        for (
          const [how, source] of [
            ["an open file", () => path],
            ["a stream of 64 KiB chunks", () => chunked(bytes, 64 * 1024)],
            ["a stream split at odd points", () => chunked(bytes, 333_331)],
          ] as const
        ) {
          await t.step(`${how}${reuseBuffers ? ", reuseBuffers" : ""}`, async () => {
            const { calls } = await spy();
            const got = await drain(decodeCheckpoint(source(), { reuseBuffers, parallelHash: true }));
            assert.deepEqual(got.map((g) => g.name), expected);
            for (const [i, g] of got.entries()) {
              assert.deepEqual(g.bytes, bytesOfTensor(input.tensors[i]!), g.name);
            }
            // layer0 off the thread, layer1 here, scale here (small), layer2 off, layer3 here.
            assert.equal(calls.length, 2);
            // Without parallelHash (the default), no thread is started.
            setHashThreadForTests(() => assert.fail("a read without parallelHash started a thread"));
            const one = await drain(decodeCheckpoint(source(), { reuseBuffers }));
            assert.deepEqual(one.map((g) => g.name), expected);
            if (reuseBuffers) {
              // Bounded memory: the four large tensors share two buffers (one per thread). One that
              // went to the thread and back is a new ArrayBuffer over the same memory, and the
              // one before it was detached when that memory went again: two are left.
              const large = new Set(got.filter((x) => x.bytes.byteLength >= MiB).map((x) => x.buffer as ArrayBuffer));
              const live = [...large].filter((b) => b.byteLength > 0);
              assert.ok(live.length <= 2, `${live.length} buffers`);
            }
          });
        }
      }
    });
  } finally {
    setHashThreadForTests("restore");
  }
});

Deno.test("a corrupt tensor hashed off the main thread is a ChecksumMismatchError naming it, and nothing after it comes out", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  const tensors = input.tensors;
  try {
    for (
      const [corrupt, names] of [[[0], "layer0/kernel"], [[3], "layer2/kernel"], [[0, 1], "layer0/kernel"]] as const
    ) {
      const bad = bytes.slice();
      // layer0 and layer2 go off the thread; layer1 is hashed here while layer0 is away.
      for (const i of corrupt) bad[bodyOffset(bytes, bytesOfTensor(tensors[i]!)) + 1000]! ^= 1;
      await withFile(bad, async (path) => {
        for (const source of [() => path, () => chunked(bad, 64 * 1024)]) {
          const { calls } = await spy();
          const seen: string[] = [];
          await assert.rejects(
            () => drainInto(decodeCheckpoint(source(), { parallelHash: true }), seen),
            (e: unknown) => {
              assert.ok(e instanceof ChecksumMismatchError, String(e));
              assert.match(e.message, new RegExp(`tensor "${names}"`));
              return true;
            },
          );
          assert.ok(calls.length >= 1, "the corrupt tensor was hashed off the main thread");
          // Everything before the corrupt tensor came out, nothing from it on.
          const first = tensors.findIndex((x) => x.name === names);
          assert.deepEqual(seen, tensors.slice(0, first).map((x) => x.name));
        }
      });
    }
  } finally {
    setHashThreadForTests("restore");
  }
});

/** Drains tensors' names into `seen` as they come out; rethrows the stream's error. */
async function drainInto(records: ReadableStream<unknown>, seen: string[]): Promise<string[]> {
  for await (const r of records as ReadableStream<{ type: string; tensor?: Tensor }>) {
    if (r.type === "tensor") seen.push(r.tensor!.name);
  }
  return seen;
}

Deno.test("a tensor hashed here is not handed out before the one hashed elsewhere ahead of it matched", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  try {
    await withFile(bytes, async (path) => {
      // The other thread's digest of layer0 is held back until released: layer1, hashed here in
      // the meantime, must wait for it.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      await spy((t, calls) => ({
        get ready() {
          return t.ready;
        },
        async digest(buffer, offset, length) {
          calls.push(length);
          const r = await t.digest(buffer, offset, length);
          if (calls.length === 1) await gate;
          return r;
        },
        close: () => t.close(),
      }));
      const reader = decodeCheckpoint(path, { parallelHash: true }).getReader();
      assert.equal((await reader.read()).value?.type, "metadata");
      const next = reader.read();
      const early = await Promise.race([next.then(() => "out"), new Promise((r) => setTimeout(() => r("held"), 200))]);
      assert.equal(early, "held");
      release();
      const r1 = await next;
      assert.equal(r1.value!.type === "tensor" && r1.value!.tensor.name, "layer0/kernel");
      const r2 = await reader.read();
      assert.equal(r2.value!.type === "tensor" && r2.value!.tensor.name, "layer1/kernel");
      await reader.cancel();
    });
  } finally {
    setHashThreadForTests("restore");
  }
});

Deno.test("when the hash thread fails, the error names the tensor it held and the reader closes it", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  try {
    await withFile(bytes, async (path) => {
      let closed = false;
      // The Worker ends while it hashes layer0 (terminated, as a crash would end it).
      await spy((t, calls) => ({
        get ready() {
          return t.ready;
        },
        digest(buffer, offset, length) {
          calls.push(length);
          const r = t.digest(buffer, offset, length);
          t.close();
          return r;
        },
        close() {
          closed = true;
          t.close();
        },
      }));
      const seen: string[] = [];
      await assert.rejects(() => drainInto(decodeCheckpoint(path, { parallelHash: true }), seen), (e: unknown) => {
        assert.ok(e instanceof Error);
        assert.match(
          e.message,
          /^Cannot verify checkpoint: tensor "layer0\/kernel" at offset \d+: the hash thread was closed/,
        );
        return true;
      });
      assert.deepEqual(seen, []);
      assert.ok(closed, "the reader closed its thread");
    });
  } finally {
    setHashThreadForTests("restore");
  }
});

/**
 * Runs `body` in a child process after a prelude that builds a 3 × 2 MiB checkpoint (`bytes`, to
 * be written to `path`) and starts a Worker hash thread (`thread`); its last stdout line as JSON.
 */
async function child(body: string): Promise<Record<string, unknown>> {
  const url = (p: string) => JSON.stringify(new URL(p, import.meta.url).href);
  const code = `
    import { decodeCheckpoint, encodeCheckpoint } from ${url("../../../mod.ts")};
    import { setHashThreadForTests } from ${url("../../../src/format/_hash.ts")};
    import { WorkerHashThread } from ${url("../../../src/format/_hash_thread.ts")};
    const n = 2 ** 19;
    const tensors = [0, 1, 2].map((i) => ({ name: "t" + i, dtype: "float32", shape: [n], data: new Float32Array(n).fill(i) }));
    const bytes = new Uint8Array(await new Response(encodeCheckpoint({ metadata: { step: 1 }, tensors })).arrayBuffer());
    const path = Deno.makeTempFileSync();
    const thread = new WorkerHashThread(new URL(${url("../../../src/runtime/_hash_thread_worker.ts")}));
    while (!thread.ready) await new Promise((r) => setTimeout(r, 5));
    ${body}
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--ext=ts", code],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, stderr);
  assert.doesNotMatch(stderr, /Uncaught|error/i);
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
}

Deno.test("cancelling a read while a corrupt tensor is on the hash thread leaves nothing running: the process exits by itself", async () => {
  // The thread's digest of t0 (corrupt) is held back 200 ms; the reader is cancelled while it
  // waits. The child must then exit on its own, with no unhandled rejection.
  const result = await child(`
    let calls = 0;
    setHashThreadForTests(() => ({
      get ready() { return thread.ready; },
      async digest(b, o, l) { calls++; const r = await thread.digest(b, o, l); await new Promise((r) => setTimeout(r, 200)); return r; },
      close: () => thread.close(),
    }));
    bytes[4096] ^= 1; // inside t0
    Deno.writeFileSync(path, bytes);
    const reader = decodeCheckpoint(path, { parallelHash: true }).getReader();
    await reader.read(); // metadata
    const next = reader.read();
    await new Promise((r) => setTimeout(r, 50));
    await reader.cancel();
    const r = await next.catch((e) => ({ error: e.name }));
    Deno.removeSync(path);
    console.log(JSON.stringify({ calls, next: r.done ?? r.error ?? r.value.type }));
  `);
  assert.equal(result.calls, 1, "t0 was on the hash thread when the read was cancelled");
  assert.ok(result.next === true || result.next === "ChecksumMismatchError", JSON.stringify(result));
});

Deno.test("a reader abandoned midway (neither finished nor cancelled) does not keep the process alive", async () => {
  // An idle Worker keeps a Deno process running until terminated: the thread ends itself after
  // 2 s without work, so the child exits although its reader is never closed.
  const result = await child(`
    let calls = 0;
    setHashThreadForTests(() => ({
      get ready() { return thread.ready; },
      digest(b, o, l) { calls++; return thread.digest(b, o, l); },
      close: () => thread.close(),
    }));
    Deno.writeFileSync(path, bytes);
    const reader = decodeCheckpoint(path, { parallelHash: true }).getReader();
    await reader.read(); // metadata
    const first = await reader.read(); // t0, hashed on the thread
    Deno.removeSync(path);
    console.log(JSON.stringify({ calls, first: first.value.tensor.name }));
  `);
  assert.equal(result.calls, 1);
  assert.equal(result.first, "t0");
});

Deno.test("loadCheckpoint hashes on both threads into fresh memory: plain ArrayBuffers, every tensor kept", async () => {
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  try {
    await withFile(bytes, async (path) => {
      const { calls } = await spy();
      const back = await loadCheckpoint(path, { parallelHash: true });
      assert.equal(calls.length, 2);
      assert.deepEqual(back.tensors.map((t) => t.name), input.tensors.map((t) => t.name));
      for (const [i, t] of back.tensors.entries()) {
        assert.ok(t.data.buffer instanceof ArrayBuffer && t.data.buffer.byteLength > 0, t.name);
        assert.deepEqual(
          new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength),
          bytesOfTensor(input.tensors[i]!),
        );
      }
    });
  } finally {
    setHashThreadForTests("restore");
  }
});

Deno.test("a hash thread that ends itself while a tensor meant for it is read leaves that tensor to the reader", async () => {
  // The thread closes itself after 2 s without work; a slow read (fresh memory on a loaded
  // machine) can take longer. Here it reports ready once, when layer0 is chosen for it, and has
  // ended by the time layer0 has been read.
  const input = model();
  const bytes = await collect(encodeCheckpoint(input));
  try {
    await withFile(bytes, async (path) => {
      let asked = false;
      const { calls } = await spy((t, calls) => ({
        get ready() {
          if (asked) {
            t.close();
            return false;
          }
          asked = true;
          return t.ready;
        },
        digest(buffer, offset, length) {
          calls.push(length);
          return t.digest(buffer, offset, length);
        },
        close: () => t.close(),
      }));
      const back = await loadCheckpoint(path, { parallelHash: true });
      assert.deepEqual(back.tensors.map((t) => t.name), input.tensors.map((t) => t.name));
      assert.equal(calls.length, 0);
    });
  } finally {
    setHashThreadForTests("restore");
  }
});
