// The CLI on sharded checkpoints (a manifest and its parts): inspect, verify (every slice and every
// part's stream digest), diff, ls of a manager directory, and convert both ways, locally and on S3.
import assert from "node:assert/strict";
import { loadCheckpoint } from "../../mod.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { readShardManifest } from "../../src/shard/read.ts";
import { s3Test } from "../_s3.ts";
import { assertOneLineError, ckpt, tempDir, writeSample } from "./_run.ts";

/** Tensors bit for bit by name: a sharded checkpoint holds them in name order. */
function byName(c: { tensors: readonly { name: string; data: ArrayBufferView }[] }) {
  return [...c.tensors].sort((a, b) => (a.name < b.name ? -1 : 1)).map((t) => [
    t.name,
    new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength),
  ]);
}

Deno.test("convert --shards 3 writes a sharded checkpoint; convert back gives the original file bit for bit", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const r = await ckpt(["convert", a, `${t.dir}/s.ckpt`, "--shards", "3"]);
  assert.deepEqual([r.code, r.out, r.err], [0, "", ""]);
  const { manifest } = await readShardManifest(`${t.dir}/s.ckpt`);
  assert.equal(manifest.parts.length, 3);
  assert.deepEqual(byName(await loadCheckpoint(`${t.dir}/s.ckpt`)), byName(await loadCheckpoint(a)));
  const back = await ckpt(["convert", `${t.dir}/s.ckpt`, `${t.dir}/back.ckpt`]);
  assert.equal(back.code, 0, back.err);
  const original = await loadCheckpoint(a);
  const again = await loadCheckpoint(`${t.dir}/back.ckpt`);
  assert.deepEqual(again.metadata, original.metadata);
  assert.deepEqual(byName(again), byName(original));
  // Converted twice the same way, the one-file output is the same bytes (tensors in name order).
  const twice = await ckpt(["convert", `${t.dir}/s.ckpt`, `${t.dir}/back2.ckpt`]);
  assert.equal(twice.code, 0, twice.err);
  assert.deepEqual(await Deno.readFile(`${t.dir}/back2.ckpt`), await Deno.readFile(`${t.dir}/back.ckpt`));
});

Deno.test("convert --shards refuses an existing OUT, a compressed output and standard output", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  assertOneLineError(await ckpt(["convert", a, a, "--shards", "2"]), 3, /a checkpoint is already there/);
  assertOneLineError(await ckpt(["convert", a, `${t.dir}/z`, "--shards", "2", "--gzip"]), 2, /uncompressed binary/);
  assertOneLineError(await ckpt(["convert", a, "-", "--shards", "2"]), 2, /not -/);
  assertOneLineError(await ckpt(["convert", a, `${t.dir}/z`, "--shards", "0"]), 2, /from 1 to 10000/);
});

Deno.test("inspect, verify and diff read a sharded checkpoint through its manifest", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const s = `${t.dir}/s.ckpt`;
  assert.equal((await ckpt(["convert", a, s, "--shards", "2"])).code, 0);
  const { digest } = await readShardManifest(s);
  const i = await ckpt(["inspect", "--json", s]);
  assert.equal(i.code, 0, i.err);
  const report = JSON.parse(i.out);
  assert.equal(report.codec, "sharded");
  assert.equal(report.streamDigest, digest);
  assert.equal(report.tensors.length, (await loadCheckpoint(a)).tensors.length);
  const v = await ckpt(["verify", "--sha256", digest, s]);
  assert.equal(v.code, 0, v.err);
  assert.match(v.out, /^ok .*s\.ckpt: sharded, step \d+, \d+ tensors, .* \(matches --sha256\)/);
  const d = await ckpt(["diff", s, a]);
  assert.equal(d.code, 0, d.out + d.err);
  assert.match(d.out, /0 outside/);
});

Deno.test("verify finds a damaged part of a sharded checkpoint and names it", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const s = `${t.dir}/s.ckpt`;
  assert.equal((await ckpt(["convert", a, s, "--shards", "2"])).code, 0);
  const { manifest } = await readShardManifest(s);
  const part = `${s}.parts/${manifest.saveId}/${manifest.parts[1]!.name}`;
  const bytes = await Deno.readFile(part);
  // A byte of the part's metadata record: no slice covers it, only the part's own digests do.
  bytes[20]! ^= 0x20;
  await Deno.writeFile(part, bytes);
  const v = await ckpt(["verify", s]);
  assert.equal(v.code, 4, v.out + v.err);
  assert.match(v.err, /part-00002-of-00002\.ckpt/);
  await Deno.remove(part);
  const gone = await ckpt(["verify", s]);
  assert.notEqual(gone.code, 0);
  assert.match(gone.err, /part-00002-of-00002\.ckpt/);
});

Deno.test("ls lists a manager's sharded checkpoints with their kind", async () => {
  await using t = await tempDir();
  const manager = await CheckpointManager.open(`${t.dir}/run`);
  await manager.save({
    metadata: { step: 4, metrics: { loss: 0.25 } },
    tensors: [{ name: "w", dtype: "float32", shape: [8], data: new Float32Array(8).fill(1) }],
  }, { shards: 2 });
  await manager.close();
  const r = await ckpt(["ls", `${t.dir}/run`]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^\s+4 .* sharded .* ok /m);
});

s3Test("convert --shards to s3://, then inspect, verify and convert back from there", async (bucket) => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const env = {
    AWS_ENDPOINT_URL: bucket.endpoint.endpoint,
    AWS_REGION: bucket.endpoint.region,
    AWS_ACCESS_KEY_ID: bucket.endpoint.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: bucket.endpoint.credentials.secretAccessKey,
  };
  const url = `s3://${bucket.name}/models/s.ckpt`;
  const up = await ckpt(["convert", a, url, "--shards", "2"], { env, net: true });
  assert.equal(up.code, 0, up.err);
  const v = await ckpt(["verify", url], { env, net: true });
  assert.equal(v.code, 0, v.err);
  assert.match(v.out, /sharded/);
  const back = await ckpt(["convert", url, `${t.dir}/back.ckpt`], { env, net: true });
  assert.equal(back.code, 0, back.err);
  assert.deepEqual(byName(await loadCheckpoint(`${t.dir}/back.ckpt`)), byName(await loadCheckpoint(a)));
});
