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
import { loadCheckpoint } from "@ckpt/ckpt";
import { REPO, runChild, SCRATCH, startChild } from "./_util.mjs";

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

/** The steps `index.json` in `dir` lists as committed (none while there is no index). */
async function committedSteps(dir) {
  const text = await readFile(join(dir, "index.json"), "utf8").catch(() => "");
  return [...text.matchAll(/"step":\s*(\d+)/g)].map((m) => Number(m[1]));
}

/**
 * Runs `node block.mjs` in `dir` and kills it with SIGKILL as soon as runs/mine has a committed
 * checkpoint of step 20 to 90. Resolves with that step, or undefined when the loop ended first.
 * From step 20 on, Adam's running powers and `pow(beta, t + 1)` differ in the last bit (at step
 * 10 they happen to agree), so a resume that recomputes them ends elsewhere.
 */
function killAfterACommit(dir) {
  const { child, done } = startChild(process.execPath, ["block.mjs"], { cwd: dir, stderr: "inherit" });
  let killed;
  const poll = setInterval(async () => {
    const steps = await committedSteps(join(dir, "runs/mine"));
    const before = steps.filter((s) => s >= 20 && s < 100);
    if (killed === undefined && before.length && !steps.includes(100)) {
      killed = Math.max(...before);
      child.kill("SIGKILL");
    }
  }, 1);
  return done.then((r) => {
    clearInterval(poll);
    if (r.signal === "SIGKILL") return killed;
    if (r.code === 0) return undefined;
    throw new Error(`the loop exited with ${r.code ?? r.signal}: ${r.out.slice(-2000)}`);
  }, (e) => {
    clearInterval(poll);
    throw e;
  });
}

/** The tensors of the checkpoint of step 100 in `dir`'s runs/mine, by name, as bytes. */
async function finalTensors(dir) {
  const c = await loadCheckpoint(join(dir, "runs/mine/step-000000100.ckpt"));
  assert.equal(c.metadata.step, 100);
  return new Map(c.tensors.map((t) => [t.name, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)]));
}

test(
  "docs/npm.md's training loop, killed with SIGKILL after a commit and run again, ends bit for bit where it ends uninterrupted",
  {
    timeout: 300_000,
  },
  async () => {
    const [loop] = (await sectionBlocks("docs/npm.md", "## In a Node project")).filter((b) => b.lang === "js");
    const [whole, killed] = [await mkdtemp(join(SCRATCH, "loop-")), await mkdtemp(join(SCRATCH, "loop-killed-"))];
    try {
      for (const dir of [whole, killed]) {
        await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
        await writeFile(join(dir, "block.mjs"), loop.code);
      }
      const r = await run(process.execPath, ["block.mjs"], whole);
      assert.equal(r.code, 0, r.out);
      // The loop is fast: the kill may come too late, after the last commit; then try again.
      let at;
      for (let attempt = 0; at === undefined && attempt < 10; attempt++) {
        await rm(join(killed, "runs"), { recursive: true, force: true });
        at = await killAfterACommit(killed);
      }
      assert.ok(at !== undefined, "killed the loop between two commits in one of 10 tries");
      const again = await run(process.execPath, ["block.mjs"], killed);
      assert.equal(again.code, 0, again.out);
      const [want, got] = [await finalTensors(whole), await finalTensors(killed)];
      assert.deepEqual([...got.keys()], [...want.keys()]);
      for (const [name, bytes] of want) {
        assert.deepEqual(got.get(name), bytes, `${name} after a resume from step ${at}`);
      }
    } finally {
      await rm(whole, { recursive: true, force: true });
      await rm(killed, { recursive: true, force: true });
    }
  },
);
