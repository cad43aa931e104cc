// Run by sha256_ffi_test.ts in a child process, with or without FFI granted: libcrypto's SHA-256
// on the native thread against node:crypto, and loads through it. Prints one JSON line.
import { createHash } from "node:crypto";
import {
  ChecksumMismatchError,
  encodeCheckpoint,
  loadCheckpoint,
  readCheckpointIndex,
  verifyCheckpoint,
} from "../../mod.ts";
import { offThreadSha256, offThreadSha256Available } from "../../src/runtime/_sha256_ffi.ts";
import { setNativeDigestForTests } from "../../src/format/_hash.ts";

const MiB = 2 ** 20;
const available = offThreadSha256Available();
const bytes = new Uint8Array(5 * MiB + 3).map((_, i) => (i * 2654435761) >>> 24);
// Part sets around the size hashed at once on the calling thread (64 KiB) and empty ones.
const sets = [
  [],
  [new Uint8Array(0)],
  [bytes.subarray(0, 3)],
  [bytes.subarray(0, 65536)],
  [bytes.subarray(0, 65537)],
  [bytes.subarray(0, 100), new Uint8Array(0), bytes.subarray(100, 3 * MiB), bytes.subarray(3 * MiB)],
];
const digests: boolean[] = [];
for (const parts of sets) {
  const job = offThreadSha256(parts);
  if (!job) break;
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  digests.push(Buffer.from(await job).equals(h.digest()));
}
// The same sets as async iterables (a decoder's parts: each asked for while the one before is
// hashed), and one that fails after a large part: the digest rejects with its error.
const iterables: boolean[] = [];
if (available) {
  for (const parts of sets) {
    const h = createHash("sha256");
    for (const p of parts) h.update(p);
    const job = offThreadSha256((async function* () {
      for (const p of parts) yield p;
    })());
    iterables.push(Buffer.from(await job!).equals(h.digest()));
  }
  const failing = offThreadSha256((async function* () {
    yield bytes;
    throw new SyntaxError("plane 3 is not valid deflate data");
  })());
  iterables.push(await failing!.then(() => false, (e) => e instanceof SyntaxError));
}
// Two jobs at once, each on its own thread, both right.
let concurrent = false;
if (available) {
  const [a, b] = await Promise.all([offThreadSha256([bytes]), offThreadSha256([bytes.subarray(1)])]);
  concurrent = Buffer.from(a!).equals(createHash("sha256").update(bytes).digest()) &&
    Buffer.from(b!).equals(createHash("sha256").update(bytes.subarray(1)).digest());
}

// Loads of raw and byte-grouped files through whatever thread this process has: large tensors
// with small ones between them (held back while the next large body is read), the third large
// one read into the first one's buffer.
const data = new Float32Array(3 * MiB / 4).map((_, i) => Math.fround(Math.sin(i) * 0.02));
const small = new Float32Array(300).map((_, i) => Math.fround(Math.cos(i) * 0.01));
const input = {
  metadata: { step: 1 },
  tensors: [
    { name: "a", dtype: "float32" as const, shape: [data.length], data },
    { name: "a/bias", dtype: "float32" as const, shape: [small.length], data: small },
    { name: "b", dtype: "float32" as const, shape: [data.length / 3], data: data.subarray(0, data.length / 3) },
    { name: "b/steps", dtype: "int32" as const, shape: [2], data: new Int32Array([7, -7]) },
    {
      name: "c",
      dtype: "float32" as const,
      shape: [data.length / 3],
      data: data.subarray(data.length / 3, 2 * data.length / 3),
    },
  ],
};
const loads: Record<string, { exact: boolean; corruptNamed: boolean }> = {};
for (const compression of ["none", "bytegroup"] as const) {
  const file = new Uint8Array(await new Response(encodeCheckpoint(input, { compression })).arrayBuffer());
  const path = await Deno.makeTempFile();
  await Deno.writeFile(path, file);
  const out = await loadCheckpoint(path);
  const exact = out.tensors.every((t, i) =>
    Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).equals(
      Buffer.from(input.tensors[i]!.data.buffer, input.tensors[i]!.data.byteOffset, input.tensors[i]!.data.byteLength),
    )
  );
  // The last byte of tensor b's record digest flipped.
  const e = (await readCheckpointIndex(path)).tensors.find((t) => t.name === "b")!;
  file[e.offset + e.length - 1]! ^= 1;
  await Deno.writeFile(path, file);
  const corruptNamed = await loadCheckpoint(path).then(
    () => false,
    (err) => err instanceof ChecksumMismatchError && err.message.includes('tensor "b"'),
  );
  await Deno.remove(path);
  loads[compression] = { exact, corruptNamed };
}
// Saves (tensors of 1 MiB or more hashed there: byte-grouped from copies, raw where they lie):
// the same bytes as with no native thread.
const encoded = async (compression: "bytegroup" | "none") =>
  new Uint8Array(await new Response(encodeCheckpoint(input, { compression })).arrayBuffer());
const viaNative = [await encoded("bytegroup"), await encoded("none")];
setNativeDigestForTests(null);
const oneThread = [await encoded("bytegroup"), await encoded("none")];
setNativeDigestForTests("restore");
const saves = viaNative.every((b, i) => Buffer.from(b).equals(oneThread[i]!));
// Damaged copies (a flipped byte, a cut) read with the native thread (the default) and on one
// thread (`parallelHash: false`): the same tensors or the same error, whichever thread hashed.
let state = 20261204;
const rand = (n: number) => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state % n;
};
const outcome = async (path: string, parallelHash?: boolean) => {
  try {
    const c = await loadCheckpoint(path, { parallelHash });
    return "ok " +
      c.tensors.map((t) => t.name + ":" + createHash("sha256").update(t.data as Float32Array).digest("hex"))
        .join(",");
  } catch (e) {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
};
const verifyOutcome = (path: string, parallelHash?: boolean) =>
  verifyCheckpoint(path, { parallelHash }).then(
    (v) => `ok ${v.digest}`,
    (e) => `${(e as Error).name}: ${(e as Error).message}`,
  );
let damaged = 0;
const disagreements: string[] = [];
for (const compression of ["none", "bytegroup"] as const) {
  const file = new Uint8Array(await new Response(encodeCheckpoint(input, { compression })).arrayBuffer());
  for (let i = 0; i < 40; i++) {
    const bad = i % 4 === 3 ? file.slice(0, rand(file.byteLength)) : file.slice();
    if (i % 4 !== 3) bad[rand(bad.byteLength)]! ^= 1 << rand(8);
    const path = await Deno.makeTempFile();
    await Deno.writeFile(path, bad);
    const [native, one] = [await outcome(path), await outcome(path, false)];
    if (native !== one) disagreements.push(`${compression} #${i}: ${native.slice(0, 200)} | ${one.slice(0, 200)}`);
    const [verified, verifiedOne] = [await verifyOutcome(path), await verifyOutcome(path, false)];
    if (verified !== verifiedOne) disagreements.push(`verify ${compression} #${i}: ${verified} | ${verifiedOne}`);
    damaged++;
    await Deno.remove(path);
  }
}
console.log(JSON.stringify({ available, digests, iterables, concurrent, loads, saves, damaged, disagreements }));
