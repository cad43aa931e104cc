// The harness itself: Node, not Deno, runs these tests, from the installed package.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import process from "node:process";
import { SCRATCH } from "./_util.mjs";

test("the Node tests run under Node with no deno on PATH", () => {
  assert.equal(typeof globalThis.Deno, "undefined");
  assert.match(process.version, /^v\d+\./);
  assert.throws(() => execFileSync("deno", ["--version"], { stdio: "pipe" }), { code: "ENOENT" });
});

test("the package under test is the installed tarball, at deno.json's version", async () => {
  const pkg = JSON.parse(readFileSync(join(SCRATCH, "node_modules/@ckpt/ckpt/package.json"), "utf8"));
  assert.equal(pkg.name, "@ckpt/ckpt");
  const lock = JSON.parse(readFileSync(join(SCRATCH, "package-lock.json"), "utf8"));
  assert.match(lock.packages["node_modules/@ckpt/ckpt"].resolved, /\.tgz$/);
  const resolved = createRequire(join(SCRATCH, "package.json")).resolve("@ckpt/ckpt");
  assert.ok(resolved.startsWith(join(SCRATCH, "node_modules")), resolved);
  const ckpt = await import("@ckpt/ckpt");
  assert.equal(typeof ckpt.saveCheckpoint, "function");
});
