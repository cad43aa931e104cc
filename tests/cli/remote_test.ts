// The CLI on addresses: reading commands over http(s):// from a local range-honouring Deno.serve
// file server, and reading and writing commands on s3:// against the test endpoint (Ceph RGW).
import assert from "node:assert/strict";
import { saveCheckpoint } from "../../mod.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { s3Test } from "../_s3.ts";
import { serveDirectory } from "../storage/_http_server.ts";
import { assertOneLineError, ckpt, sampleTensors, tempDir, writeSample } from "./_run.ts";

/** A checkpoint whose data is far larger than its index: 4 MiB in two tensors. */
async function writeLarge(path: string): Promise<number> {
  const n = 2 ** 19;
  const { bytes } = await saveCheckpoint(path, {
    metadata: { step: 7, metrics: { loss: 0.25 } },
    tensors: [
      { name: "a", dtype: "float32", shape: [n], data: new Float32Array(n).fill(1) },
      { name: "b", dtype: "float32", shape: [n], data: new Float32Array(n).fill(2) },
    ],
  });
  return bytes;
}

Deno.test("inspect https:// reads only the footer and index by range requests", async () => {
  await using t = await tempDir();
  const size = await writeLarge(`${t.dir}/x.ckpt`);
  const server = serveDirectory(t.dir);
  try {
    const r = await ckpt(["inspect", `${server.url}x.ckpt`], { net: true });
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^verified\s+no: index only/m);
    assert.match(r.out, /^a\s+params\s+float32\s+\[524288\]/m);
    assert.match(r.out, /^step\s+7$/m);
    // The head (to recognise the codec), then the tail holding footer, index and metadata.
    const sent = `${server.bytesSent} of ${size} bytes in ${server.log.join(", ")}`;
    assert.ok(server.bytesSent <= 128 * 1024, sent);
    assert.ok(server.log.length <= 4, sent);
    assert.ok(server.log.every((l) => l.startsWith("HEAD") || / bytes=/.test(l)), server.log.join(", "));
  } finally {
    await server.close();
  }
});

Deno.test("verify, convert and diff read http:// checkpoints whole", async () => {
  await using t = await tempDir();
  const { sha256 } = await writeSample(`${t.dir}/a.ckpt`);
  const server = serveDirectory(t.dir);
  try {
    const url = `${server.url}a.ckpt`;
    const v = await ckpt(["verify", "--sha256", sha256, url], { net: true });
    assert.equal(v.code, 0, v.err);
    const c = await ckpt(["convert", url, `${t.dir}/back.ckpt`], { net: true });
    assert.equal(c.code, 0, c.err);
    assert.deepEqual(await Deno.readFile(`${t.dir}/back.ckpt`), await Deno.readFile(`${t.dir}/a.ckpt`));
    const d = await ckpt(["diff", url, `${t.dir}/back.ckpt`], { net: true });
    assert.equal(d.code, 0, d.err + d.out);
    const missing = await ckpt(["inspect", `${server.url}nothing.ckpt`], { net: true });
    assertOneLineError(missing, 3, /nothing\.ckpt/);
  } finally {
    await server.close();
  }
});

Deno.test("convert refuses an http:// output: HTTP addresses are read-only", async () => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  const r = await ckpt(["convert", `${t.dir}/a.ckpt`, "http://127.0.0.1:9/out.ckpt"], { net: true });
  assertOneLineError(r, 2, /HTTP addresses are read-only/);
});

s3Test("convert - s3://… uploads from stdin; inspect, verify and convert read it back", async (bucket) => {
  await using t = await tempDir();
  const { sha256 } = await writeSample(`${t.dir}/a.ckpt`);
  const env = {
    AWS_ENDPOINT_URL: bucket.endpoint.endpoint,
    AWS_REGION: bucket.endpoint.region,
    AWS_ACCESS_KEY_ID: bucket.endpoint.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: bucket.endpoint.credentials.secretAccessKey,
  };
  const url = `s3://${bucket.name}/models/x.ckpt`;
  const up = await ckpt(["convert", "-", url], { stdin: await Deno.readFile(`${t.dir}/a.ckpt`), env, net: true });
  assert.equal(up.code, 0, up.err);
  const stored = await bucket.store().get("models/x.ckpt");
  assert.deepEqual(
    new Uint8Array(await new Response(stored.body).arrayBuffer()),
    await Deno.readFile(`${t.dir}/a.ckpt`),
  );
  const i = await ckpt(["inspect", url], { env, net: true });
  assert.equal(i.code, 0, i.err);
  assert.match(i.out, /^dense\/kernel\s+params\s+float32\s+\[2, 3\]/m);
  const v = await ckpt(["verify", "--sha256", sha256, url], { env, net: true });
  assert.equal(v.code, 0, v.err);
  const j = await ckpt(["convert", url, `s3://${bucket.name}/models/x.jsonl`, "--codec", "json"], { env, net: true });
  assert.equal(j.code, 0, j.err);
  const back = await ckpt(["convert", `s3://${bucket.name}/models/x.jsonl`, "-"], { env, net: true });
  assert.deepEqual(back.stdout, await Deno.readFile(`${t.dir}/a.ckpt`));
  const missing = await ckpt(["inspect", `s3://${bucket.name}/models/none.ckpt`], { env, net: true });
  assertOneLineError(missing, 3, /none\.ckpt/);
});

s3Test("ls s3://bucket/run lists a manager directory kept on S3", async (bucket) => {
  const manager = await CheckpointManager.open(bucket.store({ prefix: "run" }), { maxToKeep: 2, onWarning: () => {} });
  for (const step of [1, 2, 3]) {
    await manager.save({ metadata: { step, metrics: { loss: 1 / step } }, tensors: sampleTensors() });
  }
  await manager.close();
  const env = {
    AWS_ENDPOINT_URL: bucket.endpoint.endpoint,
    AWS_REGION: bucket.endpoint.region,
    AWS_ACCESS_KEY_ID: bucket.endpoint.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: bucket.endpoint.credentials.secretAccessKey,
  };
  const r = await ckpt(["ls", "--json", `s3://${bucket.name}/run`], { env, net: true });
  assert.equal(r.code, 0, r.err);
  const listed = JSON.parse(r.out) as { step: number; status: string; path: string }[];
  assert.deepEqual(listed.map((e) => [e.step, e.status]), [[2, "ok"], [3, "ok"]]);
  assert.ok(listed.every((e) => e.path.startsWith(`s3://${bucket.name}/run/step-`)));
  const none = await ckpt(["ls", `s3://${bucket.name}/nothing`], { env, net: true });
  assertOneLineError(none, 3, /not a checkpoint manager directory/);
});
