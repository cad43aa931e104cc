// docs/npm.md's training loop, run verbatim under Deno (the package's names mapped to this
// checkout), killed with SIGKILL after a commit and run again: its last checkpoint must hold the
// same bytes as the one a run never interrupted writes. The same test under Node, against the
// packed package, is in tests/node/readme_test.mjs.
import assert from "node:assert/strict";
import { join } from "node:path";
import { loadCheckpoint } from "../../mod.ts";
import { parseMarkdown } from "./_markdown.ts";
import { packageImportMap } from "../_util.ts";

const ROOT = new URL("../../", import.meta.url);

/** The JavaScript of docs/npm.md's section "In a Node project": the training loop. */
async function docsLoop(): Promise<string> {
  const docs = parseMarkdown(await Deno.readTextFile(new URL("docs/npm.md", ROOT)));
  const blocks = parseMarkdown(docs.sections.get("In a Node project") ?? "").blocks.filter((b) => b.info === "js");
  assert.equal(blocks.length, 1, "docs/npm.md's Node section has one js block, the loop");
  return blocks[0]!.code;
}

/** A directory holding the loop as block.mjs and an import map giving it this checkout as @ckpt/ckpt. */
async function project(loop: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-npm-loop-" });
  await packageImportMap(dir);
  await Deno.writeTextFile(join(dir, "block.mjs"), loop);
  return dir;
}

function loopCommand(dir: string, stdout: "null" | "piped" = "null"): Deno.Command {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-lock",
      "--import-map=import_map.json",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "block.mjs",
    ],
    cwd: dir,
    stdout,
    stderr: "piped",
  });
}

async function runLoop(dir: string): Promise<void> {
  const out = await loopCommand(dir).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
}

/** The steps runs/mine/index.json lists as committed. */
async function committedSteps(dir: string): Promise<number[]> {
  const text = await Deno.readTextFile(join(dir, "runs/mine/index.json")).catch(() => "");
  return [...text.matchAll(/"step":\s*(\d+)/g)].map((m) => Number(m[1]));
}

/**
 * Runs the loop and kills it with SIGKILL once a checkpoint of step 20 to 90 is committed (from
 * step 20 on, Adam's running powers and `pow(beta, t + 1)` differ in the last bit). The step it
 * was killed after, or undefined when the loop ended first.
 */
async function killAfterACommit(dir: string): Promise<number | undefined> {
  const child = loopCommand(dir).spawn();
  let killed: number | undefined;
  let done = false;
  const status = child.status.finally(() => done = true);
  while (!done) {
    const steps = await committedSteps(dir);
    const before = steps.filter((s) => s >= 20 && s < 100);
    if (before.length && !steps.includes(100)) {
      killed = Math.max(...before);
      child.kill("SIGKILL");
      break;
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  const { code, signal } = await status;
  if (signal === "SIGKILL") return killed;
  assert.equal(code, 0, "the loop, when not killed, ends well");
  return undefined;
}

async function finalTensors(dir: string): Promise<Map<string, Uint8Array>> {
  const c = await loadCheckpoint(join(dir, "runs/mine/step-000000100.ckpt"));
  assert.equal(c.metadata.step, 100);
  return new Map(c.tensors.map((t) => [t.name, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)]));
}

Deno.test("docs/npm.md's training loop under Deno, killed with SIGKILL after a commit and run again, ends bit for bit where it ends uninterrupted", async () => {
  const loop = await docsLoop();
  const [whole, killed] = [await project(loop), await project(loop)];
  try {
    await runLoop(whole);
    let at: number | undefined;
    for (let attempt = 0; at === undefined && attempt < 10; attempt++) {
      await Deno.remove(join(killed, "runs"), { recursive: true }).catch(() => {});
      at = await killAfterACommit(killed);
    }
    assert.ok(at !== undefined, "killed the loop between two commits in one of 10 tries");
    await runLoop(killed);
    const [want, got] = [await finalTensors(whole), await finalTensors(killed)];
    assert.deepEqual([...got.keys()], [...want.keys()]);
    for (const [name, bytes] of want) assert.deepEqual(got.get(name), bytes, `${name} after a resume from step ${at}`);
  } finally {
    await Deno.remove(whole, { recursive: true });
    await Deno.remove(killed, { recursive: true });
  }
});
