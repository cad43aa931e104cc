/**
 * Builds the native TensorFlow backend (`@tensorflow/tfjs-node` and `@tensorflow/tfjs-node-gpu`,
 * backend `tensorflow`) from a libtensorflow found on this machine, without the packages' own
 * install step (it downloads libtensorflow 2.9.1 from storage.googleapis.com).
 *
 * ```sh
 * deno task setup:native                              # finds tensorflow_cpu-*.whl (see below)
 * deno task setup:native --wheel ./tensorflow_cpu-2.21.0-cp311-cp311-manylinux_2_27_x86_64.whl
 * deno task setup:native --libtensorflow /opt/libtensorflow-gpu   # lib/ and include/ of your own
 * deno task setup:native --project ~/my-app           # and into a Node project: import "@tensorflow/tfjs-node"
 * ```
 *
 * Steps: find the library (a `tensorflow_cpu` / `tensorflow` wheel for Linux x86_64, whose
 * `libtensorflow_cc.so.2` carries TensorFlow's C and eager C API, or a libtensorflow directory
 * laid out as Google's `libtensorflow-*.tar.gz`: `lib/libtensorflow.so.2`,
 * `lib/libtensorflow_framework.so.2`, `include/tensorflow/c/`); `npm install --ignore-scripts`
 * both packages; place the libraries in `deps/lib` (with the link names the binding links
 * against, `libtensorflow.so`, `libtensorflow_framework.so`, and `libtensorflow.so.2.9.1`, the
 * name the packages' install script checks before it would download) and the C headers in
 * `deps/include`; `npm rebuild` with `npm_config_build_from_source=true` and `--nodedir` on the
 * system's Node headers; check the binding under Node. tfjs-node-gpu ships the same binding
 * sources, so its binding is the same file (checked by hash) and is copied, not compiled twice.
 *
 * The result is cached outside the clone, in `$CKPT_NATIVE_CACHE` (default
 * `$XDG_CACHE_HOME/ckpt/native` or `~/.cache/ckpt/native`), under a key made of the packages'
 * version, the platform and the SHA-256 of the library source: fresh clones on the same machine
 * reuse it; a new wheel or library builds anew. Then the packages in Deno's npm cache (where
 * `npm:@tensorflow/tfjs-node@4.22.0` resolves) get `lib` and `deps` links to the build, and
 * `.native/node_modules` in the clone links to the npm tree (for this repository's Node tests).
 * With `--project DIR`, instead: `npm install --ignore-scripts @tensorflow/tfjs-node@4.22.0` in
 * the npm project DIR (recorded in its package.json, deduplicated with the project's TF.js), the
 * build's binding copied to where tfjs-node loads it, its `deps` linked to the build's libraries,
 * and `import * as tf from "@tensorflow/tfjs-node"` checked from that project as an ES module.
 *
 * Environment: `CKPT_TF_WHEEL` (= `--wheel`), `CKPT_LIBTENSORFLOW` (= `--libtensorflow`),
 * `CKPT_WHEEL_DIRS` (colon-separated directories searched for a wheel, instead of
 * `PIP_FIND_LINKS` and `/opt/pypi/files`), `CKPT_NATIVE_CACHE`, `CKPT_NODEDIR` (Node's headers: a directory with
 * `include/node/node_api.h`; default the prefix of the `node` on `PATH`).
 *
 * @module
 */
import { basename, dirname, join, resolve } from "node:path";

/** The tfjs-node release built here; the adapter's tfjs-core must be the same version. */
export const TFJS_NODE_VERSION = "4.22.0";
/** The packages that carry the binding. */
export const NATIVE_PACKAGES = ["@tensorflow/tfjs-node", "@tensorflow/tfjs-node-gpu"] as const;
/** The name the packages' install script checks in `deps/lib` before it would download. */
const INSTALL_CHECK_NAME = "libtensorflow.so.2.9.1";
/** tfjs-node 4.22 lists N-API versions 3 to 8; node-pre-gyp picks the highest the runtime has. */
const NAPI_DIR = "lib/napi-v8";
const DEFAULT_WHEEL_DIRS = ["/opt/pypi/files"];

