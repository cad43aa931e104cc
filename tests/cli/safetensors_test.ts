// The CLI reads and writes .safetensors through the interop codec: inspected from its header,
// verified for structure (and against a sha256sum sidecar when there is one), converted both
// ways without changing a bit, compared with diff.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { saveCheckpoint } from "../../mod.ts";
import { readSafetensorsHeader } from "../../src/interop/safetensors_read.ts";
import { assertOneLineError, ckpt, pipeline, tempDir, writeSample } from "./_run.ts";

Deno.test("convert to safetensors and back gives the original binary bytes", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const r = await ckpt(["convert", a, `${t.dir}/a.safetensors`, "--codec", "safetensors"]);
  assert.deepEqual([r.code, r.out, r.err], [0, "", ""]);
  const header = await readSafetensorsHeader(`${t.dir}/a.safetensors`);
  assert.deepEqual(header.tensors.map((e) => e.name), ["dense/kernel", "dense/bias", "bn/mean", "optimizer/iter"]);
  const back = await ckpt(["convert", `${t.dir}/a.safetensors`, `${t.dir}/back.ckpt`]);
  assert.equal(back.code, 0, back.err);
  assert.deepEqual(await Deno.readFile(`${t.dir}/back.ckpt`), await Deno.readFile(a));
});

Deno.test("convert to safetensors from JSON, gzip and a pipe gives the same file", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  assert.equal((await ckpt(["convert", a, `${t.dir}/want.safetensors`, "-c", "safetensors"])).code, 0);
  const want = await Deno.readFile(`${t.dir}/want.safetensors`);
  await writeSample(`${t.dir}/a.jsonl.gz`, { codec: "json", compression: "gzip" });
  // From a file without an index: a first pass collects the tensor list, a second writes.
  const fromJson = await ckpt(["convert", `${t.dir}/a.jsonl.gz`, `${t.dir}/j.safetensors`, "-c", "safetensors"]);
  assert.equal(fromJson.code, 0, fromJson.err);
  assert.deepEqual(await Deno.readFile(`${t.dir}/j.safetensors`), want);
  // From a pipe: the tensors are held until the header can be written.
  const { first, second } = await pipeline(["convert", a, "-", "-c", "json"], [
    "convert",
    "-",
    "-",
    "-c",
    "safetensors",
  ]);
  assert.deepEqual([first.code, second.code, second.err], [0, 0, ""]);
  assert.deepEqual(second.stdout, want);
});

Deno.test("inspect reads a safetensors header without its data, or streams it with --stats", async () => {
  await using t = await tempDir();
  const s = `${t.dir}/a.safetensors`;
  await writeSample(`${t.dir}/a.ckpt`);
  await ckpt(["convert", `${t.dir}/a.ckpt`, s, "-c", "safetensors"]);
  const quick = await ckpt(["inspect", s]);
  assert.equal(quick.code, 0, quick.err);
  assert.match(quick.out, /^codec\s+safetensors$/m);
  assert.match(quick.out, /^verified\s+header only \(tensor data not read; safetensors has no digests\)$/m);
  assert.match(quick.out, /^optimizer\/iter\s+optimizer\s+int64\s+\[\]\s+1\s+8 B$/m);
  assert.match(quick.out, /^metric acc\s+NaN$/m);
  const stats = await ckpt(["inspect", "--stats", "--json", s]);
  const doc = JSON.parse(stats.out);
  assert.deepEqual([doc.codec, doc.verified, doc.read], ["safetensors", false, "stream"]);
  assert.deepEqual([doc.tensors[0].min, doc.tensors[0].max, doc.tensors[0].nan], [-6, 4, 1]);
});

Deno.test("verify says a safetensors file has no digests, and checks its sha256sum sidecar when present", async () => {
  await using t = await tempDir();
  const s = `${t.dir}/a.safetensors`;
  await writeSample(`${t.dir}/a.ckpt`);
  await ckpt(["convert", `${t.dir}/a.ckpt`, s, "-c", "safetensors"]);
  const bare = await ckpt(["verify", s]);
  assert.equal(bare.code, 0, bare.err);
  assert.match(
    bare.out,
    /^ok .*a\.safetensors: safetensors, step 100, 4 tensors, .* \(safetensors has no digests: structure checked only\)$/m,
  );
  const sha = createHash("sha256").update(await Deno.readFile(s)).digest("hex");
  await Deno.writeTextFile(`${s}.sha256`, `${sha}  a.safetensors\n`);
  const good = await ckpt(["verify", s]);
  assert.match(good.out, /\(matches a\.safetensors\.sha256\)$/m);
  await Deno.writeTextFile(`${s}.sha256`, `${"0".repeat(64)}  a.safetensors\n`);
  assertOneLineError(
    await ckpt(["verify", s]),
    4,
    /a\.safetensors: file sha256 is [0-9a-f]{64}, but .*a\.safetensors\.sha256 says 0{64}/,
  );
  await Deno.writeTextFile(`${s}.sha256`, "garbage\n");
  assertOneLineError(await ckpt(["verify", s]), 4, /sidecar/);
});

Deno.test("a truncated safetensors file is rejected in one line", async () => {
  await using t = await tempDir();
  const s = `${t.dir}/a.safetensors`;
  await writeSample(`${t.dir}/a.ckpt`);
  await ckpt(["convert", `${t.dir}/a.ckpt`, s, "-c", "safetensors"]);
  const bytes = await Deno.readFile(s);
  await Deno.writeFile(`${t.dir}/cut.safetensors`, bytes.subarray(0, bytes.length - 3));
  assertOneLineError(await ckpt(["inspect", `${t.dir}/cut.safetensors`]), 4, /cut\.safetensors: /);
  assertOneLineError(await ckpt(["verify", `${t.dir}/cut.safetensors`]), 4, /cut\.safetensors: /);
});

Deno.test("diff compares a binary checkpoint with its safetensors copy", async () => {
  await using t = await tempDir();
  await writeSample(`${t.dir}/a.ckpt`);
  await ckpt(["convert", `${t.dir}/a.ckpt`, `${t.dir}/a.safetensors`, "-c", "safetensors"]);
  const r = await ckpt(["diff", `${t.dir}/a.ckpt`, `${t.dir}/a.safetensors`]);
  assert.deepEqual([r.code, r.err], [0, ""]);
  assert.match(r.out, /4 common tensors: 4 identical/);
});

Deno.test("convert says which metadata safetensors cannot hold, exits 4 and writes nothing", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await saveCheckpoint(a, { metadata: { step: 1, custom: { "safetensors.__metadata__": 5 } }, tensors: [] });
  const r = await ckpt(["convert", a, `${t.dir}/a.safetensors`, "-c", "safetensors"]);
  assertOneLineError(
    r,
    4,
    /a\.ckpt cannot be written as safetensors: Invalid metadata: custom\["safetensors\.__metadata__"\]/,
  );
  assert.deepEqual([...Deno.readDirSync(t.dir)].map((e) => e.name), ["a.ckpt"]);
});
