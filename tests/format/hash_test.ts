import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { equalBytes, peekDigest, sha256, toHex, wasmSha256ForTests } from "../../src/format/_hash.ts";
import { prng } from "../_util.ts";

function reference(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

function randomBytes(n: number, seed: number): Uint8Array {
  const next = prng(seed);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(next() * 256);
  return out;
}

Deno.test("sha256 gives Uint8Array digests, not Buffers, and hex on request", () => {
  const d = sha256().update(new Uint8Array([97, 98, 99])).digest();
  assert.equal(Object.getPrototypeOf(d), Uint8Array.prototype);
  assert.equal(toHex(d), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(sha256().update(new Uint8Array([97, 98, 99])).digest("hex"), toHex(d));
});

Deno.test("the WebAssembly SHA-256 matches node:crypto over random chunkings, with hashes interleaved", async () => {
  const wasm = await wasmSha256ForTests();
  const data = randomBytes(300_001, 7);
  const next = prng(11);
  // Three hashes fed in turns over the same bytes, split at random points: each must keep its own state.
  const hashes = [wasm.fresh(), wasm.fresh(), wasm.fresh()];
  const at = [0, 0, 0];
  while (at.some((a) => a < data.byteLength)) {
    const i = Math.floor(next() * 3);
    const n = Math.floor(next() * 70_000);
    hashes[i]!.update(data.subarray(at[i]!, Math.min(data.byteLength, at[i]! + n)));
    at[i] = Math.min(data.byteLength, at[i]! + n);
  }
  for (const h of hashes) assert.equal(h.digest("hex"), reference(data));
  assert.equal(wasm.fresh().digest("hex"), reference(new Uint8Array(0)));
});

Deno.test("peekDigest leaves the hash going, on both implementations", async () => {
  const wasm = await wasmSha256ForTests();
  const a = new Uint8Array([1, 2, 3]);
  const b = new Uint8Array([4, 5]);
  for (const [fresh, peek] of [[sha256, peekDigest], [wasm.fresh, wasm.peek]] as const) {
    const h = fresh().update(a);
    const other = fresh().update(b); // another hash in between
    assert.equal(toHex(peek(h)), reference(a));
    h.update(b);
    assert.equal(h.digest("hex"), reference(new Uint8Array([1, 2, 3, 4, 5])));
    assert.equal(other.digest("hex"), reference(b));
  }
});

Deno.test("a WebAssembly hash used after its digest is a TypeError", async () => {
  const wasm = await wasmSha256ForTests();
  const h = wasm.fresh();
  h.digest();
  assert.throws(() => h.update(new Uint8Array(1)), TypeError);
});

Deno.test("equalBytes compares contents and lengths", () => {
  assert.ok(equalBytes(new Uint8Array([1, 2]), new Uint8Array([1, 2])));
  assert.ok(!equalBytes(new Uint8Array([1, 2]), new Uint8Array([1, 3])));
  assert.ok(!equalBytes(new Uint8Array([1]), new Uint8Array([1, 0])));
});
