import assert from "node:assert/strict";
import { assertOneLineError, ckpt, indexOfText, tempDir, writeSample } from "./_run.ts";
import { saveCheckpoint } from "../../mod.ts";

/** The sample file with one bit of dense/kernel's data flipped. */
async function corruptSample(path: string, options: { codec?: "binary" | "json" } = {}): Promise<void> {
  await writeSample(path, options);
  const bytes = await Deno.readFile(path);
  if (options.codec === "json") {
    // The first data line is [1,2,3,4,"NaN",-6]: turn the 3 into a 5.
    const at = indexOfText(bytes, '{"data":[1,2,3');
    bytes[at + 13] = "5".charCodeAt(0);
  } else {
    const at = bytes.findIndex((_, i) =>
      bytes[i] === 0 && bytes[i + 1] === 0 && bytes[i + 2] === 0x80 && bytes[i + 3] === 0x3f
    );
    bytes[at + 2]! ^= 0x01;
  }
  await Deno.writeFile(path, bytes);
}

Deno.test("verify prints one ok line per intact checkpoint and exits 0", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  const b = `${t.dir}/b.jsonl.gz`;
  const da = await writeSample(a);
  const db = await writeSample(b, { codec: "json", compression: "gzip" });
  const r = await ckpt(["verify", a, b]);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.err, "");
  const lines = r.out.trimEnd().split("\n");
  assert.equal(lines.length, 2);
  assert.match(
    lines[0]!,
    new RegExp(
      `^ok .*a\\.ckpt: binary, step 100, 4 tensors, [\\d.]+ KiB, stream digest ${da.digest}$`,
    ),
  );
  assert.match(
    lines[1]!,
    new RegExp(
      `^ok .*b\\.jsonl\\.gz: json\\+gzip, step 100, 4 tensors, \\d+ B, stream digest ${db.digest}$`,
    ),
  );
  // The file's own SHA-256 (a second pass) only when something asks for it: here a sidecar.
  await Deno.writeTextFile(`${a}.sha256`, `${da.sha256}  a.ckpt\n`);
  const again = await ckpt(["verify", a]);
  assert.match(
    again.out,
    new RegExp(`, sha256 ${da.sha256}, stream digest ${da.digest} \\(matches a\\.ckpt\\.sha256\\)$`, "m"),
  );
});

Deno.test("verify names the first bad tensor and exits 4", async () => {
  await using t = await tempDir();
  for (const codec of ["binary", "json"] as const) {
    const p = `${t.dir}/bad.${codec}`;
    await corruptSample(p, { codec });
    const r = await ckpt(["verify", p]);
    assertOneLineError(r, 4, /^ckpt verify: .*bad\.\w+: Checksum mismatch for tensor "dense\/kernel"/);
  }
});

Deno.test("verify reports truncated files and garbage after the end", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const bytes = await Deno.readFile(a);
  for (const cut of [10, 200, bytes.length - 1]) {
    await Deno.writeFile(`${t.dir}/cut.ckpt`, bytes.subarray(0, cut));
    assertOneLineError(await ckpt(["verify", `${t.dir}/cut.ckpt`]), 4, /Cannot decode checkpoint: .*offset \d+/);
  }
  await Deno.writeFile(`${t.dir}/long.ckpt`, new Uint8Array([...bytes, 0]));
  assertOneLineError(await ckpt(["verify", `${t.dir}/long.ckpt`]), 4, /trailing bytes/);
});

Deno.test("verify checks every file, reports each failure on stderr and exits with the first failure's code", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  const bad = `${t.dir}/bad.ckpt`;
  await writeSample(a);
  await corruptSample(bad);
  const r = await ckpt(["verify", `${t.dir}/missing.ckpt`, bad, a]);
  assert.equal(r.code, 3);
  assert.match(r.out, /^ok .*a\.ckpt: /);
  const errs = r.err.trimEnd().split("\n");
  assert.equal(errs.length, 2);
  assert.match(errs[0]!, /^ckpt verify: Cannot read ".*missing\.ckpt": No such file/);
  assert.match(errs[1]!, /^ckpt verify: .*bad\.ckpt: Checksum mismatch for tensor "dense\/kernel"/);
});

Deno.test("verify --sha256 also checks the digest of the bytes", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  const { sha256, digest } = await writeSample(a);
  const r = await ckpt(["verify", "--sha256", sha256.toUpperCase(), a]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, new RegExp(`sha256 ${sha256} \\(matches --sha256\\), stream digest ${digest}$`, "m"));
  const wrong = "0".repeat(64);
  assertOneLineError(
    await ckpt(["verify", "--sha256", wrong, a]),
    4,
    new RegExp(`file sha256 is ${sha256} \\(stream digest ${digest}\\), expected ${wrong}`),
  );
});

