/**
 * The web build: ES modules for browsers (and Node 20), made with `deno bundle --platform browser`.
 *
 * ```sh
 * deno task build:web            # writes dist/web/
 * deno task build:web --out DIR  # elsewhere
 * ```
 *
 * Entries: `ckpt.js` (everything `mod.ts` exports), `tfjs.js` (the TF.js adapter; it imports
 * `@tensorflow/tfjs-core` by that bare name, so the page's import map or bundler supplies the one
 * TF.js copy the model uses), `opfs.js` (the Origin Private File System store), `interop.js`
 * (TF.js artifacts on `opfs:///` or any store, `ckptHandler`, safetensors) and
 * `ckpt-worker.js` (the worker background saves run in, started by the library itself). Shared
 * code lands in chunks beside them. The SHA-256 is chosen at run time: `node:crypto` where there is
 * one (Node), WebAssembly (hash-wasm) in browsers, loaded only there. esbuild then lowers the
 * output to ES2022 (Node 20 has no `using`) and minifies it. File paths are Deno's alone:
 * the build replaces `node:path` and `node:url` with modules whose every use is a TypeError.
 *
 * @module
 */
import { join } from "node:path";
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT: string = fileURLToPath(new URL("../", import.meta.url));

/** The library's browser entries: output name to source file. */
export const LIBRARY_ENTRIES: Readonly<Record<string, string>> = Object.freeze({
  ckpt: "mod.ts",
  tfjs: "src/tfjs/mod.ts",
  opfs: "src/storage/opfs.ts",
  interop: "src/interop/mod.ts",
});

/**
 * The BackgroundWriter's worker (background saves, the TF.js adapter's `CheckpointWriter`): built
 * beside every set of entries as `ckpt-worker.js`, where the built library looks for it.
 */
export const WORKER_ENTRY = "ckpt-worker";

/** Options for {@linkcode buildWeb}. */
export interface BuildOptions {
  /** Output name (without `.js`) to source file, relative to the repository root. @default {LIBRARY_ENTRIES} */
  entries?: Readonly<Record<string, string>>;
  /** Bare imports left for the page to resolve. @default {["@tensorflow/tfjs-core"]} */
  external?: readonly string[];
  /** Minify. @default {true} */
  minify?: boolean;
}

/** What {@linkcode buildWeb} wrote: each file's path and size, raw and gzipped. */
export interface BuiltFile {
  path: string;
  bytes: number;
  gzipBytes: number;
}

async function gzipSize(bytes: Uint8Array): Promise<number> {
  const s = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new CompressionStream("gzip"));
  return (await new Response(s).arrayBuffer()).byteLength;
}

/** The entries with the worker's: output name to source file. */
function withWorker(entries: Readonly<Record<string, string>>): Record<string, string> {
  return { ...entries, [WORKER_ENTRY]: "src/background/_worker.ts" };
}

/**
 * The build's import map: the tools' (deno.json's imports and the packages only builds and tests
 * load), with `node:path` and `node:url` replaced, and the worker's URL module swapped for the
 * build's own.
 */
async function webImportMap(): Promise<{ imports: Record<string, string> }> {
  const config = JSON.parse(await Deno.readTextFile(join(ROOT, "tools.imports.json")));
  return {
    imports: {
      ...config.imports,
      "node:path": new URL("./_node_path.ts", import.meta.url).href,
      "node:url": new URL("./_node_url.ts", import.meta.url).href,
      // The BackgroundWriter's worker, built as its own entry: see src/background/_worker_url.ts.
      [new URL("src/background/_worker_url.ts", `file://${ROOT}`).href]: new URL("./_worker_url.ts", import.meta.url)
        .href,
    },
  };
}

/**
 * The repository's source files the browser build of `entries` includes (the worker's too), paths
 * relative to the root, sorted: the module graph `deno info` walks from them with the build's
 * import map, static and dynamic imports alike.
 */
