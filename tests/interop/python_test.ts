// Cross-checks the safetensors codec against an independent Python reader/writer written from
// the specification (tests/interop/python/st_spec.py: json + struct + numpy). Needs Debian's
// python3-numpy (`apt-get install -y python3-numpy`, for /usr/bin/python3); skipped otherwise, and
// failed in CI (tests/_ci.ts).
import assert from "node:assert/strict";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { bytesOf } from "../../src/format/dtype.ts";
import { SAFETENSORS_DTYPES, safetensorsCodec } from "../../src/interop/safetensors.ts";
import type { Checkpoint } from "../../src/format/types.ts";
import { edgeCheckpoint } from "../_util.ts";
import { componentTest } from "../_ci.ts";

// Debian installs python3-numpy for /usr/bin/python3 (not a pyenv python3 on PATH); CKPT_PYTHON overrides.
const PYTHON = Deno.env.get("CKPT_PYTHON") ?? "/usr/bin/python3";
const SCRIPT = new URL("./python/st_spec.py", import.meta.url).pathname;

interface Manifest {
  metadata: Record<string, string>;
  tensors: { name: string; dtype: string; shape: number[]; sha256: string }[];
}

async function hasNumpy(): Promise<boolean> {
  try {
    const r = await new Deno.Command(PYTHON, { args: ["-c", "import numpy"], stdout: "null", stderr: "null" }).output();
    return r.success;
  } catch {
    return false;
  }
}

const missing = await hasNumpy()
  ? undefined
  : `${PYTHON} with numpy is not available (install Debian's python3-numpy: apt-get install -y python3-numpy)`;

async function python(command: "read" | "write", path: string): Promise<Manifest> {
  const r = await new Deno.Command(PYTHON, { args: [SCRIPT, command, path], stdout: "piped", stderr: "piped" })
    .output();
  const err = new TextDecoder().decode(r.stderr);
  assert.ok(r.success, `st_spec.py ${command} failed: ${err}`);
  return JSON.parse(new TextDecoder().decode(r.stdout));
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes.slice()));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function manifestOf(ckpt: Checkpoint): Promise<Manifest["tensors"]> {
  return await Promise.all(ckpt.tensors.map(async (t) => ({
    name: t.name,
    dtype: SAFETENSORS_DTYPES[t.dtype],
    shape: [...t.shape],
    sha256: await sha256Hex(bytesOf(t.data)),
  })));
}

componentTest({
  name: "a .safetensors file written by ckpt is read by an independent numpy reader, every dtype bit for bit",
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const ckpt = edgeCheckpoint();
      await saveCheckpoint(`${dir}/ours.safetensors`, ckpt, { codec: safetensorsCodec });
      const theirs = await python("read", `${dir}/ours.safetensors`);
      const ours = await loadCheckpoint(`${dir}/ours.safetensors`, { codecs: [safetensorsCodec] });
      assert.deepEqual(theirs.tensors, await manifestOf(ours));
      assert.equal(theirs.tensors.length, (ckpt.tensors as unknown[]).length);
      assert.equal(theirs.metadata["ckpt.step"], "1234");
      assert.equal(theirs.metadata["ckpt.metrics"], '{"loss":0.125,"nanLoss":"NaN","inf":"Infinity","negZero":"-0"}');
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
}, missing);

componentTest({
  name: "a .safetensors file written by an independent numpy writer loads in ckpt and writes back identically",
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const written = await python("write", `${dir}/theirs.safetensors`);
      const ckpt = await loadCheckpoint(`${dir}/theirs.safetensors`, { codecs: [safetensorsCodec] });
      assert.deepEqual(await manifestOf(ckpt), written.tensors);
      assert.deepEqual(ckpt.metadata, { step: 12, custom: { "safetensors.__metadata__": { format: "np" } } });
      const f32 = ckpt.tensors.find((t) => t.name === "a/f32")!;
      assert.deepEqual(f32.shape, [2, 4]);
      assert.ok(Object.is(f32.data[1], -0) && Number.isNaN(f32.data[2]) && f32.data[3] === Infinity);
      assert.deepEqual(ckpt.tensors.find((t) => t.name === "b/u64")!.data, new BigUint64Array([2n ** 64n - 1n, 1n]));
      assert.deepEqual(ckpt.tensors.find((t) => t.name === "a/bf16")!.data, new Uint16Array([0x3f80, 0xc000, 0x7fc0]));
      // Back out through ckpt: the numpy reader sees the same tensors and metadata.
      await saveCheckpoint(`${dir}/again.safetensors`, ckpt, { codec: safetensorsCodec });
      const again = await python("read", `${dir}/again.safetensors`);
      assert.deepEqual(again.tensors, written.tensors);
      assert.equal(again.metadata.format, "np");
      assert.equal(again.metadata["ckpt.step"], "12");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
}, missing);
