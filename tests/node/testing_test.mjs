// The ./testing helpers from node:test, with the installed package: checkpoint assertions, and
// golden-checkpoint snapshots whose update switch fits Node's runner (CKPT_UPDATE_SNAPSHOTS=1).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { saveCheckpoint } from "@ckpt/ckpt";
import { assertCheckpointEquals, assertCheckpointSnapshot, AssertionError } from "@ckpt/ckpt/testing";
import { runChild, SCRATCH, withTempDir } from "./_util.mjs";

function ckpt(values) {
  return {
    metadata: { step: 1 },
    tensors: [{ name: "dense/kernel", dtype: "float32", shape: [2, 2], data: new Float32Array(values) }],
  };
}

test("assertCheckpointEquals compares within tolerances and names the first difference", async () => {
  await assertCheckpointEquals(ckpt([1, 2, 3, 4]), ckpt([1, 2, 3, 4.0000001]), { atol: 1e-6 });
  await assert.rejects(
    assertCheckpointEquals(ckpt([1, 2, 3, 4]), ckpt([1, 2, 3, 5])),
    (e) => e instanceof AssertionError && /"dense\/kernel" float32 \[2, 2\]: 1 of 4 elements/.test(e.message),
  );
  await withTempDir(async (dir) => {
    await saveCheckpoint(join(dir, "a.ckpt"), ckpt([1, 2, 3, 4]));
    await assertCheckpointEquals(join(dir, "a.ckpt"), ckpt([1, 2, 3, 4]));
  });
});

const SNAPSHOT_TEST = `
import { test } from "node:test";
import { assertCheckpointSnapshot } from "@ckpt/ckpt/testing";
const value = Number(process.env.VALUE);
test("golden", async (t) => {
  await assertCheckpointSnapshot(t, {
    metadata: { step: 1 },
    tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, value]) }],
  });
});
`;

/** Runs a node:test file in the scratch project; resolves with its exit code and output. */
function nodeTest(file, env) {
  return runChild(process.execPath, ["--test", "--test-reporter=tap", file], {
    cwd: SCRATCH,
    // Without NODE_TEST_CONTEXT, which would make that runner report to this one instead of exiting non-zero.
    env: Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([k]) => k !== "NODE_TEST_CONTEXT")),
  });
}

test("assertCheckpointSnapshot under node:test: missing, update, match, mismatch", async () => {
  // The snapshot test lives in the scratch project (bare imports resolve there), in a folder of its own.
  const dir = await mkdtemp(join(SCRATCH, "snap-"));
  try {
    const file = join(dir, "golden_test.mjs");
    await writeFile(file, SNAPSHOT_TEST);
    const missing = await nodeTest(file, { VALUE: "2" });
    assert.notEqual(missing.code, 0);
    assert.match(missing.out, /Missing golden checkpoint .*CKPT_UPDATE_SNAPSHOTS=1 node --test/);
    const update = await nodeTest(file, { VALUE: "2", CKPT_UPDATE_SNAPSHOTS: "1" });
    assert.equal(update.code, 0, update.out);
    assert.deepEqual(await readdir(join(dir, "__snapshots__")), ["golden_test.mjs.golden.ckpt"]);
    const match = await nodeTest(file, { VALUE: "2" });
    assert.equal(match.code, 0, match.out);
    const mismatch = await nodeTest(file, { VALUE: "3" });
    assert.notEqual(mismatch.code, 0);
    assert.match(mismatch.out, /does not match golden checkpoint/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("assertCheckpointSnapshot refuses something that is not a test context", async () => {
  await assert.rejects(assertCheckpointSnapshot(undefined, ckpt([1, 2, 3, 4])), TypeError);
});
