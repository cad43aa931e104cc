import assert from "node:assert/strict";
import { readCheckpointIndex, saveCheckpoint } from "../../mod.ts";
import { assertOneLineError, ckpt, tempDir, writeSample } from "./_run.ts";

Deno.test("inspect prints metadata, the tensor table and totals per group from the index", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  const { bytes, digest } = await writeSample(a);
  const r = await ckpt(["inspect", a]);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.err, "");
  assert.match(r.out, /^source\s+.*a\.ckpt$/m);
  assert.match(r.out, /^codec\s+binary$/m);
  assert.match(r.out, /^compression\s+none$/m);
  assert.match(r.out, new RegExp(`^size\\s+${bytes} bytes \\(\\d+\\.\\d\\d KiB\\)$`, "m"));
  assert.match(r.out, new RegExp(`^stream digest\\s+${digest} \\(stored in the footer, not checked here\\)$`, "m"));
  assert.doesNotMatch(r.out, /^file sha256/m);
  assert.match(r.out, /^verified\s+no: index only, not verified/m);
  assert.match(r.out, /^step\s+100$/m);
  assert.match(r.out, /^epoch\s+2$/m);
  assert.match(r.out, /^metric loss\s+0\.5$/m);
  assert.match(r.out, /^metric acc\s+NaN$/m);
  assert.match(r.out, /^custom lr\s+0\.001$/m);
  assert.match(r.out, /^name\s+group\s+dtype\s+shape\s+elements\s+bytes$/m);
  assert.match(r.out, /^dense\/kernel\s+params\s+float32\s+\[2, 3\]\s+6\s+24 B$/m);
  assert.match(r.out, /^dense\/bias\s+params\s+float16\s+\[3\]\s+3\s+6 B$/m);
  assert.match(r.out, /^bn\/mean\s+buffers\s+float64\s+\[2\]\s+2\s+16 B$/m);
  assert.match(r.out, /^optimizer\/iter\s+optimizer\s+int64\s+\[\]\s+1\s+8 B$/m);
  assert.match(
    r.out,
    /^total: 4 tensors, 12 elements, 54 B \(params: 2 tensors, 30 B; buffers: 1 tensor, 16 B; optimizer: 1 tensor, 8 B\)$/m,
  );
});

Deno.test("inspect --stats reads every tensor and gives min, max, mean (NaN ignored) and NaN count", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  const { sha256, digest } = await writeSample(a);
  const r = await ckpt(["inspect", "--stats", a]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, new RegExp(`^file sha256\\s+${sha256} \\(what sha256sum prints\\)$`, "m"));
  assert.match(r.out, new RegExp(`^stream digest\\s+${digest} \\(verified\\)$`, "m"));
  assert.match(r.out, /^verified\s+yes/m);
  assert.match(r.out, /^name\s+group\s+dtype\s+shape\s+elements\s+bytes\s+min\s+max\s+mean\s+nan$/m);
  assert.match(r.out, /^dense\/kernel\s+.*24 B\s+-6\s+4\s+0\.8\s+1$/m);
  assert.match(r.out, /^dense\/bias\s+.*6 B\s+-1\s+2\s+0\.666667\s+0$/m);
  assert.match(r.out, /^optimizer\/iter\s+.*8 B\s+100\s+100\s+100\s+0$/m);
});

Deno.test("inspect --json prints one JSON document with exact values", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt.gz`;
  const { bytes, sha256 } = await writeSample(a, { codec: "json", compression: "gzip" });
  const r = await ckpt(["inspect", "--json", "--stats", a]);
  assert.equal(r.code, 0, r.err);
  const doc = JSON.parse(r.out);
  assert.equal(doc.codec, "json");
  assert.equal(doc.compression, "gzip");
  assert.equal(doc.bytes, bytes);
  assert.equal(doc.sha256, sha256);
  assert.equal(doc.verified, true);
  assert.deepEqual(doc.metadata, { step: 100, epoch: 2, metrics: { loss: 0.5, acc: "NaN" }, custom: { lr: 0.001 } });
  assert.deepEqual(doc.tensors[0], {
    name: "dense/kernel",
    group: "params",
    dtype: "float32",
    shape: [2, 3],
    elements: 6,
    bytes: 24,
    min: -6,
    max: 4,
    mean: 0.8,
    nan: 1,
  });
  assert.deepEqual(doc.tensors[3].min, "100");
  assert.equal(doc.totals.tensors, 4);
  assert.equal(doc.totals.bytes, 54);
  assert.equal(doc.totals.human, "54 B");
  assert.deepEqual(doc.totals.groups.buffers, { tensors: 1, elements: 2, bytes: 16, human: "16 B" });
});

Deno.test("inspect reads standard input and names the codec it found", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.jsonl`;
  const { sha256 } = await writeSample(a, { codec: "json" });
  const r = await ckpt(["inspect", "-"], { stdin: await Deno.readFile(a) });
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^source\s+stdin$/m);
  assert.match(r.out, /^codec\s+json$/m);
  assert.match(r.out, new RegExp(`^file sha256\\s+${sha256} \\(what sha256sum prints\\)$`, "m"));
});

