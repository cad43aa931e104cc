import assert from "node:assert/strict";
import { tempDir } from "../cli/_run.ts";

const MOD = new URL("../../src/testing/mod.ts", import.meta.url).href;

/** A user's test file: one golden checkpoint whose third value comes from the environment. */
const TEST_FILE = `
import { assertCheckpointSnapshot } from ${JSON.stringify(MOD)};
Deno.test("ten steps from seed 7", async (t) => {
  const v = Number(Deno.env.get("VALUE") ?? "3");
  await assertCheckpointSnapshot(t, {
    metadata: { step: 10, metrics: { loss: 0.5 } },
    tensors: [{ name: "dense/kernel", dtype: "float32", shape: [2, 2], data: new Float32Array([1, 2, v, 4]) }],
  }, { atol: 1e-3 });
});
`;

async function deno(cwd: string, args: string[], value?: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    env: { NO_COLOR: "1", ...(value ? { VALUE: value } : {}) },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr) };
}

Deno.test("assertCheckpointSnapshot: missing golden fails with the command; --update writes it; later runs compare", async () => {
  await using t = await tempDir();
  await Deno.writeTextFile(`${t.dir}/train_test.ts`, TEST_FILE);
  const golden = `${t.dir}/__snapshots__/train_test.ts.ten steps from seed 7.ckpt`;
  const test = ["test", "--no-config", "-A", "train_test.ts"];

  const missing = await deno(t.dir, test);
  assert.equal(missing.code, 1, missing.text);
  assert.ok(
    missing.text.includes(
      `Missing golden checkpoint ${golden} for "ten steps from seed 7": run \`deno test -A ${t.dir}/train_test.ts -- --update\` to create it`,
    ),
    missing.text,
  );

  const created = await deno(t.dir, [...test, "--", "--update"]);
  assert.equal(created.code, 0, created.text);
  const bytes = await Deno.readFile(golden);

  assert.equal((await deno(t.dir, test)).code, 0, "the same values match");
  assert.equal((await deno(t.dir, test, "3.0005")).code, 0, "within atol 1e-3");

  const moved = await deno(t.dir, test, "3.5");
  assert.equal(moved.code, 1, moved.text);
  assert.ok(
    moved.text.includes(
      `does not match golden checkpoint ${golden}: checkpoints differ: 1 tensor outside tolerance\nvalues outside tolerance (1):\n  "dense/kernel" float32 [2, 2]: 1 of 4 elements outside atol 0.001 + rtol 0 * |expected|; max abs diff 0.5, max rel diff 0.14285714285714285; first at [1, 0]: actual 3.5, expected 3`,
    ),
    moved.text,
  );

  // An update within tolerance leaves the file alone; one outside rewrites it, with the same bytes as a fresh write.
  assert.equal((await deno(t.dir, [...test, "--", "-u"], "3.0005")).code, 0);
  assert.deepEqual(await Deno.readFile(golden), bytes);
  assert.equal((await deno(t.dir, [...test, "--", "--update"], "3.5")).code, 0);
  assert.notDeepEqual(await Deno.readFile(golden), bytes);
  assert.equal((await deno(t.dir, test, "3.5")).code, 0);
  assert.equal((await deno(t.dir, [...test, "--", "--update"])).code, 0);
  assert.deepEqual(await Deno.readFile(golden), bytes, "golden bytes are deterministic");
});
