// The tarball as a publisher checks it: publint and @arethetypeswrong/cli (ESM-only profile: the
// package has no CommonJS entry, on purpose) report no problem; package.json says what the
// issue asks (name, version from deno.json, type, exports, engines, bin, optional TF.js peers).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { existsSync } from "node:fs";
import process from "node:process";
import { REPO, runChild, SCRATCH } from "./_util.mjs";

const TARBALL = process.env.CKPT_TARBALL ?? "";

/** The path of a command an installed package provides (`node_modules/.bin`, here or in a parent). */
function binOf(name) {
  for (let dir = SCRATCH; dir !== "/"; dir = dirname(dir)) {
    const bin = join(dir, "node_modules", ".bin", name);
    if (existsSync(bin)) return bin;
  }
  throw new Error(`no ${name} command installed above ${SCRATCH}`);
}

function run(file, args, cwd = SCRATCH) {
  return runChild(file, args, { cwd, env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" } });
}

test("package.json: name, deno.json's version, ESM, exports of every entry, engines, bin, optional TF.js peers", async () => {
  const pkg = JSON.parse(await readFile(join(SCRATCH, "node_modules/@ckpt/ckpt/package.json"), "utf8"));
  const deno = JSON.parse(await readFile(join(REPO, "deno.json"), "utf8"));
  assert.equal(pkg.name, "@ckpt/ckpt");
  assert.equal(pkg.version, deno.version);
  assert.equal(pkg.type, "module");
  assert.deepEqual(
    Object.keys(pkg.exports).filter((k) => k !== "./package.json").sort(),
    Object.keys(deno.exports).sort(),
  );
  for (const [k, v] of Object.entries(pkg.exports)) if (k !== "./package.json") assert.match(v.types, /\.d\.ts$/);
  assert.match(pkg.engines.node, />=\s*20/);
  assert.equal(pkg.bin.ckpt, "./bin/ckpt.js");
  assert.ok(pkg.peerDependencies["@tensorflow/tfjs-core"]);
  assert.equal(pkg.peerDependenciesMeta["@tensorflow/tfjs-core"].optional, true);
  assert.ok(!pkg.dependencies?.["@tensorflow/tfjs-core"], "TF.js is never a dependency");
});

test("publint reports no problem", { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(join(SCRATCH, "publint-"));
  try {
    const untar = await run("tar", ["-xzf", TARBALL, "-C", dir]);
    assert.equal(untar.code, 0, untar.out);
    const r = await run(process.execPath, [
      binOf("publint"),
      "--strict",
      "--pack",
      "false",
      join(dir, "package"),
    ]);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /All good/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("@arethetypeswrong/cli reports no problem (ESM-only)", { timeout: 120_000 }, async () => {
  const r = await run(process.execPath, [
    binOf("attw"),
    TARBALL,
    "--profile",
    "esm-only",
    "--format",
    "ascii",
  ]);
  assert.equal(r.code, 0, r.out);
  // Node 16+ from ESM and bundlers resolve every entry, to types and JavaScript.
  const checked = r.out.split("\n").filter((l) => /^(node16 \(from ESM\)|bundler):/.test(l));
  const pkg = JSON.parse(await readFile(join(SCRATCH, "node_modules/@ckpt/ckpt/package.json"), "utf8"));
  assert.equal(checked.length, 2 * Object.keys(pkg.exports).length, r.out);
  for (const line of checked) assert.match(line, /🟢/, line);
});
