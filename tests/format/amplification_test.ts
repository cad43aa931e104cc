// Amplification: small hostile inputs must not cost memory out of proportion. Each case runs in
// its own process (tests/format/_amplify_child.ts) whose peak RSS (VmHWM, reset just before the
// decode) is compared with its RSS at that moment. Sizes, not timings, are asserted.
import assert from "node:assert/strict";
import { encodeCheckpoint } from "../../mod.ts";
import { resolveLimits } from "../../src/format/limits.ts";
import { loadCheckpoint } from "../../mod.ts";
import { assertOneLineError, ckpt } from "../cli/_run.ts";
import { collect } from "../_util.ts";

const CHILD = new URL("./_amplify_child.ts", import.meta.url).pathname;
const MiB = 2 ** 20;

async function child(op: string, caps: object = {}): Promise<{ growth: number; error?: string; elements: number }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CHILD, op, JSON.stringify(caps)],
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const r = JSON.parse(new TextDecoder().decode(out.stdout).trim());
  return { growth: r.peakRss - r.baseRss, error: r.error, elements: r.elements };
}

const linux = Deno.build.os === "linux"; // VmHWM and clear_refs come from /proc

Deno.test({
  name: "a 256 KiB gzip stream declaring a 256 MiB tensor stops at maxCompressionRatio, under 96 MiB of RSS",
  ignore: !linux,
  async fn() {
    const r = await child("gzip-body", { maxCompressionRatio: 100 });
    assert.match(
      r.error!,
      /^RangeError: Cannot decode checkpoint: gzip stream expands \d+ compressed bytes to over \d+, past maxCompressionRatio 100$/,
    );
    assert.ok(r.growth < 96 * MiB, `grew RSS by ${(r.growth / MiB).toFixed(1)} MiB`);
  },
});

Deno.test({
  name: "the same stream stops at maxDecodedBytes 64 MiB, under 128 MiB of RSS",
  ignore: !linux,
  async fn() {
    const r = await child("gzip-body", { maxDecodedBytes: 64 * MiB });
    assert.match(
      r.error!,
      /^RangeError: Cannot decode checkpoint: more than maxDecodedBytes 67108864 bytes of gzip content/,
    );
    assert.ok(r.growth < 128 * MiB, `grew RSS by ${(r.growth / MiB).toFixed(1)} MiB`);
  },
});

Deno.test({
  name: "a JSON tensor of a million one-element data lines (14 MiB) decodes with under 64 MiB of RSS growth",
  ignore: !linux,
  async fn() {
    const r = await child("json-lines:1000000");
    assert.equal(r.error, undefined);
    assert.equal(r.elements, 1_000_000);
    assert.ok(r.growth < 64 * MiB, `grew RSS by ${(r.growth / MiB).toFixed(1)} MiB`);
  },
});

Deno.test("maxDecodedBytes and maxCompressionRatio accept Infinity (the default) and refuse nonsense", () => {
  assert.equal(resolveLimits().maxDecodedBytes, Infinity);
  assert.equal(resolveLimits().maxCompressionRatio, Infinity);
  assert.equal(resolveLimits({ maxCompressionRatio: 2.5 }).maxCompressionRatio, 2.5);
  for (const bad of [0, -1, NaN]) {
    assert.throws(() => resolveLimits({ maxDecodedBytes: bad }), RangeError);
    assert.throws(() => resolveLimits({ maxCompressionRatio: bad }), RangeError);
  }
  assert.throws(() => resolveLimits({ maxDecodedBytes: 1.5 }), RangeError);
  assert.throws(() => resolveLimits({ maxTensorBytes: Infinity }), RangeError);
});

Deno.test("maxDecodedBytes counts uncompressed streams too, and a checkpoint within the caps loads", async () => {
  const bytes = await collect(encodeCheckpoint({
    metadata: { step: 1 },
    tensors: [{ name: "w", dtype: "uint8", shape: [4096], data: new Uint8Array(4096) }],
  }));
  await assert.rejects(
    () => loadCheckpoint(bytes, { maxDecodedBytes: 4096 }),
    /more than maxDecodedBytes 4096 bytes to decode/,
  );
  assert.equal((await loadCheckpoint(bytes, { maxDecodedBytes: bytes.byteLength })).tensors.length, 1);
  const gz = await collect(encodeCheckpoint({
    metadata: { step: 1 },
    tensors: [{ name: "w", dtype: "uint8", shape: [4 * MiB], data: new Uint8Array(4 * MiB) }],
  }, { compression: "gzip" }));
  await assert.rejects(() => loadCheckpoint(gz, { maxCompressionRatio: 100 }), /past maxCompressionRatio 100/);
  assert.equal((await loadCheckpoint(gz, { maxCompressionRatio: 2000 })).tensors[0]!.data.length, 4 * MiB);
});

Deno.test("the CLI caps the expansion of standard input, not of a file given by path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/zeros.ckpt.gz`;
    const gz = await collect(encodeCheckpoint({
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float32", shape: [2 * MiB], data: new Float32Array(2 * MiB) }],
    }, { compression: "gzip" }));
    await Deno.writeFile(path, gz);
    assert.equal((await ckpt(["verify", path])).code, 0);
    assertOneLineError(await ckpt(["verify", "-"], { stdin: gz }), 4, /past maxCompressionRatio 100/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
