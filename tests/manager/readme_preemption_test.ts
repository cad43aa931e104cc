// docs/manager.md's preemption example (what the README's "Preemption" section points to), run
// verbatim but for its import of "@ckpt/ckpt" (this repository's mod.ts), and stopped with a real
// SIGTERM, twice: each run saves the step it is at, exits 143 with its lock released, and the
// second resumes where the first stopped.
import assert from "node:assert/strict";
import { CheckpointManager } from "../../src/manager/mod.ts";

const ROOT = new URL("../../", import.meta.url);

const exists = (path: string) => Deno.stat(path).then(() => true, () => false);

/** Waits until `condition()` holds, checking every 20 ms, for at most a minute. */
async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  for (const deadline = Date.now() + 60_000; !(await condition());) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

Deno.test("the documented preemption example runs verbatim: SIGTERM saves the step it is at, exits 143, and resumes", async () => {
  const readme = await Deno.readTextFile(new URL("README.md", ROOT));
  assert.match(readme, /### Preemption[^]*docs\/manager\.md#preemption-save-on-sigterm/, "the README points here");
  const docs = await Deno.readTextFile(new URL("docs/manager.md", ROOT));
  const section = docs.slice(docs.indexOf("## Preemption"));
  const code = section.match(/```ts(?: ignore)?\n([\s\S]*?)```/)?.[1]?.replace('"@ckpt/ckpt"', '"./mod.ts"');
  assert.ok(code, "the section has a ts block");
  const file = new URL(`.readme-preempt-${crypto.randomUUID()}.ts`, ROOT);
  const cwd = await Deno.makeTempDir({ prefix: "ckpt_readme_preempt_" });
  await Deno.writeTextFile(file, code);
  try {
    const latest = async () => {
      const m = await CheckpointManager.open(`${cwd}/runs/preempt`, { readOnly: true });
      const step = (await m.latest())?.metadata.step;
      await m.close();
      return step;
    };
    let before = 0;
    for (const run of [1, 2]) {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "--allow-read", "--allow-write", file.pathname],
        cwd,
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      // The example listens for signals before it opens the manager, and the manager's lock file
      // appears as it opens: from then on a SIGTERM must be saved, however slow the machine.
      await until(() => exists(`${cwd}/runs/preempt/ckpt.lock`), `run ${run}'s manager to open`);
      child.kill("SIGTERM");
      const out = await child.output();
      assert.equal(out.code, 143, `run ${run}: ${new TextDecoder().decode(out.stderr)}`);
      const step = await latest();
      assert.ok(step !== undefined && step > before, `run ${run} saved step ${step} (after ${before})`);
      assert.ok(!(await Array.fromAsync(Deno.readDir(`${cwd}/runs/preempt`))).some((e) => e.name === "ckpt.lock"));
      before = step;
    }
  } finally {
    await Deno.remove(file);
    await Deno.remove(cwd, { recursive: true });
  }
});