/** Where the library comes from. */
type Source =
  | { kind: "wheel"; path: string }
  | { kind: "libtensorflow"; path: string; lib: string; framework: string };

class SetupError extends Error {}

function usage(): string {
  return [
    "usage: deno task setup:native [--wheel FILE | --libtensorflow DIR] [--cache DIR] [--rebuild] [--build-only]",
    "                              [--project DIR]",
    "  --wheel FILE          a tensorflow_cpu (or tensorflow) wheel for Linux x86_64",
    "  --libtensorflow DIR   your own libtensorflow (a CUDA build for tfjs-node-gpu): DIR/lib/libtensorflow.so.2,",
    "                        DIR/lib/libtensorflow_framework.so.2 and DIR/include/tensorflow/c/c_api.h",
    "  --cache DIR           where builds are kept (default $CKPT_NATIVE_CACHE or ~/.cache/ckpt/native)",
    "  --rebuild             build again even if the cache has this build",
    "  --build-only          build (or reuse) and check the binding; link nothing into Deno's cache or the clone",
    "  --project DIR         install @tensorflow/tfjs-node with this binding into the npm project DIR (for Node)",
  ].join("\n");
}

interface Args {
  wheel?: string;
  libtensorflow?: string;
  cache?: string;
  rebuild: boolean;
  buildOnly: boolean;
  project?: string;
}

function parseArgs(args: string[]): Args {
  const out: Args = { rebuild: false, buildOnly: false };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const [flag, inline] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [
      arg,
      undefined,
    ];
    const value = () => {
      const v = inline ?? args[++i];
      if (!v) throw new SetupError(`${flag} needs a value\n${usage()}`);
      return v;
    };
    if (flag === "--wheel") out.wheel = value();
    else if (flag === "--libtensorflow") out.libtensorflow = value();
    else if (flag === "--cache") out.cache = value();
    else if (flag === "--rebuild") out.rebuild = true;
    else if (flag === "--build-only") out.buildOnly = true;
    else if (flag === "--project") out.project = value();
    else if (flag === "--help" || flag === "-h") {
      console.log(usage());
      Deno.exit(0);
    } else throw new SetupError(`unknown argument "${arg}"\n${usage()}`);
  }
  return out;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** A shared library's SONAME (from `readelf -d`), or undefined if it has none. */
async function sonameOf(path: string): Promise<string | undefined> {
  const out = await run("readelf", ["-d", path]);
  return /\(SONAME\)\s+Library soname: \[([^\]]+)\]/.exec(out)?.[1];
}

/** Runs a command; on failure throws with the command and the tail of its output. */
async function run(cmd: string, args: string[], options: { cwd?: string; env?: Record<string, string> } = {}) {
  const child = new Deno.Command(cmd, { args, ...options, stdout: "piped", stderr: "piped" });
  let out;
  try {
    out = await child.output();
  } catch (e) {
    throw new SetupError(`cannot run ${cmd}: ${(e as Error).message}`);
  }
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) {
    const tail = text.trim().split("\n").slice(-25).join("\n");
    throw new SetupError(`${cmd} ${args.join(" ")} failed (exit ${out.code}):\n${tail}`);
  }
  return text;
}

async function sha256File(path: string): Promise<string> {
  return (await run("sha256sum", [path])).split(" ")[0]!;
}

/** A wheel's version, for picking the newest: `tensorflow_cpu-2.21.0-cp311-...` → [2, 21, 0]. */
function wheelVersion(name: string): number[] {
  return (name.split("-")[1] ?? "").split(".").map((p) => Number.parseInt(p, 10) || 0);
}