Deno.test("verify -q prints nothing and --json prints one object per checkpoint", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  const bad = `${t.dir}/bad.ckpt`;
  const { sha256, digest, bytes } = await writeSample(a);
  await corruptSample(bad);
  const quiet = await ckpt(["verify", "-q", a]);
  assert.deepEqual([quiet.code, quiet.out, quiet.err], [0, "", ""]);
  const r = await ckpt(["verify", "--json", a, bad]);
  assert.equal(r.code, 4);
  const [ok, failed] = r.out.trimEnd().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(ok, {
    source: a,
    ok: true,
    codec: "binary",
    compression: "none",
    step: 100,
    tensors: 4,
    bytes,
    streamDigest: digest,
    checked: ["record digests", "stream digest"],
  });
  const pinned = await ckpt(["verify", "--json", "--sha256", sha256, a]);
  assert.equal(JSON.parse(pinned.out).sha256, sha256);
  assert.equal(failed.ok, false);
  assert.match(failed.error, /Checksum mismatch for tensor "dense\/kernel"/);
});

Deno.test("verify reads standard input", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await corruptSample(a, { codec: "json" });
  const r = await ckpt(["verify", "-"], { stdin: await Deno.readFile(a) });
  assertOneLineError(r, 4, /^ckpt verify: stdin: Checksum mismatch for tensor "dense\/kernel"/);
  assertOneLineError(await ckpt(["verify", "-"], { stdin: new Uint8Array() }), 4, /stdin: .*empty/);
});

Deno.test("verify checks a tensor larger than its read pieces, from a file and from standard input", async () => {
  await using t = await tempDir();
  const path = `${t.dir}/big.ckpt`;
  const n = 3 * 2 ** 20; // three of the 1 MiB pieces a verify hashes through
  const big = new Float32Array(n / 4).map((_, i) => Math.cos(i));
  const mask = new Uint8Array(n).map((_, i) => i & 1);
  await saveCheckpoint(path, {
    metadata: { step: 9 },
    tensors: [
      { name: "big", dtype: "float32", shape: [big.length], data: big },
      { name: "mask", dtype: "bool", shape: [n], data: mask },
    ],
  });
  const good = await Deno.readFile(path);
  const ok = await ckpt(["verify", path]);
  assert.equal(ok.code, 0, ok.err);
  assert.match(ok.out, /^ok .*big\.ckpt: binary, step 9, 2 tensors, /);
  const okStdin = await ckpt(["verify", "-"], { stdin: good });
  assert.equal(okStdin.code, 0, okStdin.err);
  // A flipped bit in "big" past its first two pieces.
  const flipped = good.slice();
  flipped[indexOfFloat(good, big, 2.5 * 2 ** 20)]! ^= 0x10;
  await Deno.writeFile(path, flipped);
  assertOneLineError(await ckpt(["verify", path]), 4, /Checksum mismatch for tensor "big"/);
  assertOneLineError(await ckpt(["verify", "-"], { stdin: flipped }), 4, /Checksum mismatch for tensor "big"/);
});

/** The offset in `file` of the byte `at` bytes into `data`'s bytes (found by its first 64 bytes). */
function indexOfFloat(file: Uint8Array, data: Float32Array, at: number): number {
  const head = new Uint8Array(data.buffer, 0, 64);
  const start = file.findIndex((_, i) => head.every((b, k) => file[i + k] === b));
  assert.ok(start > 0);
  return start + at;
}

Deno.test("verify of a file large enough for a second hash thread counts every byte once and names a bad tensor", async () => {
  await using t = await tempDir();
  const path = `${t.dir}/large.ckpt`;
  // 72 MiB in 4 MiB tensors: over the size from which a verify hashes on two threads.
  const tensors = Array.from({ length: 18 }, (_, i) => {
    const data = new Float32Array(2 ** 20).map((_, k) => (k + i * 2 ** 20) / 3);
    return { name: `t${i}`, dtype: "float32" as const, shape: [data.length], data };
  });
  const saved = await saveCheckpoint(path, { metadata: { step: 3 }, tensors });
  const r = await ckpt(["verify", "--json", path]);
  assert.equal(r.code, 0, r.err);
  const o = JSON.parse(r.out);
  assert.equal(o.bytes, saved.bytes);
  assert.equal(o.tensors, 18);
  assert.equal(o.streamDigest, saved.digest);
  const bytes = await Deno.readFile(path);
  for (const i of [1, 16]) {
    const bad = bytes.slice();
    bad[indexOfFloat(bytes, tensors[i]!.data, 3 * 2 ** 20)]! ^= 1;
    await Deno.writeFile(path, bad);
    assertOneLineError(await ckpt(["verify", path]), 4, new RegExp(`Checksum mismatch for tensor "t${i}"`));
  }
});
