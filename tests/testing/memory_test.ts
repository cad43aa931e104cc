// A 512 MiB comparison in bounded memory, measured for real: two files compared in a child
// process whose peak RSS (VmHWM) is checked against its RSS before. Sizes, not timings.
import assert from "node:assert/strict";
import { saveCheckpoint, type TensorInput } from "../../mod.ts";
import { tempDir } from "../cli/_run.ts";

const CHILD = new URL("./_compare_child.ts", import.meta.url).pathname;
const TENSORS = 64;
const ELEMENTS = 2 * 2 ** 20; // 8 MiB of float32 each: 512 MiB per checkpoint

/** 512 MiB produced lazily through one reused buffer; tensor 40 differs at element 5 when `mark`. */
async function* tensors(mark: boolean): AsyncGenerator<TensorInput> {
  const data = new Float32Array(ELEMENTS);
  for (let i = 0; i < TENSORS; i++) {
    for (let j = 0; j < ELEMENTS; j += 4096) data[j] = i + j;
    data[5] = mark && i === 40 ? -1 : 5;
    yield { name: `layer${i}/kernel`, dtype: "float32", shape: [2048, 1024], data };
  }
}

Deno.test({
  name: "assertCheckpointEquals compares two 512 MiB checkpoints adding under 64 MiB of RSS",
  ignore: Deno.build.os !== "linux", // VmHWM comes from /proc
  async fn() {
    await using t = await tempDir();
    await saveCheckpoint(`${t.dir}/a.ckpt`, { metadata: { step: 1 }, tensors: tensors(false) });
    await saveCheckpoint(`${t.dir}/b.ckpt`, { metadata: { step: 1 }, tensors: tensors(true) });
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CHILD, `${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`],
      stderr: "inherit",
    }).output();
    assert.ok(out.success);
    const r = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.match(
      r.failed,
      /"layer40\/kernel" float32 \[2048, 1024\]: 1 of 2097152 elements outside .*first at \[0, 5\]: actual 5, expected -1$/,
    );
    const growth = r.peakRss - r.baseRss;
    console.log(`peak RSS growth comparing 2 × 512 MiB: ${(growth / 2 ** 20).toFixed(1)} MiB`);
    assert.ok(growth < 64 * 2 ** 20, `RSS grew by ${(growth / 2 ** 20).toFixed(1)} MiB`);
  },
});
