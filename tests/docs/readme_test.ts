// The README is a landing page: short, every link in it (and in docs/) leads somewhere that
// exists, and every example in it runs. The `ts` blocks run under `deno test --doc`; the
// `ts ignore` blocks are either run verbatim by the test named for them below, or type-checked
// here against declarations of the names they take from the reader's own program.
import assert from "node:assert/strict";
import { dirname, join, relative } from "node:path";
import { parseMarkdown } from "./_markdown.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
/** Where the README may grow: others add short sections; depth goes to docs/. */
const MAX_README_LINES = 400;

const read = (path: string) => Deno.readTextFile(join(ROOT, path));

async function markdownFiles(): Promise<string[]> {
  const files = ["README.md"];
  for await (const entry of Deno.readDir(join(ROOT, "docs"))) {
    if (entry.isFile && entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  return files.sort();
}

/** Builds the API reference as `deno task doc` does, into a temporary folder. */
async function buildApiReference(): Promise<string> {
  const tasks = JSON.parse(await read("deno.json")).tasks as Record<string, string>;
  const out = await Deno.makeTempDir({ prefix: "ckpt-api-" });
  const command = tasks.doc!.replace("--output=docs/api", `--output=${out}`);
  assert.notEqual(command, tasks.doc, "the doc task writes into docs/api");
  const run = await new Deno.Command("sh", {
    args: ["-c", command.replace(/^deno /, `"${Deno.execPath()}" `)],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(run.code, 0, new TextDecoder().decode(run.stderr));
  return out;
}

Deno.test("the README stays a landing page: under 400 lines", async () => {
  const lines = (await read("README.md")).trimEnd().split("\n").length;
  assert.ok(lines < MAX_README_LINES, `README.md has ${lines} lines; move depth into docs/`);
});

Deno.test("every relative link in the README and docs/ resolves, anchors included", async () => {
  const api = await buildApiReference();
  const broken: string[] = [];
  const parsed = new Map<string, ReturnType<typeof parseMarkdown>>();
  const parse = async (path: string) => {
    if (!parsed.has(path)) parsed.set(path, parseMarkdown(await read(path)));
    return parsed.get(path)!;
  };
  try {
    for (const file of await markdownFiles()) {
      for (const { target, line } of (await parse(file)).links) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        const [pathPart, anchor] = target.split("#") as [string, string | undefined];
        const path = pathPart === "" ? file : relative(ROOT, join(ROOT, dirname(file), decodeURI(pathPart)));
        const where = `${file}:${line}: ${target}`;
        if (path.startsWith("docs/api/")) {
          // Built, not committed: `deno task doc` writes it; check what it writes.
          const built = join(api, path.slice("docs/api/".length));
          if (!(await exists(built))) broken.push(`${where} (not in what \`deno task doc\` builds)`);
          continue;
        }
        if (!(await exists(join(ROOT, path)))) {
          broken.push(`${where} (no file ${path})`);
          continue;
        }
        if (anchor !== undefined && path.endsWith(".md") && !(await parse(path)).anchors.has(anchor)) {
          broken.push(`${where} (no heading #${anchor} in ${path})`);
        }
      }
    }
  } finally {
    await Deno.remove(api, { recursive: true });
  }
  assert.deepEqual(broken, []);
});

/** The README's `ts ignore` blocks, each with the test that runs it verbatim or what it needs declared. */
const IGNORED_BLOCKS: { section: string; runBy?: string; declare?: string }[] = [
  {
    section: "Train, kill, resume: `deno task train`",
    declare: `import type * as tf from "@tensorflow/tfjs";
declare const model: tf.LayersModel, optimizer: tf.Optimizer, step: number, loss: number;`,
  },
  {
    section: "Save, load, verify",
    declare: `import type { Checkpoint } from "./mod.ts";
import { saveCheckpoint } from "./mod.ts";
declare const ckpt: Checkpoint;`,
  },
  {
    section: "Checkpoint directories: `CheckpointManager`",
    declare: `import type { TensorInput } from "./mod.ts";
declare const step: number, val_loss: number, tensors: TensorInput[];`,
  },
  {
    section: "Save in the background: `BackgroundWriter`",
    declare: `import type { TensorInput } from "./mod.ts";
declare const staging: unknown[], tensors: TensorInput[];`,
  },
  { section: "Object storage: `s3://` and `https://`", runBy: "tests/storage/readme_s3_test.ts" },
  {
    section: "Interop: safetensors and TF.js",
    declare: `import type * as tf from "@tensorflow/tfjs";
import type { Checkpoint } from "./mod.ts";
declare const ckpt: Checkpoint, model: tf.LayersModel, step: number;`,
  },
  { section: "In your tests: `@ckpt/ckpt/testing`", runBy: "tests/testing/readme_test.ts" },
];

Deno.test("every README example that deno test --doc skips is run by a named test or type-checks", async () => {
  const readme = parseMarkdown(await read("README.md"));
  const ignored = [...readme.sections].flatMap(([section, text]) =>
    parseMarkdown(text).blocks.filter((b) => b.info === "ts ignore").map((b) => ({ section, code: b.code }))
  );
  assert.deepEqual(
    ignored.map((b) => b.section),
    IGNORED_BLOCKS.map((b) => b.section),
    "each `ts ignore` block of the README is listed in IGNORED_BLOCKS, in order",
  );
  const dir = await Deno.makeTempDir({ dir: ROOT, prefix: ".readme-check-" });
  try {
    const files: string[] = [];
    for (const [i, { code }] of ignored.entries()) {
      const { runBy, declare } = IGNORED_BLOCKS[i]!;
      if (runBy) {
        assert.ok(await exists(join(ROOT, runBy)), `${runBy} exists`);
        assert.match(await read(runBy), /README/, `${runBy} reads the README`);
        continue;
      }
      // The block's own imports first; then the declarations; a module of its own, from the root.
      const imports = code.split("\n").filter((l) => l.startsWith("import "));
      const rest = code.split("\n").filter((l) => !l.startsWith("import "));
      const declared = declare!.split("\n").filter((l) => !imports.includes(l));
      const file = join(dir, `block_${i}.ts`);
      const source = [...imports, ...declared, ...rest, "export {};"].join("\n").replaceAll('"./', '"../');
      await Deno.writeTextFile(file, source);
      files.push(file);
    }
    // The reader's program has TF.js beside ckpt (the umbrella package, which the tools' import
    // map has and deno.json, holding only what the library loads, does not).
    const check = await new Deno.Command(Deno.execPath(), {
      args: ["check", "--quiet", "--import-map=tools.imports.json", "--lock=tools.lock", ...files],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(check.code, 0, new TextDecoder().decode(check.stderr));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}