async function findWheel(): Promise<{ path?: string; searched: string[] }> {
  // CKPT_WHEEL_DIRS replaces the default places; PIP_FIND_LINKS adds to them.
  const only = Deno.env.get("CKPT_WHEEL_DIRS");
  const split = (v: string | undefined) => (v ?? "").split(/[:\s]+/).filter((d) => d && !d.includes("://"));
  const searched = only !== undefined
    ? split(only)
    : [...new Set([...split(Deno.env.get("PIP_FIND_LINKS")), ...DEFAULT_WHEEL_DIRS])];
  const found: string[] = [];
  for (const dir of searched) {
    try {
      for await (const e of Deno.readDir(dir)) {
        if (/^tensorflow(_cpu)?-[0-9.]+-.*linux.*x86_64\.whl$/.test(e.name)) found.push(join(dir, e.name));
      }
    } catch { /* a directory that is not there */ }
  }
  found.sort((a, b) => {
    const [x, y] = [wheelVersion(basename(a)), wheelVersion(basename(b))];
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
      if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
    }
    return 0;
  });
  return { path: found.at(-1), searched };
}

async function resolveSource(opts: { wheel?: string; libtensorflow?: string }): Promise<Source> {
  const dir = opts.libtensorflow ?? Deno.env.get("CKPT_LIBTENSORFLOW");
  if (dir) {
    const lib = join(dir, "lib", "libtensorflow.so.2");
    const framework = join(dir, "lib", "libtensorflow_framework.so.2");
    const missing = [];
    for (const p of [lib, framework, join(dir, "include", "tensorflow", "c", "c_api.h")]) {
      if (!await isFile(p)) missing.push(p);
    }
    if (missing.length) {
      throw new SetupError(
        `--libtensorflow ${dir}: missing ${
          missing.join(", ")
        } (expected the layout of Google's libtensorflow tarballs: lib/ and include/)`,
      );
    }
    return { kind: "libtensorflow", path: resolve(dir), lib: resolve(lib), framework: resolve(framework) };
  }
  const wheel = opts.wheel ?? Deno.env.get("CKPT_TF_WHEEL");
  if (wheel) {
    if (!await isFile(wheel)) throw new SetupError(`--wheel ${wheel}: no such file`);
    return { kind: "wheel", path: resolve(wheel) };
  }
  const { path, searched } = await findWheel();
  if (!path) {
    throw new SetupError([
      "no TensorFlow library to build tfjs-node's binding against: the native backend is NOT set up.",
      `  Searched for tensorflow_cpu-*.whl / tensorflow-*.whl (Linux x86_64) in: ${searched.join(", ")}`,
      "  Provide one of:",
      "    --wheel FILE (or CKPT_TF_WHEEL): a tensorflow_cpu or tensorflow wheel (pip download tensorflow-cpu==2.21.0)",
      "    --libtensorflow DIR (or CKPT_LIBTENSORFLOW): your own libtensorflow, e.g. a CUDA build for tfjs-node-gpu,",
      "        with DIR/lib/libtensorflow.so.2, DIR/lib/libtensorflow_framework.so.2, DIR/include/tensorflow/c/",
      "    CKPT_WHEEL_DIRS=DIR[:DIR]: where to look for a wheel",
    ].join("\n"));
  }
  return { kind: "wheel", path };
}

/** The directory holding Node's headers (`include/node/node_api.h`), for node-gyp's `--nodedir`. */
async function findNodeDir(): Promise<string> {
  const given = Deno.env.get("CKPT_NODEDIR");
  const candidates = given ? [given] : [];
  if (!given) {
    const node = (await run("node", ["-p", "process.execPath"])).trim();
    candidates.push(dirname(dirname(await Deno.realPath(node))), "/usr", "/usr/local");
  }
  for (const c of candidates) {
    if (await isFile(join(c, "include", "node", "node_api.h"))) return c;
  }
  throw new SetupError(
    `Node's C headers not found (looked for include/node/node_api.h under ${candidates.join(", ")}); ` +
      "node-gyp would download them and this machine may be offline: install Node's headers (Debian: the nodejs " +
      "package from NodeSource carries them, or libnode-dev) or set CKPT_NODEDIR to a directory with include/node/",
  );
}