export async function webSources(entries: Readonly<Record<string, string>> = LIBRARY_ENTRIES): Promise<string[]> {
  const stage = await Deno.makeTempDir({ prefix: "ckpt-web-sources-" });
  try {
    const mapPath = join(stage, "import_map.json");
    await Deno.writeTextFile(mapPath, JSON.stringify(await webImportMap()));
    const files = new Set<string>();
    for (const source of Object.values(withWorker(entries))) {
      const args = ["info", "--json", `--import-map=${mapPath}`, `--lock=${join(ROOT, "tools.lock")}`, source];
      const out = await new Deno.Command(Deno.execPath(), { args, cwd: ROOT, stdout: "piped", stderr: "piped" })
        .output();
      if (!out.success) throw new Error(`deno info ${source} failed:\n${new TextDecoder().decode(out.stderr)}`);
      const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as { modules: { specifier: string }[] };
      for (const { specifier } of graph.modules) {
        if (!specifier.startsWith(`file://${ROOT}`)) continue;
        files.add(fileURLToPath(specifier).slice(ROOT.length));
      }
    }
    return [...files].sort();
  } finally {
    await Deno.remove(stage, { recursive: true }).catch(() => {});
  }
}

/** Builds the entries into `outDir` (emptied first) and lists what it wrote. */
export async function buildWeb(outDir: string, options: BuildOptions = {}): Promise<BuiltFile[]> {
  const entries = withWorker(options.entries ?? LIBRARY_ENTRIES);
  const external = options.external ?? ["@tensorflow/tfjs-core"];
  const importMap = await webImportMap();
  await Deno.remove(outDir, { recursive: true }).catch(() => {});
  await Deno.mkdir(outDir, { recursive: true });
  const stage = await Deno.makeTempDir({ prefix: "ckpt-web-build-" });
  try {
    const mapPath = join(stage, "import_map.json");
    await Deno.writeTextFile(mapPath, JSON.stringify(importMap));
    // deno bundle names each output after its entry file: give each entry the name it should have.
    const inputs: string[] = [];
    for (const [name, source] of Object.entries(entries)) {
      const stub = join(stage, `${name}.ts`);
      const target = new URL(source, `file://${ROOT}`).href;
      await Deno.writeTextFile(stub, `export * from ${JSON.stringify(target)};\n`);
      inputs.push(stub);
    }
    const args = [
      "bundle",
      "--quiet",
      "--platform=browser",
      "--format=esm",
      "--code-splitting",
      `--import-map=${mapPath}`,
      `--lock=${join(ROOT, "tools.lock")}`,
      `--outdir=${outDir}`,
      ...external.map((e) => `--external=${e}`),
      ...inputs,
    ];
    const out = await new Deno.Command(Deno.execPath(), { args, cwd: ROOT, stdout: "piped", stderr: "piped" }).output();
    if (!out.success) {
      throw new Error(`deno bundle failed:\n${new TextDecoder().decode(out.stderr)}`);
    }
  } finally {
    await Deno.remove(stage, { recursive: true }).catch(() => {});
  }
  const built: BuiltFile[] = [];
  for await (const e of Deno.readDir(outDir)) {
    if (!e.isFile || !e.name.endsWith(".js")) continue;
    const path = join(outDir, e.name);
    const lowered = await esbuild.transform(await Deno.readTextFile(path), {
      target: "es2022",
      format: "esm",
      minify: options.minify ?? true,
    });
    const bytes = new TextEncoder().encode(lowered.code);
    await Deno.writeFile(path, bytes);
    // A static import of a Node built-in would fail to load in every browser: refuse the build.
    const text = new TextDecoder().decode(bytes);
    const node = text.match(/(?:^|[;}\n])\s*import[^(;]*?from\s*["']node:[a-z_/]+["']/m);
    if (node) throw new Error(`Web build ${e.name} imports a Node built-in statically: ${node[0].trim()}`);
    built.push({ path, bytes: bytes.byteLength, gzipBytes: await gzipSize(bytes) });
  }
  await esbuild.stop();
  return built.sort((a, b) => a.path.localeCompare(b.path));
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--out");
  const outDir = i >= 0 ? Deno.args[i + 1]! : join(ROOT, "dist", "web");
  const built = await buildWeb(outDir);
  let raw = 0;
  let gz = 0;
  for (const f of built) {
    raw += f.bytes;
    gz += f.gzipBytes;
    console.log(`${f.path}  ${(f.bytes / 1024).toFixed(1)} KiB  (${(f.gzipBytes / 1024).toFixed(1)} KiB gzipped)`);
  }
  console.log(`total ${(raw / 1024).toFixed(1)} KiB minified, ${(gz / 1024).toFixed(1)} KiB gzipped`);
}
