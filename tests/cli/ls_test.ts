import assert from "node:assert/strict";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { assertOneLineError, ckpt, tempDir } from "./_run.ts";

/** A manager directory with steps 10..40 (loss 0.5, 0.1, 0.3, NaN), keeping the newest 3 and the best by loss. */
async function run(dir: string): Promise<void> {
  await using m = await CheckpointManager.open(dir, { maxToKeep: 3, best: { metric: "loss", mode: "min" } });
  for (const [step, loss] of [[10, 0.5], [20, 0.1], [30, 0.3], [40, NaN], [50, 0.2]]) {
    await m.save({
      metadata: { step: step!, metrics: { loss: loss!, acc: step! / 100 } },
      tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([step!, 1]) }],
    });
  }
}

Deno.test("ls lists step, time, size, metrics, why each is kept, status and digest", async () => {
  await using t = await tempDir();
  await run(t.dir);
  const r = await ckpt(["ls", t.dir, "--best", "loss:min", "--max-to-keep", "3"]);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.err, "");
  const lines = r.out.trimEnd().split("\n");
  assert.match(lines[0]!, /^step\s+saved\s+size\s+kind\s+tensors\s+metrics\s+best\s+kept\s+status\s+digest$/);
  assert.deepEqual(lines.slice(1, -2).map((l) => l.trim().split(/\s+/)[0]), ["20", "30", "40", "50"]);
  assert.match(
    lines[1]!,
    /^\s*20\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+\d+ B\s+full\s+1\s+loss=0\.1 acc=0\.2\s+#1\s+best\s+header ok\s+[0-9a-f]{12}$/,
  );
  assert.match(lines[2]!, /^\s*30\s.*loss=0\.3 acc=0\.3\s+-\s+recent\s+header ok\s/);
  assert.match(lines[3]!, /^\s*40\s.*loss=NaN acc=0\.4\s+-\s+recent\s+header ok\s/);
  assert.match(lines[4]!, /^\s*50\s.*loss=0\.2 acc=0\.5\s+-\s+recent\s+header ok\s/);
  assert.match(lines.at(-2)!, /^4 checkpoints, [\d.]+ KiB$/);
  // "ok" would read as verified: the status says what was checked, and a legend says what it means.
  assert.equal(
    lines.at(-1),
    "status: header ok: files present, sizes, headers and indexes check out; tensor data not read (--verify reads it)",
  );
});

