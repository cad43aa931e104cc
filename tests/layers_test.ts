// The layers of src/, bottom up: each module imports only from its own layer and those below it
// (/work/shared/STYLE.md, "Layers and storage"). A lower layer that needs something an upper one
// knows (a codec) has it registered, not imported: src/format/codec_registry.ts.
import assert from "node:assert/strict";

const SRC = new URL("../src/", import.meta.url);
const ROOT = new URL("../", import.meta.url);

/** Bottom up. `mod.ts` (the root barrel) sits just below the CLI, which imports it. */
const LAYERS = [
  "runtime",
  "format",
  "storage",
  "io",
  "shard",
  "background",
  "manager",
  "compare",
  "interop",
  "testing",
  "tfjs",
  "mod.ts",
  "cli",
] as const;

/** Every relative module specifier a source file names in code (comments, and so doc examples, left out). */
export function importsOf(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\b[^;"'`]*?\bfrom\s*"([^"]+)"/g, // import ... from "x", export ... from "x"
    /\bimport\s*"([^"]+)"/g, // import "x" (for its effect)
    /\bimport\(\s*"([^"]+)"/g, // import("x")
    /\bnew URL\(\s*"([^"]+)",\s*import\.meta\.url/g, // a worker's module
  ];
  for (const p of patterns) for (const m of code.matchAll(p)) if (m[1]!.startsWith(".")) found.push(m[1]!);
  return found;
}

/** The layer of a file under the repository root, or undefined outside src/ and mod.ts. */
function layerOf(url: URL): string | undefined {
  const path = url.pathname.slice(ROOT.pathname.length);
  if (path === "mod.ts") return "mod.ts";
  const m = /^src\/([^/]+)\//.exec(path);
  return m?.[1];
}

async function* sources(dir: URL): AsyncGenerator<URL> {
  for await (const e of Deno.readDir(dir)) {
    const url = new URL(e.name + (e.isDirectory ? "/" : ""), dir);
    if (e.isDirectory) yield* sources(url);
    else if (/\.(ts|js|mjs)$/.test(e.name)) yield url;
  }
}

Deno.test("importsOf finds the imports of code and none in comments", () => {
  const source = [
    `import { a } from "../format/a.ts";`,
    `import type {\n  B,\n} from "./b.ts";`,
    `export { c } from "../io/c.ts";`,
    `import "../interop/read_codecs.ts";`,
    `const w = new URL("../runtime/_w.ts", import.meta.url);`,
    `const m = await import("../storage/s3.ts");`,
    `/** @example\n * import { x } from "../../mod.ts";\n */`,
    `// import { y } from "../cli/main.ts";`,
    `import { z } from "node:fs";`,
  ].join("\n");
  assert.deepEqual(importsOf(source).sort(), [
    "../format/a.ts",
    "../interop/read_codecs.ts",
    "../io/c.ts",
    "../runtime/_w.ts",
    "../storage/s3.ts",
    "./b.ts",
  ]);
});

Deno.test("no module of src/ imports from a layer above its own", async () => {
  const upward: string[] = [];
  const seen = new Set<string>();
  for await (const file of sources(SRC)) {
    const from = layerOf(file)!;
    seen.add(from);
    const rank = LAYERS.indexOf(from as typeof LAYERS[number]);
    assert.ok(rank >= 0, `src/${from} is in no layer: add it to LAYERS in tests/layers_test.ts`);
    for (const spec of importsOf(await Deno.readTextFile(file))) {
      const to = layerOf(new URL(spec, file));
      if (to === undefined) continue;
      if (LAYERS.indexOf(to as typeof LAYERS[number]) > rank) {
        upward.push(`${file.pathname.slice(ROOT.pathname.length)} (${from}) imports ${spec} (${to})`);
      }
    }
  }
  assert.deepEqual(upward, []);
  // The check saw the layers it names (a moved folder must not make it pass by matching nothing).
  for (const layer of LAYERS) if (layer !== "mod.ts") assert.ok(seen.has(layer), `no module in src/${layer}`);
});

Deno.test("the format layer recognises safetensors only once the interop layer registered it", async () => {
  // A process that loads the format layer alone: safetensors bytes are not recognised; then the
  // interop layer's module registers it, and the same bytes decode.
  const script = `
    import { decodeCheckpoint } from "${new URL("src/format/decode.ts", ROOT).href}";
    import { encodeCheckpoint } from "${new URL("src/format/encode.ts", ROOT).href}";
    import { safetensorsCodec } from "${new URL("src/interop/safetensors.ts", ROOT).href}";
    const bytes = new Uint8Array(await new Response(encodeCheckpoint(
      { metadata: { step: 1 }, tensors: [{ name: "w", dtype: "uint8", shape: [2], data: new Uint8Array([1, 2]) }] },
      { codec: safetensorsCodec },
    )).arrayBuffer());
    const kinds = async () => { const out = []; for await (const r of decodeCheckpoint(bytes)) out.push(r.type); return out; };
    try { await kinds(); console.log("recognised"); } catch (e) { console.log(e.constructor.name + ": " + e.message); }
    await import("${new URL("src/interop/read_codecs.ts", ROOT).href}");
    console.log((await kinds()).join(","));
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const [before, after] = new TextDecoder().decode(out.stdout).trim().split("\n");
  assert.match(
    before!,
    /^SyntaxError: Cannot decode checkpoint: unrecognised format at offset 0 .*; tried ckpt binary, ckpt JSON, gzip$/,
  );
  assert.equal(after, "metadata,tensor");
});

Deno.test("every entry point that reads checkpoints registers safetensors", async () => {
  for (const entry of ["mod.ts", "src/interop/mod.ts", "src/testing/mod.ts", "src/cli/main.ts"]) {
    const script = `
      await import("${new URL(entry, ROOT).href}");
      const { readCodecs } = await import("${new URL("src/format/codec_registry.ts", ROOT).href}");
      console.log(readCodecs().map((c) => c.name).join(","));
    `;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-check", script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, `${entry}: ${new TextDecoder().decode(out.stderr)}`);
    assert.equal(new TextDecoder().decode(out.stdout).trim(), "binary,json,safetensors", entry);
  }
});