/** Extracts the libraries and the C API headers from a wheel into `deps/lib` and `deps/include`. */
async function placeFromWheel(wheel: string, deps: string) {
  const script = `
import sys, zipfile, os, shutil
wheel, deps = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(wheel)
names = set(z.namelist())
libs = {"tensorflow/libtensorflow_cc.so.2": "libtensorflow_cc.so.2",
        "tensorflow/libtensorflow_framework.so.2": "libtensorflow_framework.so.2"}
for member, name in libs.items():
    if member not in names:
        sys.exit(f"{wheel} has no {member}: not a TensorFlow 2 wheel for Linux")
    with z.open(member) as src, open(os.path.join(deps, "lib", name), "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 22)
# The C and eager C API headers and the few headers they include.
prefixes = ("tensorflow/include/tensorflow/c/", "tensorflow/include/xla/tsl/c/", "tensorflow/include/tsl/c/",
            "tensorflow/include/tensorflow/core/platform/ctstring", "tensorflow/include/tsl/platform/ctstring",
            "tensorflow/include/xla/tsl/platform/ctstring")
count = 0
for member in names:
    if member.startswith(prefixes) and not member.endswith("/"):
        target = os.path.join(deps, "include", member[len("tensorflow/include/"):])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(member) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        count += 1
if count == 0:
    sys.exit(f"{wheel} has no tensorflow/include/tensorflow/c/ headers")
print(count)
`;
  await run("python3", ["-c", script, wheel, deps]);
  return { lib: "libtensorflow_cc.so.2", framework: "libtensorflow_framework.so.2" };
}

async function placeFromDir(source: Extract<Source, { kind: "libtensorflow" }>, deps: string) {
  // Links, not copies: a CUDA libtensorflow is gigabytes; the build names the directory it links to.
  await Deno.symlink(source.lib, join(deps, "lib", "libtensorflow.so.2"));
  await Deno.symlink(source.framework, join(deps, "lib", "libtensorflow_framework.so.2"));
  await Deno.remove(join(deps, "include"));
  await Deno.symlink(join(source.path, "include"), join(deps, "include"));
  return { lib: "libtensorflow.so.2", framework: "libtensorflow_framework.so.2" };
}

async function hashTree(dir: string, names: string[]): Promise<string> {
  const parts = [];
  for (const name of names) parts.push(await sha256File(join(dir, name)));
  return parts.join(",");
}

/** What a fresh Node reports after loading a package's binding. */
async function probe(root: string, pkg: string): Promise<{ backend: string; tf: string; sum: number }> {
  const code = `
const tf = require(${JSON.stringify(pkg)});
const sum = tf.tidy(() => tf.matMul(tf.ones([2, 3]), tf.ones([3, 2])).sum().dataSync()[0]);
console.log(JSON.stringify({ backend: tf.getBackend(), tf: tf.backend().binding.TF_Version, sum }));
`;
  const out = await run("node", ["-e", code], {
    cwd: root,
    env: { NODE_PATH: join(root, "node_modules"), TF_CPP_MIN_LOG_LEVEL: "2" },
  });
  const line = out.trim().split("\n").filter((l) => l.startsWith("{")).at(-1);
  const result = JSON.parse(line ?? "null");
  if (result?.backend !== "tensorflow" || result?.sum !== 12) {
    throw new SetupError(`${pkg} loaded but did not run on the tensorflow backend: ${out.trim()}`);
  }
  return result;
}