Deno.test("ls without retention options shows what the writing manager's recorded rules keep, best column included", async () => {
  await using t = await tempDir();
  await run(t.dir); // maxToKeep 3 and best by loss, recorded in index.json
  const r = await ckpt(["ls", t.dir]);
  assert.equal(r.code, 0, r.err);
  const lines = r.out.trimEnd().split("\n");
  assert.match(lines[0]!, /\sbest\s+kept\s/);
  assert.match(lines[1]!, /^\s*20\s.*\s#1\s+best\s+header ok\s/);
  assert.match(lines[2]!, /^\s*30\s.*\s-\s+recent\s+header ok\s/);
  const help = await ckpt(["ls", "--help"]);
  assert.match(help.out, /recorded in\s+the directory's index\.json/);
});

Deno.test("ls --json gives whole digests, metrics as the JSON codec writes them, and best ranks", async () => {
  await using t = await tempDir();
  await run(t.dir);
  const r = await ckpt(["ls", "--json", t.dir, "--best", "loss", "--keep-best", "2", "--max-to-keep", "3"]);
  assert.equal(r.code, 0, r.err);
  const listed = JSON.parse(r.out);
  assert.deepEqual(listed.map((e: { step: number }) => e.step), [20, 30, 40, 50]);
  assert.deepEqual(listed.map((e: { bestRank: number | null }) => e.bestRank), [1, null, null, 2]);
  assert.deepEqual(listed[2].metrics, { loss: "NaN", acc: 0.4 });
  const sums = new Map<string, string>();
  await using m = await CheckpointManager.open(t.dir, { readOnly: true });
  for (const e of await m.list()) sums.set(e.path, e.sha256);
  for (const e of listed) {
    assert.equal(e.sha256, sums.get(e.path));
    assert.equal(e.bytes, (await Deno.stat(e.path)).size);
    assert.equal(e.status, "ok");
    assert.equal(e.checked, "header");
  }
});

Deno.test("ls reports a missing or damaged checkpoint on stderr and exits 4, still listing the rest", async () => {
  await using t = await tempDir();
  await run(t.dir);
  const listed = JSON.parse((await ckpt(["ls", "--json", t.dir])).out);
  await Deno.remove(listed[0].path);
  const bytes = await Deno.readFile(listed[1].path);
  bytes[bytes.length - 60]! ^= 0xff; // inside the index record
  await Deno.writeFile(listed[1].path, bytes);
  const r = await ckpt(["ls", t.dir]);
  assert.equal(r.code, 4);
  assert.match(r.out, /^\s*20\s.*\smissing\s/m);
  assert.match(r.out, /^\s*30\s.*\sdamaged\s/m);
  assert.match(r.out, /^\s*50\s.*\sheader ok\s/m);
  assert.match(r.out, /^status: header ok: .*; damaged: see standard error; missing: see standard error$/m);
  const errs = r.err.trimEnd().split("\n");
  assert.equal(errs.length, 2);
  assert.match(errs[0]!, /^ckpt ls: step 20 is missing: /);
  assert.match(errs[1]!, /^ckpt ls: step 30 is damaged: /);
});

Deno.test("ls lists a checkpoint with a flipped data byte as header ok, and ls --verify finds it damaged (exit 4)", async () => {
  await using t = await tempDir();
  {
    await using m = await CheckpointManager.open(t.dir);
    for (const step of [1, 2]) {
      // 0x3fc00000 is 1.5: the bytes 00 00 c0 3f, 64 times over, are this tensor's data and nothing else.
      await m.save({
        metadata: { step },
        tensors: [{ name: "w", dtype: "float32", shape: [64], data: new Float32Array(64).fill(1.5 * step) }],
      });
    }
  }
  const listed = JSON.parse((await ckpt(["ls", "--json", t.dir])).out);
  const bytes = await Deno.readFile(listed[0].path);
  const pattern = [0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0xc0, 0x3f];
  const at = bytes.findIndex((_, i) => pattern.every((b, k) => bytes[i + k] === b));
  assert.ok(at > 0, "the tensor's bytes are in the file");
  bytes[at + 2]! ^= 0x01; // 1.5 becomes 1.5000076: the header and index are untouched
  await Deno.writeFile(listed[0].path, bytes);

  // Without --verify nothing is read past the index: the flip goes unseen, and the status says so.
  const plain = await ckpt(["ls", t.dir]);
  assert.equal(plain.code, 0, plain.err);
  assert.match(plain.out, /^\s*1\s.*\sheader ok\s+[0-9a-f]{12}$/m);
  assert.match(plain.out, /tensor data not read \(--verify reads it\)$/m);
  assert.doesNotMatch(plain.out, /\bverified\b/);

  const verified = await ckpt(["ls", "--verify", t.dir]);
  assert.equal(verified.code, 4);
  assert.match(verified.out, /^\s*1\s.*\sdamaged\s+[0-9a-f]{12}$/m);
  assert.match(verified.out, /^\s*2\s.*\sverified\s+[0-9a-f]{12}$/m);
  assert.match(
    verified.out,
    /^status: verified: every tensor read and its digests checked; damaged: see standard error$/m,
  );
  assert.match(verified.err, /^ckpt ls: step 1 is damaged: .*[Cc]hecksum mismatch.*"w"/);
  assert.equal(verified.err.trimEnd().split("\n").length, 1);

  const json = await ckpt(["ls", "--verify", "--json", t.dir]);
  assert.equal(json.code, 4);
  assert.deepEqual(
    JSON.parse(json.out).map((e: { step: number; status: string; checked: string }) => [e.step, e.status, e.checked]),
    [[1, "damaged", "header"], [2, "ok", "data"]],
  );
  assert.match(JSON.parse(json.out)[0].problem, /[Cc]hecksum mismatch/);
});

Deno.test("ls rejects what is not a manager directory, and bad retention options", async () => {
  await using t = await tempDir();
  assertOneLineError(await ckpt(["ls", `${t.dir}/nope`]), 3, /Cannot read ".*nope": No such file/);
  assertOneLineError(await ckpt(["ls", t.dir]), 3, /not a checkpoint manager directory \(no index\.json\)/);
  await Deno.writeTextFile(`${t.dir}/file`, "x");
  assertOneLineError(await ckpt(["ls", `${t.dir}/file`]), 3, /it is not a directory/);
  assertOneLineError(await ckpt(["ls", t.dir, "--best", ":max"]), 2, /--best must be METRIC/);
  assertOneLineError(await ckpt(["ls", t.dir, "--keep-best", "2"]), 2, /--keep-best needs --best/);
  assertOneLineError(await ckpt(["ls", t.dir, "--max-to-keep", "0"]), 2, /--max-to-keep must be a positive integer/);
});

Deno.test("ls of an empty manager directory says so", async () => {
  await using t = await tempDir();
  await (await CheckpointManager.open(t.dir)).close();
  const r = await ckpt(["ls", t.dir]);
  assert.deepEqual([r.code, r.out, r.err], [0, "no checkpoints\n", ""]);
});

Deno.test("ls shows incremental checkpoints with what they occupy on disk", async () => {
  await using t = await tempDir();
  {
    await using m = await CheckpointManager.open(t.dir, { incremental: true });
    const frozen = { name: "frozen", dtype: "float32" as const, shape: [256], data: new Float32Array(256).fill(1) };
    for (const step of [1, 2]) {
      await m.save({
        metadata: { step },
        tensors: [frozen, { name: "w", dtype: "float32", shape: [2], data: new Float32Array([step, 0]) }],
      });
    }
  }
  const r = await ckpt(["ls", "--json", t.dir]);
  assert.equal(r.code, 0, r.err);
  const listed = JSON.parse(r.out);
  assert.deepEqual(listed.map((e: { kind: string }) => e.kind), ["incremental", "incremental"]);
  assert.ok(listed[1].bytesWritten < listed[1].bytes, "the second save wrote only the changed tensor");
  const text = await ckpt(["ls", t.dir]);
  assert.match(text.out, /^\s*2\s+\S+\s+[\d.]+ (?:KiB|B)\s+incremental\s+2\s/m);
});

Deno.test("ls of a directory whose index.json is damaged shows what a writing manager would rebuild, rewriting nothing", async () => {
  await using t = await tempDir();
  await run(t.dir);
  const index = `${t.dir}/index.json`;
  await Deno.writeTextFile(index, "{ not json");
  const before = (await Array.fromAsync(Deno.readDir(t.dir), (e) => e.name)).sort();
  const r = await ckpt(["ls", t.dir]);
  assert.equal(r.code, 0, r.err);
  assert.deepEqual(r.out.trimEnd().split("\n").slice(1, -2).map((l) => l.trim().split(/\s+/)[0]), [
    "20",
    "30",
    "40",
    "50",
  ]);
  const errs = r.err.trimEnd().split("\n");
  assert.match(
    errs[0]!,
    /^ckpt ls: warning: .*index\.json.*; showing what a writing manager would rebuild .*\(nothing is rewritten\)$/,
  );
  assert.match(
    errs[1]!,
    /^ckpt ls: warning: A writing manager would adopt 4 checkpoint\(s\) .*: steps 20, 30, 40, 50$/,
  );
  assert.equal(await Deno.readTextFile(index), "{ not json", "the index is left as it was");
  assert.deepEqual((await Array.fromAsync(Deno.readDir(t.dir), (e) => e.name)).sort(), before, "nothing renamed");

  // A writing manager then resumes from the newest of them, as ls showed.
  const m = await CheckpointManager.open(t.dir, { onWarning: () => {} });
  assert.equal((await m.latest())?.metadata.step, 50);
  await m.close();

  await Deno.writeTextFile(index, "{ not json");
  for (const name of before.filter((n) => n.startsWith("step-"))) await Deno.remove(`${t.dir}/${name}`);
  const empty = await ckpt(["ls", t.dir]);
  assert.deepEqual([empty.code, empty.out], [0, "no checkpoints\n"]);
});
