// What a fresh clone downloads. deno.json's `imports` and deno.lock hold only what the library's
// entry points and the default demos load: `deno task` installs every import and `deno run`
// every package in deno.lock before running anything, so a tool listed there (a browser driver,
// a bundler) would be downloaded by a first `deno task train`. Test and build tools live in
// tools.imports.json and tools.lock, which only the tasks that need them use (`--import-map`,
// `--lock`); optional backends of the demo load by full specifier when asked for. See
// docs/development.md, "Dependencies".
import assert from "node:assert/strict";
import { OPTIONAL_BACKENDS } from "../demo/train.ts";
import { IN_CI as CI } from "./_ci.ts";

const ROOT = new URL("../", import.meta.url).pathname;
/** What the library and the default demos load; everything else is a tool. */
const ENTRY_POINTS = [
  "mod.ts",
  "src/tfjs/mod.ts",
  "src/interop/mod.ts",
  "src/cli/main.ts",
  "src/testing/mod.ts",
  "src/storage/opfs.ts",
  "demo/train.ts",
  "demo/core_demo.ts",
];
/**
 * Packages a first `deno task train` must never download: tools, optional backends, and the TF.js
 * umbrella package with the parts of it nothing here runs (WebGL, the converter, tfjs-data); the
 * library and the demo take tfjs-core, tfjs-layers and the cpu backend by name.
 */
const TOOLS =
  /^(puppeteer-core|@puppeteer\/|chromium-bidi|esbuild|@esbuild\/|@tensorflow\/tfjs-backend-(wasm|webgpu|webgl)\b|@tensorflow\/tfjs(-converter|-data)?(@|$))/;

interface Lock {
  specifiers: Record<string, string>;
  npm: Record<string, { dependencies?: string[] }>;
}

const readJson = async <T>(path: string): Promise<T> => JSON.parse(await Deno.readTextFile(`${ROOT}${path}`)) as T;
const imports = async (path: string) => (await readJson<{ imports: Record<string, string> }>(path)).imports;
/** `npm:name@1.2.3` → `name@1.2.3`. */
const pkg = (specifier: string) => specifier.replace(/^npm:\/?/, "");
/** A lock's or deno info's package id (`a@1.0.0_b@2.0.0`) → `a@1.0.0`. */
const nameVersion = (id: string) => id.replace(/^(@?[^@]+@[^_]+)(_.*)?$/, "$1");

/** Every npm package (`name@version`) the entry points load, with what they depend on. */
async function loaded(): Promise<Set<string>> {
  const seen = new Set<string>();
  for (const entry of ENTRY_POINTS) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", entry],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      modules: { kind: string; npmPackage?: string }[];
      npmPackages: Record<string, { dependencies: string[] }>;
    };
    const visit = (id: string) => {
      if (seen.has(id)) return;
      seen.add(id);
      for (const d of info.npmPackages[id]?.dependencies ?? []) visit(d);
    };
    for (const m of info.modules) if (m.kind === "npm" && m.npmPackage) visit(m.npmPackage);
  }
  return new Set([...seen].map(nameVersion));
}

Deno.test("deno.json imports only what the library and the default demos load", async () => {
  const used = await loaded();
  const extra = Object.entries(await imports("deno.json")).filter(([, target]) => !used.has(pkg(target)));
  assert.deepEqual(extra, [], "move these to tools.imports.json (or load them by full specifier where they are used)");
});

Deno.test("deno.lock holds only packages the library and the default demos load, and every import", async () => {
  const used = await loaded();
  const lock = await readJson<Lock>("deno.lock");
  const extra = Object.keys(lock.npm).map(nameVersion).filter((p) => !used.has(p));
  assert.deepEqual(extra, [], "deno.lock holds tools: regenerate it (docs/development.md, Dependencies)");
  // Each import resolved in the lock: a first run then needs no resolution (no metadata downloads).
  const missing = Object.values(await imports("deno.json")).filter((t) => !(t in lock.specifiers));
  assert.deepEqual(missing, [], "deno.lock lacks these imports: run `deno install`");
  assert.deepEqual(Object.keys(lock.npm).filter((p) => TOOLS.test(p)), []);
});

Deno.test("tools.imports.json maps every import of deno.json to the same package, and the tools", async () => {
  const lean = await imports("deno.json");
  const tools = await imports("tools.imports.json");
  for (const [name, target] of Object.entries(lean)) assert.equal(tools[name], target, `tools.imports.json ${name}`);
  for (const [backend, specifier] of Object.entries(OPTIONAL_BACKENDS)) {
    assert.equal(tools[`@tensorflow/tfjs-backend-${backend}`], specifier, `demo/train.ts's ${backend} backend`);
  }
  const lock = await readJson<Lock>("tools.lock");
  const missing = Object.values(tools).filter((t) => !(t in lock.specifiers));
  assert.deepEqual(
    missing,
    [],
    "tools.lock lacks these: run `deno install --import-map=tools.imports.json --lock=tools.lock`",
  );
});

/** Whether the npm registry answers (a fresh cache needs it); CI always has it. */
async function registryReachable(): Promise<boolean> {
  try {
    const res = await fetch("https://registry.npmjs.org/", { signal: AbortSignal.timeout(5000) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

const reachable = CI || await registryReachable().catch(() => false);
if (!reachable) console.log("dependencies_test: the npm registry is unreachable: the fresh-cache run is skipped");

Deno.test({
  name:
    "a fresh clone's first deno task train downloads only what it runs: no browser driver, bundler or optional backend",
  ignore: !reachable,
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "ckpt-fresh-deno-dir-" });
    const runs = await Deno.makeTempDir({ prefix: "ckpt-fresh-run-" });
    const before = await Deno.readTextFile(`${ROOT}deno.lock`);
    try {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["task", "train", "--steps", "2", "--every", "1", "--quiet", "--dir", runs],
        cwd: ROOT,
        env: { DENO_DIR: cache, NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, text);
      const downloads = [...text.matchAll(/Download https:\/\/registry\.npmjs\.org\/(\S+)/g)].map((m) =>
        decodeURIComponent(m[1]!).replace(/\/-\/.*$/, "")
      );
      assert.ok(downloads.length > 0, "a fresh cache downloads TF.js");
      assert.deepEqual(downloads.filter((d) => TOOLS.test(d)), []);
      const lock = await readJson<Lock>("deno.lock");
      const locked = new Set(Object.keys(lock.npm).map((id) => nameVersion(id).replace(/@[^@]+$/, "")));
      assert.deepEqual(downloads.filter((d) => !locked.has(d)), [], "every download is a package of deno.lock");
      assert.equal(await Deno.readTextFile(`${ROOT}deno.lock`), before, "the run leaves deno.lock as it was");
    } finally {
      await Deno.remove(cache, { recursive: true }).catch(() => {});
      await Deno.remove(runs, { recursive: true });
    }
  },
});
