// The manager on S3 (Ceph RGW from scripts/ceph.sh in CI): the same suite as on the other stores,
// with a small part size so checkpoints go up as multipart uploads.
import assert from "node:assert/strict";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { s3Fixture, s3Ignore, s3Test } from "../_s3.ts";
import { exact, makeCheckpoint } from "./_helpers.ts";
import { managerOnStore } from "./_store_suite.ts";

managerOnStore("S3Store", () => s3Fixture({ partSize: 5 * 2 ** 20, concurrency: 2, prefix: "run" }), {
  ignore: s3Ignore,
  sanitize: false,
});

s3Test('CheckpointManager.open("s3://bucket/run") resumes from what an earlier manager saved there', async (bucket) => {
  const storage = {
    s3: {
      endpoint: bucket.endpoint.endpoint,
      region: bucket.endpoint.region,
      credentials: bucket.endpoint.credentials,
    },
  };
  const address = `s3://${bucket.name}/runs/a`;
  const first = await CheckpointManager.open(address, { storage, maxToKeep: 2, onWarning: () => {} });
  for (const step of [1, 2, 3]) await first.save(makeCheckpoint(step));
  assert.equal(first.dir, `${address}/`);
  await first.close();
  const again = await CheckpointManager.open(address, { storage, onWarning: () => {} });
  assert.deepEqual((await again.list()).map((e) => e.step), [2, 3]);
  assert.deepEqual(exact((await again.latest())!.tensors), exact(makeCheckpoint(3).tensors as never));
  await again.close();
  // The objects are where the address says.
  const keys = await Array.fromAsync(bucket.store({ prefix: "runs/a" }).list(""), (o) => o.key);
  assert.ok(keys.includes("index.json") && keys.some((k) => k.startsWith("step-000000003.")), keys.join(", "));
});
