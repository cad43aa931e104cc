// `ckpt convert` to and from TF.js artifacts: a local directory, an http:// folder from a local
// range-honouring Deno.serve file server (reads), and s3:// against the test endpoint (Ceph RGW).
import assert from "node:assert/strict";
import { saveCheckpoint } from "../../mod.ts";
import { writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { s3Test } from "../_s3.ts";
import { serveDirectory } from "../storage/_http_server.ts";
import { assertOneLineError, ckpt, tempDir, writeSample } from "./_run.ts";

Deno.test("convert --codec tfjs writes model.json and shards; converting them back gives the checkpoint byte for byte", async () => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  // float64 and int64 tensors: TF.js has no such weights.
  const refused = await ckpt(["convert", `${t.dir}/a.ckpt`, `${t.dir}/web`, "--codec", "tfjs"]);
  assertOneLineError(
    refused,
    4,
    /a\.ckpt cannot be written as tfjs: .*dtype float64 has no TF\.js weight type \(use --narrow/,
  );
  const r = await ckpt(["convert", `${t.dir}/a.ckpt`, `${t.dir}/web`, "--codec", "tfjs", "--narrow"]);
  assert.equal(r.code, 0, r.err);
  assert.deepEqual([...Deno.readDirSync(`${t.dir}/web`)].map((e) => e.name).sort(), ["model.json", "weights.bin"]);
  // The values fit, and the "ckpt" record keeps the original dtypes: the same checkpoint comes back.
  for (const input of [`${t.dir}/web`, `${t.dir}/web/model.json`]) {
    const back = await ckpt(["convert", input, `${t.dir}/back.ckpt`]);
    assert.equal(back.code, 0, back.err);
    assert.deepEqual(await Deno.readFile(`${t.dir}/back.ckpt`), await Deno.readFile(`${t.dir}/a.ckpt`));
  }
  const st = await ckpt(["convert", `${t.dir}/web`, `${t.dir}/a.safetensors`, "--codec", "safetensors"]);
  assert.equal(st.code, 0, st.err);
  const v = await ckpt(["verify", `${t.dir}/a.safetensors`]);
  assert.equal(v.code, 0, v.err);
});

Deno.test("convert --codec tfjs refuses what it cannot write, and a tampered shard names the artifacts", async () => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  const cases: [string[], number, RegExp][] = [
    [["--codec", "tfjs", "--narrow", `${t.dir}/a.ckpt`, "-"], 2, /give OUT as a directory, not -/],
    [["--codec", "tfjs", "--narrow", "--gzip", `${t.dir}/a.ckpt`, `${t.dir}/w`], 2, /drop --gzip/],
    [["--narrow", `${t.dir}/a.ckpt`, `${t.dir}/b.ckpt`], 2, /--narrow applies to --codec tfjs only/],
    [["--codec", "tfjs", "--narrow", `${t.dir}/a.ckpt`, `${t.dir}/a.ckpt`], 3, /it is not a directory/],
    [["--codec", "tfjs", "--narrow", `${t.dir}/a.ckpt`, "https://127.0.0.1:9/web"], 2, /HTTP addresses are read-only/],
  ];
  for (const [args, code, pattern] of cases) {
    assertOneLineError(await ckpt(["convert", ...args], { net: true }), code, pattern);
  }
  const out = await writeTfjsArtifacts(`${t.dir}/web`, {
    metadata: { step: 1 },
    tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
  });
  const shard = await Deno.readFile(out.shards[0]!);
  shard[0]! ^= 1;
  await Deno.writeFile(out.shards[0]!, shard);
  const bad = await ckpt(["convert", `${t.dir}/web`, `${t.dir}/x.ckpt`]);
  assertOneLineError(bad, 4, /web\/model\.json: Checksum mismatch for TF\.js shard "weights\.bin"/);
  await assert.rejects(Deno.stat(`${t.dir}/x.ckpt`), Deno.errors.NotFound);
});

