// Bounded memory, measured for real: a 1 GiB checkpoint saved from lazily produced tensors and
// read back tensor by tensor, each in its own process, whose peak RSS (VmHWM) is compared with
// its RSS before the operation. Sizes, not timings, are asserted.
//
// The budget is ckpt's own memory: the producer's two 16 MiB buffers are filled before the
// starting RSS is taken. A save holds two 8 MiB staging buffers and a hash Worker (a Deno Worker
// with node:crypto is 14-18 MiB of RSS here); a tensor-by-tensor load one reused 16 MiB tensor
// buffer and the reader's. Measured: 24-25 MiB and 25-30 MiB. Keeping every tensor would be 1 GiB.
import assert from "node:assert/strict";
import { join } from "node:path";
import { saveCheckpoint } from "../../mod.ts";

const ONE = new URL("../../bench/_save_one.ts", import.meta.url).pathname;
const LIMIT = 48 * 2 ** 20;

async function child(args: string[]): Promise<{ peakRss: number; baseRss: number; bytes?: number; tensors?: number }> {
  const out = await new Deno.Command(Deno.execPath(), { args: ["run", "-A", ONE, ...args], stderr: "piped" }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout).trim());
}

Deno.test({
  name: "saving 1 GiB of lazily produced tensors and reading it back tensor by tensor each add under 48 MiB of RSS",
  ignore: Deno.build.os !== "linux", // VmHWM comes from /proc
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = join(dir, "big.ckpt");
      const save = await child(["--op", "save-lazy-pooled", "--mib", "1024", "--out", path]);
      assert.ok(save.bytes! > 2 ** 30);
      const saveGrowth = save.peakRss - save.baseRss;
      assert.ok(saveGrowth < LIMIT, `save grew RSS by ${(saveGrowth / 2 ** 20).toFixed(1)} MiB`);
      const load = await child(["--op", "load-stream", "--mib", "1024", "--out", path]);
      assert.equal(load.tensors, 64);
      const loadGrowth = load.peakRss - load.baseRss;
      assert.ok(loadGrowth < LIMIT, `tensor-by-tensor load grew RSS by ${(loadGrowth / 2 ** 20).toFixed(1)} MiB`);
      console.log(
        `peak RSS growth: save ${(saveGrowth / 2 ** 20).toFixed(1)} MiB, load ${(loadGrowth / 2 ** 20).toFixed(1)} MiB`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "verifying a checkpoint whose one tensor is 256 MiB adds under 32 MiB of RSS (no tensor is kept)",
  ignore: Deno.build.os !== "linux",
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = join(dir, "one.ckpt");
      const data = new Float32Array(64 * 2 ** 20).fill(0.5);
      await saveCheckpoint(path, {
        metadata: { step: 1 },
        tensors: [{ name: "w", dtype: "float32", shape: [data.length], data }],
      });
      const verify = await child(["--op", "verify", "--mib", "256", "--out", path]);
      assert.equal(verify.tensors, 1);
      const growth = verify.peakRss - verify.baseRss;
      assert.ok(growth < 32 * 2 ** 20, `verify grew RSS by ${(growth / 2 ** 20).toFixed(1)} MiB`);
      console.log(`peak RSS growth: verify of one 256 MiB tensor ${(growth / 2 ** 20).toFixed(1)} MiB`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