async function build(source: Source, target: string): Promise<Record<string, unknown>> {
  const started = performance.now();
  const work = `${target}.partial-${Deno.pid}`;
  await Deno.remove(work, { recursive: true }).catch(() => {});
  await Deno.mkdir(work, { recursive: true });
  try {
    await Deno.writeTextFile(join(work, "package.json"), JSON.stringify({ private: true, name: "ckpt-native" }) + "\n");
    console.log(`* npm install --ignore-scripts ${NATIVE_PACKAGES.map((p) => `${p}@${TFJS_NODE_VERSION}`).join(" ")}`);
    await run("npm", [
      "install",
      "--ignore-scripts",
      "--no-audit",
      "--no-fund",
      "--no-package-lock",
      ...NATIVE_PACKAGES.map((p) => `${p}@${TFJS_NODE_VERSION}`),
    ], { cwd: work });

    const [cpu, gpu] = NATIVE_PACKAGES.map((p) => join(work, "node_modules", p));
    const deps = join(cpu!, "deps");
    await Deno.mkdir(join(deps, "lib"), { recursive: true });
    await Deno.mkdir(join(deps, "include"), { recursive: true });
    console.log(`* placing libtensorflow from ${source.path}`);
    const names = source.kind === "wheel" ? await placeFromWheel(source.path, deps) : await placeFromDir(source, deps);
    // The binding records each library's SONAME, which need not be its file name (the wheel's
    // library is libtensorflow_cc.so.2): the loader looks for that name in deps/lib.
    for (const name of [names.lib, names.framework]) {
      const soname = await sonameOf(join(deps, "lib", name));
      if (soname && soname !== name && !await exists(join(deps, "lib", soname))) {
        await Deno.symlink(name, join(deps, "lib", soname));
      }
    }
    await Deno.symlink(names.lib, join(deps, "lib", "libtensorflow.so"));
    await Deno.symlink(names.framework, join(deps, "lib", "libtensorflow_framework.so"));
    await Deno.symlink(names.lib, join(deps, "lib", INSTALL_CHECK_NAME));

    const nodedir = await findNodeDir();
    console.log(`* compiling tfjs_binding.node (npm rebuild --build-from-source --nodedir=${nodedir})`);
    await run("npm", ["rebuild", NATIVE_PACKAGES[0], "--build-from-source", `--nodedir=${nodedir}`], {
      cwd: work,
      env: { npm_config_build_from_source: "true", npm_config_nodedir: nodedir },
    });
    const binding = join(NAPI_DIR, "tfjs_binding.node");
    if (!await isFile(join(cpu!, binding))) throw new SetupError(`the build left no ${binding} in ${cpu}`);
    console.log(`  compiled in ${Math.round((performance.now() - started) / 1000)} s since the start`);

    // tfjs-node-gpu: the same binding sources → the same binary, over the same deps.
    const sources = ["binding.gyp", ...[...Deno.readDirSync(join(cpu!, "binding"))].map((e) => `binding/${e.name}`)]
      .sort();
    if (await hashTree(cpu!, sources) !== await hashTree(gpu!, sources)) {
      throw new SetupError(`${NATIVE_PACKAGES[1]} ships binding sources that differ from ${NATIVE_PACKAGES[0]}'s`);
    }
    await Deno.mkdir(join(gpu!, NAPI_DIR), { recursive: true });
    await Deno.copyFile(join(cpu!, binding), join(gpu!, binding));
    await Deno.symlink(join("..", "tfjs-node", "deps"), join(gpu!, "deps"));

    console.log("* checking the binding under Node");
    const checks: Record<string, unknown> = {};
    for (const pkg of NATIVE_PACKAGES) checks[pkg] = await probe(work, pkg);
    const manifest = {
      tfjsNode: TFJS_NODE_VERSION,
      source,
      nodedir,
      node: (await run("node", ["--version"])).trim(),
      checks,
      buildSeconds: Math.round((performance.now() - started) / 1000),
      builtAt: new Date().toISOString(),
    };
    await Deno.writeTextFile(join(work, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
    try {
      await Deno.rename(work, target);
    } catch (e) {
      if (!await isFile(join(target, "manifest.json"))) throw e; // another setup finished first: use its build
      await Deno.remove(work, { recursive: true });
    }
    return JSON.parse(await Deno.readTextFile(join(target, "manifest.json")));
  } catch (e) {
    await Deno.remove(work, { recursive: true }).catch(() => {});
    throw e;
  }
}

/** Replaces `link` with a symlink to `to`, refusing to delete anything that is not a link. */
async function relink(to: string, link: string) {
  try {
    const st = await Deno.lstat(link);
    if (!st.isSymlink) throw new SetupError(`${link} exists and is not a link; move it away and run again`);
    await Deno.remove(link);
  } catch (e) {
    if (e instanceof SetupError) throw e;
  }
  await Deno.symlink(to, link);
}

/**
 * Installs tfjs-node into the npm project `project` with the build's binding: `npm install
 * --ignore-scripts` (its own install script would download libtensorflow), the binding copied
 * into the package, `deps` linked to the build's libraries; then checked from the project as an
 * ES module, as the user's code imports it.
 */
async function installIntoProject(root: string, project: string): Promise<string> {
  // `deno task` runs in the clone; a relative DIR is the user's, from where the task was started.
  const dir = resolve(Deno.env.get("INIT_CWD") ?? Deno.cwd(), project);
  if (!await isFile(join(dir, "package.json"))) {
    throw new SetupError(`--project ${project}: no package.json in ${dir} (an npm project: npm init -y)`);
  }
  const [pkg] = NATIVE_PACKAGES;
  console.log(`* npm install --ignore-scripts ${pkg}@${TFJS_NODE_VERSION} in ${dir}`);
  await run("npm", ["install", "--ignore-scripts", "--no-audit", "--no-fund", `${pkg}@${TFJS_NODE_VERSION}`], {
    cwd: dir,
  });
  const installed = join(dir, "node_modules", pkg);
  const built = join(root, "node_modules", pkg);
  const binding = join(NAPI_DIR, "tfjs_binding.node");
  await Deno.mkdir(join(installed, NAPI_DIR), { recursive: true });
  await Deno.copyFile(join(built, binding), join(installed, binding));
  await relink(join(built, "deps"), join(installed, "deps"));
  console.log(`* checking import * as tf from "${pkg}" in ${dir}`);
  const code = `import * as tf from ${JSON.stringify(pkg)};
const sum = tf.tidy(() => tf.matMul(tf.ones([2, 3]), tf.ones([3, 2])).sum().dataSync()[0]);
console.log(JSON.stringify({ backend: tf.getBackend(), sum }));`;
  const out = await run("node", ["--input-type=module", "-e", code], { cwd: dir, env: { TF_CPP_MIN_LOG_LEVEL: "2" } });
  const result = JSON.parse(out.trim().split("\n").filter((l) => l.startsWith("{")).at(-1) ?? "null");
  if (result?.backend !== "tensorflow" || result?.sum !== 12) {
    throw new SetupError(`${pkg} installed in ${dir} but did not run on the tensorflow backend: ${out.trim()}`);
  }
  return dir;
}

/** Puts the build under the packages in Deno's npm cache, where `npm:@tensorflow/tfjs-node` loads from. */
async function linkIntoDeno(root: string): Promise<string[]> {
  const deno = Deno.execPath();
  const specifiers = NATIVE_PACKAGES.map((p) => `npm:${p}@${TFJS_NODE_VERSION}`);
  // Outside the repo's config and lockfile: the quick start's first run should not download these.
  await run(deno, ["cache", "--no-config", "--no-lock", ...specifiers]);
  const info = JSON.parse(await run(deno, ["info", "--no-config", "--json"]));
  const npmCache: string = info.npmCache;
  const registry = new URL(Deno.env.get("NPM_CONFIG_REGISTRY") ?? "https://registry.npmjs.org/");
  const linked = [];
  for (const pkg of NATIVE_PACKAGES) {
    const dir = join(npmCache, registry.host.replace(":", "_"), pkg, TFJS_NODE_VERSION);
    if (!await isFile(join(dir, "package.json"))) {
      throw new SetupError(`deno cache ${pkg}@${TFJS_NODE_VERSION} left no package at ${dir}`);
    }
    const built = join(root, "node_modules", pkg);
    await relink(join(built, "lib"), join(dir, "lib"));
    await relink(join(built, "deps"), join(dir, "deps"));
    linked.push(dir);
  }
  return linked;
}

async function main() {
  const opts = parseArgs(Deno.args);
  if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64") {
    throw new SetupError(
      `this script builds for Linux x86_64 (this is ${Deno.build.os} ${Deno.build.arch}); elsewhere use the packages' own install`,
    );
  }
  const source = await resolveSource(opts);
  const id = source.kind === "wheel"
    ? await sha256File(source.path)
    : `${await sha256File(source.lib)}-${await sha256File(source.framework)}`;
  const key = `tfjs-node-${TFJS_NODE_VERSION}-linux-x64-${source.kind}-${
    (await crypto.subtle.digest("SHA-256", new TextEncoder().encode(id)).then((d) =>
      Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("")
    )).slice(0, 16)
  }`;
  const home = Deno.env.get("HOME") ?? "/tmp";
  const cache = resolve(
    opts.cache ?? Deno.env.get("CKPT_NATIVE_CACHE") ??
      join(Deno.env.get("XDG_CACHE_HOME") ?? join(home, ".cache"), "ckpt", "native"),
  );
  const target = join(cache, key);
  await Deno.mkdir(cache, { recursive: true });

  let manifest: Record<string, unknown>;
  if (!opts.rebuild && await isFile(join(target, "manifest.json"))) {
    manifest = JSON.parse(await Deno.readTextFile(join(target, "manifest.json")));
    console.log(`* reusing the build in ${target} (built ${manifest.builtAt} in ${manifest.buildSeconds} s)`);
    // A cached build is checked again: the library it links to may have moved.
    try {
      for (const pkg of NATIVE_PACKAGES) await probe(target, pkg);
    } catch (e) {
      throw new SetupError(
        `the cached build in ${target} no longer loads (run again with --rebuild): ${(e as Error).message}`,
      );
    }
  } else {
    if (opts.rebuild) await Deno.remove(target, { recursive: true }).catch(() => {});
    console.log(`* building into ${target}`);
    manifest = await build(source, target);
  }
  const checks = manifest.checks as Record<string, { tf: string }>;
  const ready = `${NATIVE_PACKAGES.map((p) => `${p}@${TFJS_NODE_VERSION}`).join(", ")} ` +
    `on TensorFlow ${checks[NATIVE_PACKAGES[0]]?.tf} (${source.kind} ${source.path})`;
  if (opts.buildOnly) {
    console.log(`native backend built: ${ready}\n  build:  ${target}`);
    return;
  }
  if (opts.project !== undefined) {
    const dir = await installIntoProject(target, opts.project);
    console.log([
      `native backend ready for Node in ${dir}: ${NATIVE_PACKAGES[0]}@${TFJS_NODE_VERSION} on TensorFlow ${
        checks[NATIVE_PACKAGES[0]]?.tf
      }`,
      `  build:  ${target}`,
      `  Node:   import * as tf from "${NATIVE_PACKAGES[0]}" in ${dir} (ES module or CommonJS)`,
      `  after npm ci or a fresh node_modules, run this again (npm would run tfjs-node's install script)`,
    ].join("\n"));
    return;
  }
  const linked = await linkIntoDeno(target);
  const repo = resolve(dirname(new URL(import.meta.url).pathname), "..");
  await Deno.mkdir(join(repo, ".native"), { recursive: true });
  await relink(join(target, "node_modules"), join(repo, ".native", "node_modules"));

  console.log([
    `native backend ready: ${ready}`,
    `  build:  ${target}`,
    ...linked.map((d) => `  Deno:   ${d}/{lib,deps}`),
    `  Node:   deno task setup:native --project DIR puts it into your npm project DIR`,
  ].join("\n"));
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    if (!(e instanceof SetupError)) throw e;
    console.error(`setup:native: ${e.message}`);
    Deno.exit(1);
  }
}
