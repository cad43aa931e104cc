// kill -9 of a writer, of the committer, and of all of them, at many points of a sharded save
// (local directory and s3://): the previous checkpoint stays intact, the new one is either not
// there or whole and verified, and the next save succeeds.
import assert from "node:assert/strict";
import { loadCheckpoint } from "../../mod.ts";
import { commitShards, listShardLeftovers, removeShardLeftovers, saveSharded } from "../../src/shard/mod.ts";
import { s3Test, type TestBucket } from "../_s3.ts";
import { assertSameCheckpoint, withDir } from "../_util.ts";
import { replica, SPLIT } from "./_fixture.ts";
import type { StorageOptions } from "../../src/io/read.ts";

const CHILD = new URL("./_writer_child.ts", import.meta.url).pathname;
const BIG = 2048; // rows of 256 floats: 2 MiB per writer's replica of `embed`

function spawnWriter(args: Record<string, unknown>, env: Record<string, string> = {}) {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CHILD, JSON.stringify(args)],
    stdout: "piped",
    stderr: "piped",
    env,
  }).spawn();
}

/** Runs one sharded save of step 2 by 2 writer processes and kills `victims` after `delay` ms. */
async function killedSave(
  address: string,
  saveId: string,
  victims: number[],
  delay: number,
  env: Record<string, string>,
) {
  const children = [0, 1].map((writer) =>
    spawnWriter({ address, writer, writers: 2, saveId, seed: 2, bigRows: BIG, deadline: 2500 }, env)
  );
  await new Promise((r) => setTimeout(r, delay));
  for (const v of victims) {
    try {
      children[v]!.kill("SIGKILL");
    } catch { /* already exited */ }
  }
  await Promise.all(children.map((c) => c.output()));
}

async function scenario(base: string, options: StorageOptions, env: Record<string, string>) {
  const previous = replica(1, BIG);
  const prevAddress = `${base}/step-1.ckpt`;
  await saveSharded(prevAddress, previous, { writers: 2, splitBytes: SPLIT, ...options });
  const expected = replica(2, BIG);
  let committedRuns = 0, cutRuns = 0;
  const cases: [number[], number][] = [];
  for (const victims of [[1], [0], [0, 1]]) {
    for (const delay of [150, 350, 600, 900, 1400]) cases.push([victims, delay]);
  }
  for (const [i, [victims, delay]] of cases.entries()) {
    const address = `${base}/step-2-${i}.ckpt`;
    await killedSave(address, "a", victims, delay, env);
    // The previous checkpoint is intact.
    assertSameCheckpoint(await loadCheckpoint(prevAddress, options), previous);
    // The new one is not there, or whole and verified.
    let there = true;
    try {
      assertSameCheckpoint(await loadCheckpoint(address, options), expected);
    } catch (e) {
      assert.match(String(e), /No such file or directory|no such object/, `case ${i}: ${e}`);
      there = false;
    }
    if (there) committedRuns++;
    else {
      cutRuns++;
      // A committer killed after every part was done: another committer finishes the save.
      const left = await listShardLeftovers(address, options);
      if (left.filter((k) => k.includes("/done-")).length === 2) {
        await commitShards(address, { saveId: "a", writers: 2, deadline: 1000, ...options });
        assertSameCheckpoint(await loadCheckpoint(address, options), expected);
      } else {
        // Otherwise the leftovers are cleaned and the next save succeeds.
        await removeShardLeftovers(address, options);
        assert.deepEqual(await listShardLeftovers(address, options), []);
        await saveSharded(address, expected, { writers: 2, splitBytes: SPLIT, saveId: "b", ...options });
        assertSameCheckpoint(await loadCheckpoint(address, options), expected);
      }
    }
  }
  return { committedRuns, cutRuns };
}

Deno.test("kill -9 of a writer, the committer or both at many points of a sharded save to a directory", async () => {
  await withDir(async (dir) => {
    const { cutRuns } = await scenario(dir, {}, {});
    assert.ok(cutRuns > 0, "some kills landed before the commit");
  });
});

s3Test(
  "kill -9 of a writer, the committer or both at many points of a sharded save to s3://",
  async (b: TestBucket) => {
    const options = {
      storage: {
        s3: { endpoint: b.endpoint.endpoint, region: b.endpoint.region, credentials: b.endpoint.credentials },
      },
    };
    const { cutRuns } = await scenario(`s3://${b.name}/run`, options, { AWS_ENDPOINT_URL: b.endpoint.endpoint });
    assert.ok(cutRuns > 0, "some kills landed before the commit");
  },
);
