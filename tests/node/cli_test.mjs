// The `ckpt` command under Node, run the way a project that installed the package runs it:
// `npx ckpt ...` in that project (tests/node/harness.ts's scratch project), no Deno anywhere.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { CheckpointManager, loadCheckpoint, saveCheckpoint } from "@ckpt/ckpt";
import { fixtureCheckpoint } from "./_fixture.mjs";
import { runChild, SCRATCH, withTempDir } from "./_util.mjs";

/** Runs `npx ckpt ...args` in the scratch project; stdin from `input` (bytes) when given. */
async function ckpt(args, { input, cwd = SCRATCH } = {}) {
  const r = await runChild("npx", ["--no-install", "ckpt", ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: "1" },
    input: input ?? "",
  });
  return { code: r.code, stdout: r.stdoutBytes, stderr: r.stderr };
}

test("npx ckpt --version and --help run under Node", async () => {
  const v = await ckpt(["--version"]);
  assert.equal(v.code, 0, v.stderr);
  const pkg = JSON.parse(await readFile(join(SCRATCH, "node_modules/@ckpt/ckpt/package.json"), "utf8"));
  assert.match(v.stdout.toString(), new RegExp(pkg.version.replaceAll(".", "\\.")));
  const h = await ckpt(["--help"]);
  assert.equal(h.code, 0);
  assert.match(h.stdout.toString(), /inspect/);
});

test("npx ckpt inspect, verify and diff a file; exit codes 0 and 1", async () => {
  await withTempDir(async (dir) => {
    const a = join(dir, "a.ckpt");
    await saveCheckpoint(a, fixtureCheckpoint());
    const inspect = await ckpt(["inspect", a]);
    assert.equal(inspect.code, 0, inspect.stderr);
    assert.match(inspect.stdout.toString(), /dense\/kernel/);
    const verify = await ckpt(["verify", a]);
    assert.equal(verify.code, 0, verify.stderr);
    assert.match(verify.stdout.toString(), /^ok /);
    const same = await ckpt(["diff", a, a]);
    assert.equal(same.code, 0, same.stderr);
    const other = fixtureCheckpoint();
    other.tensors[1].data = new Float32Array([2, 2, 2, 2]);
    const b = join(dir, "b.ckpt");
    await saveCheckpoint(b, other);
    const differ = await ckpt(["diff", a, b]);
    assert.equal(differ.code, 1);
    assert.match(differ.stdout.toString(), /dense\/bias/);
  });
});

test("npx ckpt refuses a corrupt file with exit code 4 and one line naming the tensor", async () => {
  await withTempDir(async (dir) => {
    const a = join(dir, "a.ckpt");
    await saveCheckpoint(a, fixtureCheckpoint());
    const bytes = await readFile(a);
    bytes[bytes.length >> 1] ^= 1;
    await writeFile(a, bytes);
    const r = await ckpt(["verify", a]);
    assert.equal(r.code, 4);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /^ckpt verify: .*dense\/kernel/);
    const missing = await ckpt(["inspect", join(dir, "none.ckpt")]);
    assert.equal(missing.code, 3);
    const usage = await ckpt(["inspect", "--no-such-flag", a]);
    assert.equal(usage.code, 2);
  });
});

test("npx ckpt convert pipes standard input to standard output, and the result loads bit for bit", async () => {
  await withTempDir(async (dir) => {
    const a = join(dir, "a.ckpt");
    await saveCheckpoint(a, fixtureCheckpoint());
    const json = await ckpt(["convert", "-", "-", "--codec", "json"], { input: await readFile(a) });
    assert.equal(json.code, 0, json.stderr);
    assert.match(json.stdout.toString().split("\n")[0], /^\{/);
    const back = await ckpt(["convert", "-", join(dir, "back.ckpt")], { input: json.stdout });
    assert.equal(back.code, 0, back.stderr);
    const x = await loadCheckpoint(join(dir, "back.ckpt"));
    const want = fixtureCheckpoint();
    for (const [i, t] of want.tensors.entries()) {
      const got = x.tensors[i].data;
      assert.deepEqual(
        new Uint8Array(got.buffer, got.byteOffset, got.byteLength),
        new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength),
      );
    }
  });
});

test("npx ckpt ls lists a manager's directory", async () => {
  await withTempDir(async (dir) => {
    const m = await CheckpointManager.open(dir);
    for (const step of [1, 2]) await m.save({ ...fixtureCheckpoint(), metadata: { step } });
    await m.close();
    const r = await ckpt(["ls", dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout.toString(), /\b2\b/);
  });
});