Deno.test("inspect --full verifies an uncompressed binary file instead of trusting its index", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const bytes = await Deno.readFile(a);
  // Flip one bit of dense/kernel's data (float32 1.0 = 00 00 80 3f): the index is still intact.
  const at = bytes.findIndex((_, i) =>
    bytes[i] === 0 && bytes[i + 1] === 0 && bytes[i + 2] === 0x80 && bytes[i + 3] === 0x3f
  );
  bytes[at + 2]! ^= 0x01;
  await Deno.writeFile(a, bytes);
  assert.equal((await ckpt(["inspect", a])).code, 0, "the index alone does not see damaged data");
  assertOneLineError(await ckpt(["inspect", "--full", a]), 4, /Checksum mismatch for tensor "dense\/kernel"/);
});

Deno.test("inspect rejects non-checkpoint, empty, truncated, missing and directory inputs in one line", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const bytes = await Deno.readFile(a);
  await Deno.writeTextFile(`${t.dir}/text.txt`, "hello world\n");
  await Deno.writeFile(`${t.dir}/empty.ckpt`, new Uint8Array());
  await Deno.writeFile(`${t.dir}/short.ckpt`, bytes.subarray(0, bytes.length - 20));
  await Deno.writeFile(
    `${t.dir}/short.ckpt.gz`,
    (await new Response(
      new Blob([bytes.slice()]).stream().pipeThrough(new CompressionStream("gzip")),
    ).bytes()).subarray(0, 200),
  );
  assertOneLineError(
    await ckpt(["inspect", `${t.dir}/text.txt`]),
    4,
    /text\.txt: Cannot decode checkpoint: unrecognised format at offset 0/,
  );
  assertOneLineError(await ckpt(["inspect", `${t.dir}/empty.ckpt`]), 4, /empty\.ckpt: .*empty/);
  assertOneLineError(await ckpt(["inspect", `${t.dir}/short.ckpt`]), 4, /short\.ckpt: Cannot decode checkpoint/);
  assertOneLineError(await ckpt(["inspect", `${t.dir}/short.ckpt.gz`]), 4, /short\.ckpt\.gz: Cannot decode checkpoint/);
  assertOneLineError(
    await ckpt(["inspect", "-"], { stdin: new TextEncoder().encode("{}\n") }),
    4,
    /^ckpt inspect: stdin: /,
  );
  assertOneLineError(
    await ckpt(["inspect", `${t.dir}/missing.ckpt`]),
    3,
    /Cannot read ".*missing\.ckpt": No such file/,
  );
  // One wording for a directory, whichever command (and whichever system call) finds it.
  for (const command of ["inspect", "verify", "diff"]) {
    const args = command === "diff" ? [command, t.dir, t.dir] : [command, t.dir];
    assertOneLineError(await ckpt(args), 3, /Cannot read ".*": it is a directory$/m);
  }
});

Deno.test("inspect shows control characters in names as escapes, so a checkpoint cannot drive the terminal", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/evil.ckpt`;
  await saveCheckpoint(a, {
    metadata: { step: 1, metrics: { "\x1b[31mred": 1 } },
    tensors: [{ name: "w\x1b[2J\nx", dtype: "uint8", shape: [1], data: new Uint8Array([1]), group: "g\x07" }],
  });
  const r = await ckpt(["inspect", a]);
  assert.equal(r.code, 0, r.err);
  assert.ok(!r.out.includes("\x1b") && !r.out.includes("\x07"), "no raw control characters on stdout");
  assert.match(r.out, /^w\\u\{1b\}\[2J\\u\{a\}x\s+g\\u\{7\}\s+uint8/m);
  assert.match(r.out, /^metric \\u\{1b\}\[31mred\s+1$/m);
  assert.match(r.out, /\(g\\u\{7\}: 1 tensor, 1 B\)$/m);
  const bytes = await Deno.readFile(a);
  bytes[bytes.length - 100]! ^= 1;
  await Deno.writeFile(a, bytes);
  const bad = await ckpt(["verify", a]);
  assert.equal(bad.code, 4);
  assert.ok(!bad.err.includes("\x1b") && !bad.err.includes("\x07"), "no raw control characters on stderr");
  assert.match(bad.err, /^ckpt verify: [^\n]*\n$/);
});

Deno.test("the digest inspect prints from the index is one verify --sha256 accepts, and a damaged body is not hidden", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  const { digest } = await writeSample(a);
  const shown = await ckpt(["inspect", "--json", a]);
  assert.equal(shown.code, 0, shown.err);
  const doc = JSON.parse(shown.out);
  assert.equal(doc.sha256, null);
  assert.equal(doc.streamDigest, digest);
  assert.equal(doc.verified, false);
  const ok = await ckpt(["verify", "--sha256", doc.streamDigest, a]);
  assert.equal(ok.code, 0, ok.err);
  assert.match(ok.out, new RegExp(`stream digest ${digest} \\(matches --sha256\\)$`, "m"));
  // Flip one byte of a tensor body: inspect from the index still succeeds (it reads no data) and says so.
  const entry = (await readCheckpointIndex(a)).tensors.find((e) => e.name === "dense/kernel")!;
  const bytes = await Deno.readFile(a);
  bytes[entry.offset + entry.length - 33]! ^= 0x40;
  await Deno.writeFile(a, bytes);
  const text = await ckpt(["inspect", a]);
  assert.equal(text.code, 0, text.err);
  assert.match(text.out, /^verified\s+no: index only, not verified/m);
  assertOneLineError(
    await ckpt(["verify", "--sha256", digest, a]),
    4,
    /Checksum mismatch for tensor "dense\/kernel"/,
  );
});
