// `deno task setup:native` as a user runs it: what it says without a library, with a broken
// libtensorflow directory and with bad flags (all before any download or build), and the path a
// CUDA user takes: a libtensorflow directory of one's own (here made of this machine's CPU
// library, laid out as Google's tarballs are) builds a binding that runs.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { IN_CI } from "../_ci.ts";
import { packedTarball, pathWithoutDeno } from "../node/harness.ts";

const SCRIPT = fileURLToPath(new URL("../../scripts/setup_native.ts", import.meta.url));
const ROOT = fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");
const PERMISSIONS = ["--allow-read", "--allow-write", "--allow-env", "--allow-run"];

async function setup(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-lock", ...PERMISSIONS, SCRIPT, ...args],
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("setup:native without a wheel or library says what is missing, where it looked, and how to give one", async () => {
  const empty = await Deno.makeTempDir({ prefix: "ckpt_setup_empty_" });
  try {
    const r = await setup(["--cache", join(empty, "cache")], {
      CKPT_WHEEL_DIRS: empty,
      CKPT_TF_WHEEL: "",
      CKPT_LIBTENSORFLOW: "",
    });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /the native backend is NOT set up/);
    assert.ok(r.stderr.includes(`in: ${empty}`), r.stderr);
    assert.match(r.stderr, /--wheel FILE/);
    assert.match(r.stderr, /--libtensorflow DIR .*CUDA build for tfjs-node-gpu/);
    assert.doesNotMatch(r.stdout, /ready/);
    assert.deepEqual([...Deno.readDirSync(empty)].map((e) => e.name), [], "nothing built or cached");
  } finally {
    await Deno.remove(empty, { recursive: true });
  }
});

