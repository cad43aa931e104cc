/**
 * The npm build: `deno task build:npm` writes `dist/npm`, the package `@ckpt/ckpt` for Node.
 *
 * ```sh
 * deno task build:npm            # writes dist/npm/
 * deno task build:npm --out DIR  # elsewhere
 * cd dist/npm && npm pack        # the tarball a Node project installs
 * ```
 *
 * The TypeScript compiler (npm's `typescript`, pinned below, installed once into a cache
 * directory keyed by the tool versions) emits one ES module and one declaration file per source
 * file, so the package is the source tree, readable, with real types; `npm/_compile.mjs` runs it
 * under Node. `package.json` is generated from `deno.json`: the version, an `exports` entry (types
 * and module) for each of deno.json's entry points, the npm packages the sources import (as
 * dependencies), TF.js (as optional peers, used only by `./tfjs`), `engines` and the `ckpt` bin.
 * docs/npm.md says why this tooling.
 *
 * A build is skipped when nothing it reads changed: its key (the SHA-256 of every input file and
 * the tool versions) is kept in `<out>.key`.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT: string = fileURLToPath(new URL("../", import.meta.url));

/** The build's own npm tools, pinned: the compiler and the types it reads. */
export const TOOLS: Readonly<Record<string, string>> = Object.freeze({
  "typescript": "5.9.3",
  "@types/node": "20.19.25",
  "@tensorflow/tfjs-core": "4.22.0",
  "@tensorflow/tfjs-layers": "4.22.0",
  "aws4fetch": "1.0.20",
  "hash-wasm": "4.13.0",
});

/** The Node versions the package is tested on (`engines`). */
export const NODE_ENGINES = ">=20";

/** Packages the `./tfjs` entry expects the user's project to bring (optional peers). */
const PEERS: Readonly<Record<string, string>> = Object.freeze({
  "@tensorflow/tfjs-core": "^4.22.0",
  "@tensorflow/tfjs-layers": "^4.22.0",
});

/** Where cached things live: `$CKPT_CACHE`, else `$XDG_CACHE_HOME/ckpt`, else `~/.cache/ckpt`. */
export function cacheDir(): string {
  const env = (k: string) => Deno.env.get(k);
  return env("CKPT_CACHE") ?? join(env("XDG_CACHE_HOME") ?? join(env("HOME") ?? "/tmp", ".cache"), "ckpt");
}

