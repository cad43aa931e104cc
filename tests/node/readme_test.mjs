// The README's "In Node" example and docs/npm.md's "In a Node project" section, run verbatim under
// Node in a project that installed the package (the install block itself is what
// tests/node/harness.ts does before this runs: build, pack, npm install of the tarball beside
// @tensorflow/tfjs@4.22.0). Each `js` block runs as a module, in order, in one directory (the
// training loop twice: the second run resumes), then the CLI block runs there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { REPO, runChild, SCRATCH } from "./_util.mjs";

/** The fenced blocks of a markdown file's section (from its heading to the next of the same level). */
async function sectionBlocks(file, heading) {
  const text = await readFile(join(REPO, file), "utf8");
  const start = text.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `${file} has a section ${heading}`);
  const end = text.indexOf("\n## ", start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1], code: m[2] }));
}

function run(file, args, cwd) {
  return runChild(file, args, { cwd, env: { ...process.env, NO_COLOR: "1" } });
}

test("the README's In Node example and docs/npm.md's usage run verbatim under Node", { timeout: 180_000 }, async () => {
  const readme = (await sectionBlocks("README.md", "## In Node")).filter((b) => b.lang === "js");
  const docs = await sectionBlocks("docs/npm.md", "## In a Node project");
  const js = [...readme, ...docs.filter((b) => b.lang === "js")];
  const sh = docs.filter((b) => b.lang === "sh");
  assert.equal(js.length, 2, "the README's save/load example and the docs' training loop");
  assert.equal(sh.length, 2, "the install block and the CLI block");
  const dir = await mkdtemp(join(SCRATCH, "readme-"));
  try {
    await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
    for (const [i, { code }] of js.entries()) {
      await writeFile(join(dir, `block${i}.mjs`), code);
      const r = await run(process.execPath, [`block${i}.mjs`], dir);
      assert.equal(r.code, 0, `block ${i}:\n${r.out}`);
      if (i === 0) assert.match(r.stdout, /^Float32Array\(2\) \[ 1, 2 \]/);
    }
    // Run the loop again: it resumes from step 100 and has nothing left to do.
    const again = await run(process.execPath, ["block1.mjs"], dir);
    assert.equal(again.code, 0, again.out);
    const cli = sh[1].code.trim();
    assert.match(cli, /^npx ckpt /);
    const r = await run("sh", ["-c", cli], dir);
    assert.equal(r.code, 0, r.out);
    assert.match(r.stdout, /^w\s/m);
    assert.match(r.stdout, /^ok /m);
    assert.match(r.stdout, /\b100\b/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
