// The harness itself: Node, not Deno, runs these tests, from the installed package.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import process from "node:process";
import { ChildDeadlineError, REPO, runChild, SCRATCH } from "./_util.mjs";

test("the Node tests run under Node with no deno on PATH", () => {
  assert.equal(typeof globalThis.Deno, "undefined");
  assert.match(process.version, /^v\d+\./);
  assert.throws(() => execFileSync("deno", ["--version"], { stdio: "pipe", timeout: 60_000 }), { code: "ENOENT" });
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

test("a hung child is killed at its deadline, with the child it started, and reported", async () => {
  // A parent (as npx is) that starts a grandchild, prints its pid, and neither ever exits.
  const script = `
    const { spawn } = await import("node:child_process");
    const grandchild = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    console.log("grandchild " + grandchild.pid);
    setInterval(() => {}, 1000);`;
  let grandchild = 0;
  const started = Date.now();
  await assert.rejects(
    runChild(process.execPath, ["--input-type=module", "-e", script], {
      deadlineMs: 2_000,
      onLine: (line) => grandchild = Number(line.split(" ")[1]),
    }),
    (e) => {
      assert.ok(e instanceof ChildDeadlineError, String(e));
      assert.match(
        e.message,
        /^Child process hung: .*node --input-type=module -e .* had not exited after 2000 ms, killed it \(SIGKILL\)\n/s,
      );
      assert.match(e.message, /grandchild \d+/, "what it printed ends the report");
      return true;
    },
  );
  assert.ok(Date.now() - started >= 2_000, "killed at the deadline, not before");
  assert.ok(grandchild > 0);
  // The grandchild went with it (its process group); give the kernel a moment to reap it.
  let alive = true;
  for (let i = 0; i < 100 && alive; i++) {
    try {
      process.kill(grandchild, 0);
      await new Promise((r) => setTimeout(r, 50));
    } catch (e) {
      assert.equal(e.code, "ESRCH");
      alive = false;
    }
  }
  assert.ok(!alive, `the grandchild ${grandchild} was killed too`);
});

test("every child a Node test starts goes through _util.mjs's deadline", () => {
  const dir = join(REPO, "tests", "node");
  for (const name of readdirSync(dir).filter((n) => n.endsWith(".mjs") && n !== "_util.mjs")) {
    const text = readFileSync(join(dir, name), "utf8");
    const imports = [...text.matchAll(/import \{([^}]*)\} from "node:child_process"/g)].flatMap((m) =>
      m[1].split(",").map((s) => s.trim())
    );
    // Only harness_test.mjs's execFileSync("deno"), which has a timeout of its own.
    const allowed = name === "harness_test.mjs" ? ["execFileSync"] : [];
    assert.deepEqual(imports.filter((i) => !allowed.includes(i)), [], `${name} starts processes without a deadline`);
  }
});