Deno.test("setup:native names each missing file of a libtensorflow directory, and refuses unknown flags", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt_setup_lib_" });
  try {
    await Deno.mkdir(join(dir, "lib"));
    await Deno.writeFile(join(dir, "lib", "libtensorflow.so.2"), new Uint8Array(0));
    const r = await setup(["--libtensorflow", dir, "--cache", join(dir, "cache")]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.ok(r.stderr.includes(`missing ${join(dir, "lib", "libtensorflow_framework.so.2")}, `), r.stderr);
    assert.ok(r.stderr.includes(join(dir, "include", "tensorflow", "c", "c_api.h")), r.stderr);
    const bad = await setup(["--wheels", "x"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /unknown argument "--wheels"\nusage: deno task setup:native/);
    const noValue = await setup(["--wheel"]);
    assert.match(noValue.stderr, /--wheel needs a value/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// The build this machine already has (deno task setup:native): its libraries and headers, as a
// user's own libtensorflow directory. In CI the .ci/run block has built it.
async function builtDeps(): Promise<string | undefined> {
  const r = await setup(["--build-only"]);
  const target = /^ {2}build: {2}(.+)$/m.exec(r.stdout)?.[1];
  return r.code === 0 && target ? join(target, "node_modules", "@tensorflow", "tfjs-node", "deps") : undefined;
}
const deps = await builtDeps();
if (!deps) console.log("setup:native --libtensorflow test skipped: no wheel here to make a library directory from");

Deno.test({
  name: "setup:native --libtensorflow DIR (a CUDA user's path) builds a binding on that library, then reuses it",
  ignore: !deps && !IN_CI,
  async fn() {
    assert.ok(deps, "the wheel's build, to make a library directory from");
    const dir = await Deno.makeTempDir({ prefix: "ckpt_setup_own_" });
    try {
      await Deno.mkdir(join(dir, "lib"));
      await Deno.symlink(join(deps, "lib", "libtensorflow_cc.so.2"), join(dir, "lib", "libtensorflow.so.2"));
      await Deno.symlink(
        join(deps, "lib", "libtensorflow_framework.so.2"),
        join(dir, "lib", "libtensorflow_framework.so.2"),
      );
      await Deno.symlink(join(deps, "include"), join(dir, "include"));
      const cache = join(dir, "cache");
      const first = await setup(["--libtensorflow", dir, "--cache", cache, "--build-only"]);
      assert.equal(first.code, 0, first.stdout + first.stderr);
      assert.match(first.stdout, /\* compiling tfjs_binding\.node/);
      assert.match(first.stdout, /native backend built: .* on TensorFlow 2\.\d+\.\d+ \(libtensorflow /);
      const [key] = [...Deno.readDirSync(cache)].map((e) => e.name);
      const manifest = JSON.parse(await Deno.readTextFile(join(cache, key!, "manifest.json")));
      assert.equal(manifest.source.kind, "libtensorflow");
      assert.equal(manifest.checks["@tensorflow/tfjs-node-gpu"].backend, "tensorflow");
      const again = await setup(["--libtensorflow", dir, "--cache", cache, "--build-only"]);
      assert.equal(again.code, 0, again.stdout + again.stderr);
      assert.match(again.stdout, /\* reusing the build in /);
      assert.doesNotMatch(again.stdout, /compiling/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/** The ```sh and ```js blocks of docs/tfjs.md's section on Node projects. */
async function nodeProjectBlocks(): Promise<{ sh: string; js: string }> {
  const docs = await Deno.readTextFile(join(ROOT, "docs", "tfjs.md"));
  const start = docs.indexOf("\n### From a Node project (ES modules)\n");
  assert.ok(start >= 0, "docs/tfjs.md has the section");
  const section = docs.slice(start, docs.indexOf("\n**With a GPU (CUDA)**", start));
  const sh = /^```sh\n([\s\S]*?)^```$/m.exec(section)?.[1];
  // `ignore`: deno test --doc leaves it to this test (it imports tfjs-node, which only the project has).
  const js = /^```js(?: ignore)?\n([\s\S]*?)^```$/m.exec(section)?.[1];
  assert.ok(sh && js, section);
  return { sh, js };
}

Deno.test({
  name: "setup:native --project: a fresh ESM npm project runs docs/tfjs.md's save and restore on tfjs-node, under Node",
  ignore: !deps && !IN_CI,
  async fn() {
    assert.ok(deps, "the native build (deno task setup:native)");
    const { sh, js } = await nodeProjectBlocks();
    const tarball = await packedTarball();
    const parent = await Deno.makeTempDir({ prefix: "ckpt_node_project_" });
    try {
      const app = join(parent, "my-app");
      await Deno.mkdir(app);
      // The docs' commands as written, with the package from its tarball (it is not on the registry)
      // and the clone where it is.
      const commands = sh.replace("npm install @ckpt/ckpt", `npm install --no-audit --no-fund ${tarball}`)
        .replace("/path/to/ckpt", ROOT);
      assert.notEqual(commands, sh);
      const setupRun = await new Deno.Command("sh", {
        args: ["-e", "-c", commands],
        cwd: parent,
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(setupRun.stdout) + new TextDecoder().decode(setupRun.stderr);
      assert.equal(setupRun.code, 0, text);
      assert.match(
        text,
        new RegExp(`native backend ready for Node in ${app}: @tensorflow/tfjs-node@4\\.22\\.0 on TensorFlow 2\\.`),
      );
      assert.doesNotMatch(text, /NODE_PATH|a few minutes/);
      const manifest = JSON.parse(await Deno.readTextFile(join(app, "package.json")));
      assert.equal(manifest.type, "module");
      assert.ok(manifest.dependencies["@tensorflow/tfjs-node"], "recorded in the project's package.json");
      assert.ok(manifest.dependencies["@ckpt/ckpt"]);
      // One tfjs-core in the project, shared by tfjs-node, @tensorflow/tfjs and @ckpt/ckpt/tfjs.
      const lock = JSON.parse(await Deno.readTextFile(join(app, "package-lock.json")));
      const cores = Object.keys(lock.packages).filter((p) => p.endsWith("node_modules/@tensorflow/tfjs-core"));
      assert.deepEqual(cores, ["node_modules/@tensorflow/tfjs-core"]);

      await Deno.writeTextFile(join(app, "app.mjs"), js);
      const node = await new Deno.Command("node", {
        args: ["app.mjs"],
        cwd: app,
        clearEnv: true,
        env: { PATH: await pathWithoutDeno(), HOME: Deno.env.get("HOME") ?? "/", TF_CPP_MIN_LOG_LEVEL: "2" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const out = new TextDecoder().decode(node.stdout);
      assert.equal(node.code, 0, out + new TextDecoder().decode(node.stderr));
      assert.equal(out.trim().split("\n").at(-1), "tensorflow true");
    } finally {
      await Deno.remove(parent, { recursive: true });
    }
  },
});
