import assert from "node:assert/strict";
import { MirroredManager } from "../../src/manager/mirror.ts";
import { ckpt, tempDir } from "./_run.ts";

Deno.test("ls --mirror lists both tiers of a MirroredManager, each row with its tier", async () => {
  await using t = await tempDir();
  const m = await MirroredManager.open(`${t.dir}/local`, `${t.dir}/mirror`, {
    local: { maxToKeep: 1 },
    mirror: { maxToKeep: 2 },
  });
  for (const step of [10, 20, 30]) {
    await m.save({
      metadata: { step },
      tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([step]) }],
    });
  }
  await m.mirrored();
  await m.close();
  const r = await ckpt(["ls", `${t.dir}/local`, "--mirror", `${t.dir}/mirror`]);
  assert.equal(r.code, 0, r.err);
  const lines = r.out.trimEnd().split("\n");
  assert.match(lines[0]!, /^step\s+tier\s+saved\s+size\s+kind/);
  assert.deepEqual(lines.slice(1, -2).map((l) => l.trim().split(/\s+/).slice(0, 2)), [
    ["20", "mirror"],
    ["30", "local"],
    ["30", "mirror"],
  ]);
  const json = JSON.parse((await ckpt(["ls", "--json", `${t.dir}/local`, "--mirror", `${t.dir}/mirror`])).out);
  assert.deepEqual(json.map((e: { step: number; tier: string }) => [e.step, e.tier]), [
    [20, "mirror"],
    [30, "local"],
    [30, "mirror"],
  ]);
  const local = JSON.parse((await ckpt(["ls", "--json", `${t.dir}/local`])).out);
  assert.equal(local[0].tier, undefined, "without --mirror, no tier");
});
