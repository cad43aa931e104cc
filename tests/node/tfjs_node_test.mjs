// The tfjs adapter under Node on the native backend (@tensorflow/tfjs-node 4.22.0), installed as a
// user's project installs it: `npm install @ckpt/ckpt @tensorflow/tfjs-node`, one tfjs-core for
// both. The project's install script (a libtensorflow download) is replaced by the binding that
// `deno task setup:native` built on this machine; the test skips without it (fails in CI).
import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFile, mkdir, readFile, stat, symlink, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { componentTest, REPO, runChild, SCRATCH, withTempDir } from "./_util.mjs";

/** Runs a command to its end; a failure is an error with its output. */
async function run(file, args, options) {
  const r = await runChild(file, args, options);
  if (r.code !== 0) throw new Error(`${file} ${args.join(" ")} exited with ${r.code ?? r.signal}:\n${r.out}`);
  return r;
}
const NATIVE = join(REPO, ".native", "node_modules", "@tensorflow", "tfjs-node");
const BINDING = join("lib", "napi-v8", "tfjs_binding.node");

async function missing() {
  try {
    await stat(join(NATIVE, BINDING));
    return undefined;
  } catch {
    return `no native build at ${NATIVE} (run deno task setup:native)`;
  }
}

/** The tarball the harness installed into the scratch project (its lockfile records it). */
async function tarball() {
  const lock = JSON.parse(await readFile(join(SCRATCH, "package-lock.json"), "utf8"));
  const resolved = lock.packages?.["node_modules/@ckpt/ckpt"]?.resolved ?? "";
  assert.match(resolved, /^file:.*\.tgz$/, "the scratch project was installed from a tarball");
  return resolve(SCRATCH, resolved.slice("file:".length)); // relative to the scratch project
}

componentTest(
  "snapshot and restore on tfjs-node cross to cpu and back bit for bit, and resume exactly",
  await missing(),
  async () => {
    await withTempDir(async (dir) => {
      await writeFile(join(dir, "package.json"), JSON.stringify({ private: true, type: "module" }));
      await run("npm", [
        "install",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        await tarball(),
        "@tensorflow/tfjs-node@4.22.0",
      ], { cwd: dir });
      const pkg = join(dir, "node_modules", "@tensorflow", "tfjs-node");
      await mkdir(join(pkg, "lib", "napi-v8"), { recursive: true });
      await copyFile(join(NATIVE, BINDING), join(pkg, BINDING));
      await symlink(join(NATIVE, "deps"), join(pkg, "deps"));
      await copyFile(new URL("./_tfjs_node_child.mjs", import.meta.url), join(dir, "child.mjs"));
      const { stdout } = await run("node", ["child.mjs"], { cwd: dir });
      const r = JSON.parse(stdout.trim().split("\n").at(-1));
      assert.equal(r.backend, "tensorflow");
      assert.match(r.tensorflow, /^2\.\d+\.\d+/);
      assert.deepEqual(r.shimAdded, []);
      assert.equal(r.crossings.length, 3);
      for (const c of r.crossings) {
        assert.equal(c.missing, 0, `${c.from} -> ${c.to}`);
        assert.equal(c.restoredSha256, c.sha256, `${c.from} -> ${c.to}: the same bytes`);
      }
      assert.equal(r.crossings[2].resumedExactly, true, "resumed on tensorflow exactly");
    });
  },
);

test("the tfjs-node shim is exported to Node and adds nothing where node:util has both functions", async () => {
  const { installNodeUtilShim } = await import("@ckpt/ckpt/tfjs-node-shim");
  assert.deepEqual(installNodeUtilShim(), []);
});