async function run(cmd: string, args: string[], cwd: string): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed in ${cwd}:\n${text(out.stderr)}${text(out.stdout)}`);
  }
  return text(out.stdout);
}

/** Fills `dir` once (through a staging directory renamed into place, so a half-made one is never used); returns it. */
export async function once(dir: string, fill: (stage: string) => Promise<void>): Promise<string> {
  try {
    await Deno.stat(join(dir, ".done"));
    return dir;
  } catch { /* not there yet */ }
  await Deno.mkdir(dirname(dir), { recursive: true });
  const stage = await Deno.makeTempDir({ dir: dirname(dir), prefix: ".stage-" });
  try {
    await fill(stage);
    await Deno.writeTextFile(join(stage, ".done"), "");
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await Deno.rename(stage, dir).catch(async (e) => {
      // Another build got there first: its copy is as good.
      await Deno.stat(join(dir, ".done")).catch(() => Promise.reject(e));
    });
  } finally {
    await Deno.remove(stage, { recursive: true }).catch(() => {});
  }
  return dir;
}

/** The build's npm tools, installed once per set of versions; returns their directory. */
export async function buildTools(): Promise<string> {
  const key = createHash("sha256").update(JSON.stringify(TOOLS)).update(Deno.version.deno).digest("hex").slice(0, 16);
  return await once(join(cacheDir(), "npm-tools", key), async (stage) => {
    await Deno.writeTextFile(join(stage, "package.json"), JSON.stringify({ private: true }));
    const specs = Object.entries(TOOLS).map(([n, v]) => `${n}@${v}`);
    await run("npm", ["install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error", ...specs], stage);
    // Deno's own declarations (Deno.*, and the web APIs as Deno has them), for the sources' types.
    const types = await run(Deno.execPath(), ["types"], stage);
    await Deno.writeTextFile(
      join(stage, "deno.d.ts"),
      types.replace(/^\/\/\/ <reference lib="deno\.[^"]*" \/>$/gm, ""),
    );
  });
}

/** Every file the build reads, sorted: the sources, deno.json, README, LICENSE and this directory. */
async function inputs(): Promise<string[]> {
  const out = ["mod.ts", "deno.json", "README.md", "LICENSE"];
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(join(ROOT, dir))) {
      const p = `${dir}/${e.name}`;
      if (e.isDirectory) await walk(p);
      else if (e.isFile) out.push(p);
    }
  };
  await walk("src");
  await walk("npm");
  return out.sort();
}

/** The build's key: the SHA-256 of its inputs and tools. */
export async function buildKey(): Promise<string> {
  const h = createHash("sha256").update(JSON.stringify(TOOLS)).update(Deno.version.deno);
  for (const f of await inputs()) h.update(f).update("\0").update(await Deno.readFile(join(ROOT, f))).update("\0");
  return h.digest("hex");
}

/** deno.json's entry point to the package's file stem: `./src/tfjs/mod.ts` to `./src/tfjs/mod`. */
function stem(source: string): string {
  return source.replace(/\.ts$/, "");
}

/** The `npm:name@version` imports of the emitted sources, as package name to version. */
async function npmImports(): Promise<Record<string, string>> {
  const deps: Record<string, string> = {};
  for (const f of await inputs()) {
    if (!f.endsWith(".ts") || !(f.startsWith("src/") || f === "mod.ts")) continue;
    const text = await Deno.readTextFile(join(ROOT, f));
    for (const m of text.matchAll(/^(?:import|export)[^;]*?from "npm:(@[^/@"]+\/[^/@"]+|[^/@"]+)@([^/"]+)/gm)) {
      deps[m[1]!] = m[2]!;
    }
  }
  return deps;
}

/**
 * The modules the library starts as workers (`new URL("./x.ts", import.meta.url)`): no import
 * reaches them, so they are compiled as entries of their own.
 */
async function workerModules(): Promise<string[]> {
  const out = new Set<string>();
  for (const f of await inputs()) {
    if (!f.endsWith(".ts") || !f.startsWith("src/")) continue;
    const text = await Deno.readTextFile(join(ROOT, f));
    for (const m of text.matchAll(/new URL\("(\.\.?\/[^"]+\.ts)", import\.meta\.url\)/g)) {
      out.add(relative(ROOT, join(ROOT, dirname(f), m[1]!)));
    }
  }
  return [...out].sort();
}

/** The package.json of the build. */
export async function packageJson(): Promise<Record<string, unknown>> {
  const config = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json")));
  const exports: Record<string, unknown> = {};
  for (const [entry, source] of Object.entries(config.exports as Record<string, string>)) {
    exports[entry] = { types: `${stem(source)}.d.ts`, default: `${stem(source)}.js` };
  }
  exports["./package.json"] = "./package.json";
  return {
    name: config.name,
    version: config.version,
    description: "Streaming checkpoints for TensorFlow.js training: codecs, verified reads, crash-safe saves, a CLI",
    license: config.license,
    type: "module",
    exports,
    types: "./mod.d.ts",
    bin: { ckpt: "./bin/ckpt.js" },
    files: ["mod.js", "mod.d.ts", "src/", "bin/", "README.md", "LICENSE"],
    engines: { node: NODE_ENGINES },
    dependencies: await npmImports(),
    peerDependencies: PEERS,
    peerDependenciesMeta: Object.fromEntries(Object.keys(PEERS).map((p) => [p, { optional: true }])),
    keywords: ["checkpoint", "tensorflow", "tfjs", "safetensors", "streams"],
  };
}

/** The `ckpt` command for Node: the CLI's main with the process's arguments and exit code. */
const BIN = `#!/usr/bin/env node
import process from "node:process";
import { main } from "../src/cli/main.js";

process.exitCode = await main(process.argv.slice(2));
`;

/** Builds the package into `outDir` unless its key says it is current; returns whether it built. */
export async function buildNpm(outDir: string = join(ROOT, "dist", "npm")): Promise<boolean> {
  const key = await buildKey();
  const keyFile = `${outDir}.key`;
  const old = await Deno.readTextFile(keyFile).catch(() => "");
  if (old === key && await Deno.stat(join(outDir, "package.json")).then(() => true, () => false)) return false;
  const tools = await buildTools();
  const config = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json")));
  await Deno.remove(keyFile).catch(() => {});
  await Deno.remove(outDir, { recursive: true }).catch(() => {});
  await Deno.mkdir(join(outDir, "bin"), { recursive: true });
  const entries = [...Object.values(config.exports as Record<string, string>), ...await workerModules()];
  await run("node", [join(ROOT, "npm/_compile.mjs"), tools, outDir, ...entries], ROOT);
  await Deno.writeTextFile(join(outDir, "package.json"), JSON.stringify(await packageJson(), null, 2) + "\n");
  await Deno.writeTextFile(join(outDir, "bin", "ckpt.js"), BIN);
  await Deno.chmod(join(outDir, "bin", "ckpt.js"), 0o755);
  for (const f of ["README.md", "LICENSE"]) await Deno.copyFile(join(ROOT, f), join(outDir, f));
  await Deno.writeTextFile(keyFile, key);
  return true;
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--out");
  const outDir = i >= 0 ? Deno.args[i + 1]! : join(ROOT, "dist", "npm");
  const built = await buildNpm(outDir);
  console.log(`${built ? "built" : "up to date:"} ${relative(Deno.cwd(), outDir) || "."}`);
}