Deno.test("verify and inspect take TF.js artifacts: every shard checked against the ckpt record, or structure only", async () => {
  await using t = await tempDir();
  await writeTfjsArtifacts(`${t.dir}/web`, {
    metadata: { step: 12 },
    tensors: [
      { name: "w", dtype: "float32", shape: [300], data: new Float32Array(300).fill(0.25) },
      { name: "n", dtype: "int8", shape: [3], data: new Int8Array([-1, 0, 1]) },
    ],
  }, { shardBytes: 1000 });
  for (const input of [`${t.dir}/web`, `${t.dir}/web/model.json`]) {
    const v = await ckpt(["verify", input]);
    assert.equal(v.code, 0, v.err);
    assert.match(
      v.out,
      /^ok .*web\/model\.json: tfjs, step 12, 2 tensors, 1\.18 KiB \(every shard's size and SHA-256 checked\)\n$/,
    );
  }
  const server = serveDirectory(t.dir);
  try {
    const v = await ckpt(["verify", `${server.url}web/`], { net: true });
    assert.equal(v.code, 0, v.err);
    assert.match(
      v.out,
      /^ok http:.*\/web\/model\.json: tfjs, step 12, 2 tensors, .*\(every shard's size and SHA-256 checked\)/,
    );
  } finally {
    await server.close();
  }
  const i = await ckpt(["inspect", `${t.dir}/web`]);
  assert.equal(i.code, 0, i.err);
  assert.match(i.out, /^codec +tfjs$/m);
  assert.match(i.out, /^verified +yes: every shard's size and SHA-256/m);
  assert.match(i.out, /^n +params +int8 +\[3\] +3 +3 B$/m);
  const json = JSON.parse((await ckpt(["inspect", "--json", "--stats", `${t.dir}/web`])).out);
  assert.deepEqual([json.codec, json.read, json.verified, json.bytes, json.tensors[0].max], [
    "tfjs",
    "artifacts",
    true,
    1212,
    0.25,
  ]);
  assertOneLineError(
    await ckpt(["verify", "--sha256", "0".repeat(64), `${t.dir}/web`]),
    2,
    /--sha256 checks a checkpoint file; .* is TF\.js artifacts/,
  );
  // A flipped byte in the second shard: named, exit 4.
  const shard = `${t.dir}/web/weights-shard2of2.bin`;
  const bytes = await Deno.readFile(shard);
  bytes[5]! ^= 1;
  await Deno.writeFile(shard, bytes);
  assertOneLineError(
    await ckpt(["verify", `${t.dir}/web`]),
    4,
    /Checksum mismatch for TF\.js shard "weights-shard2of2\.bin"/,
  );
  // Artifacts from elsewhere (no "ckpt" record) have no digests: their structure is checked.
  const model = JSON.parse(await Deno.readTextFile(`${t.dir}/web/model.json`));
  delete model.ckpt;
  await Deno.writeTextFile(`${t.dir}/web/model.json`, JSON.stringify(model));
  const plain = await ckpt(["verify", `${t.dir}/web`]);
  assert.equal(plain.code, 0, plain.err);
  assert.match(
    plain.out,
    /tfjs, step 0, 2 tensors, .*\(TF\.js artifacts without a ckpt record have no digests: structure checked only\)/,
  );
  assert.match((await ckpt(["inspect", `${t.dir}/web`])).out, /^verified +structure only \(TF\.js artifacts without/m);
});

Deno.test("convert reads TF.js artifacts over http:// from model.json or its folder", async () => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  await ckpt(["convert", `${t.dir}/a.ckpt`, `${t.dir}/web`, "--codec", "tfjs", "--narrow"]);
  const server = serveDirectory(t.dir);
  try {
    for (const input of [`${server.url}web/model.json`, `${server.url}web/`, `${server.url}web`]) {
      server.log.length = 0;
      const r = await ckpt(["convert", input, `${t.dir}/back.ckpt`], { net: true });
      assert.equal(r.code, 0, `${input}: ${r.err}`);
      assert.deepEqual(await Deno.readFile(`${t.dir}/back.ckpt`), await Deno.readFile(`${t.dir}/a.ckpt`), input);
      // Found with HEAD requests at most (no local stat of a URL), then model.json and the shard once each.
      assert.deepEqual(server.log.filter((l) => l.startsWith("GET")), ["GET /web/model.json", "GET /web/weights.bin"]);
    }
    const none = await ckpt(["convert", `${server.url}nothing/`, `${t.dir}/n.ckpt`], { net: true });
    assertOneLineError(none, 3, /nothing/);
  } finally {
    await server.close();
  }
});

s3Test("convert to and from TF.js artifacts on s3://, from a file and from stdin", async (bucket) => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  const env = {
    AWS_ENDPOINT_URL: bucket.endpoint.endpoint,
    AWS_REGION: bucket.endpoint.region,
    AWS_ACCESS_KEY_ID: bucket.endpoint.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: bucket.endpoint.credentials.secretAccessKey,
  };
  const web = `s3://${bucket.name}/web/model`;
  const up = await ckpt(["convert", `${t.dir}/a.ckpt`, web, "--codec", "tfjs", "--narrow"], { env, net: true });
  assert.equal(up.code, 0, up.err);
  // The same objects a local export writes, names included (the index told the shard count).
  await ckpt(["convert", `${t.dir}/a.ckpt`, `${t.dir}/web`, "--codec", "tfjs", "--narrow"]);
  const store = bucket.store({ prefix: "web/model/" });
  for (const name of ["model.json", "weights.bin"]) {
    const got = new Uint8Array(await new Response((await store.get(name)).body).arrayBuffer());
    assert.deepEqual(got, await Deno.readFile(`${t.dir}/web/${name}`), name);
  }
  for (const input of [web, `${web}/`, `${web}/model.json`]) {
    const back = await ckpt(["convert", input, `${t.dir}/back.ckpt`], { env, net: true });
    assert.equal(back.code, 0, `${input}: ${back.err}`);
    assert.deepEqual(await Deno.readFile(`${t.dir}/back.ckpt`), await Deno.readFile(`${t.dir}/a.ckpt`), input);
  }
  // From standard input the shard count is unknown beforehand: shards are numbered.
  const piped = await ckpt(["convert", "-", `s3://${bucket.name}/piped`, "--codec", "tfjs", "--narrow"], {
    stdin: await Deno.readFile(`${t.dir}/a.ckpt`),
    env,
    net: true,
  });
  assert.equal(piped.code, 0, piped.err);
  const keys = (await Array.fromAsync(bucket.store({ prefix: "piped/" }).list())).map((o) => o.key);
  assert.deepEqual(keys, ["model.json", "weights-shard1.bin"]);
  // s3:// to s3://, TF.js artifacts to a checkpoint object.
  const s3s3 = await ckpt(["convert", `s3://${bucket.name}/piped`, `s3://${bucket.name}/x.ckpt`], { env, net: true });
  assert.equal(s3s3.code, 0, s3s3.err);
  const x = await bucket.store().get("x.ckpt");
  assert.deepEqual(new Uint8Array(await new Response(x.body).arrayBuffer()), await Deno.readFile(`${t.dir}/a.ckpt`));
  // A checkpoint object is not mistaken for a folder, and an absent prefix is an I/O error.
  const obj = await ckpt(["convert", `s3://${bucket.name}/x.ckpt`, `${t.dir}/y.ckpt`], { env, net: true });
  assert.equal(obj.code, 0, obj.err);
  const none = await ckpt(["convert", `s3://${bucket.name}/nothing`, `${t.dir}/n.ckpt`], { env, net: true });
  assertOneLineError(none, 3, /nothing/);
});

Deno.test("diff takes TF.js artifacts on either side: values compared with a checkpoint, a tampered shard named", async () => {
  await using t = await tempDir();
  const w = new Float32Array(300).map((_, i) => i / 7);
  const checkpoint = (w0: number) => ({
    metadata: { step: 12 },
    tensors: [
      { name: "w", dtype: "float32" as const, shape: [300], data: w.map((x, i) => (i === 0 ? w0 : x)) },
      { name: "n", dtype: "int8" as const, shape: [3], data: new Int8Array([-1, 0, 1]) },
    ],
  });
  await writeTfjsArtifacts(`${t.dir}/web`, checkpoint(0), { shardBytes: 1000 });
  await saveCheckpoint(`${t.dir}/same.ckpt`, checkpoint(0));
  await saveCheckpoint(`${t.dir}/moved.ckpt`, checkpoint(0.5));
  for (const [a, b] of [[`${t.dir}/web`, `${t.dir}/same.ckpt`], [`${t.dir}/same.ckpt`, `${t.dir}/web/model.json`]]) {
    const r = await ckpt(["diff", a!, b!]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /2 common tensors: 2 identical, 0 within tolerance, 0 outside/);
  }
  const moved = await ckpt(["diff", "--json", `${t.dir}/web`, `${t.dir}/moved.ckpt`]);
  assert.equal(moved.code, 1, moved.err);
  const doc = JSON.parse(moved.out);
  assert.equal(doc.a, `${t.dir}/web`);
  assert.deepEqual(
    doc.compared.map((c: { name: string; changed: number; maxAbs: number }) => [c.name, c.changed, c.maxAbs]),
    [
      ["w", 1, 0.5],
      ["n", 0, 0],
    ],
  );
  // Both sides artifacts (one over http://, found from its folder), and one from a pipe.
  const server = serveDirectory(t.dir);
  try {
    const both = await ckpt(["diff", `${server.url}web/`, `${t.dir}/web/model.json`], { net: true });
    assert.equal(both.code, 0, both.err);
    assert.match(both.out, /2 common tensors: 2 identical/);
  } finally {
    await server.close();
  }
  const piped = await ckpt(["diff", "-", `${t.dir}/web`], { stdin: await Deno.readFile(`${t.dir}/moved.ckpt`) });
  assert.equal(piped.code, 1, piped.err);
  assert.match(piped.out, /1 outside/);
  const shard = `${t.dir}/web/weights-shard1of2.bin`;
  const bytes = await Deno.readFile(shard);
  bytes[0]! ^= 1;
  await Deno.writeFile(shard, bytes);
  assertOneLineError(
    await ckpt(["diff", `${t.dir}/same.ckpt`, `${t.dir}/web`]),
    4,
    /web\/model\.json: Checksum mismatch for TF\.js shard "weights-shard1of2\.bin"/,
  );
});
