// The README's "In your tests" example, run verbatim with `deno test` from inside the repository
// (where `@ckpt/ckpt` resolves to this package): first with `-- --update`, then without.
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);

Deno.test("the README's example test file passes verbatim: --update writes the golden file, then the test passes", async () => {
  const readme = await Deno.readTextFile(new URL("README.md", ROOT));
  const section = readme.slice(readme.indexOf("## In your tests"));
  // `ts ignore`: `deno test --doc` must not run it as a doc test (it needs its golden file first).
  const code = section.match(/```ts ignore\n(\/\/ model_test\.ts[\s\S]*?)```/)?.[1];
  assert.ok(code, "the section has a ts block");
  const dir = await Deno.makeTempDir({ dir: new URL("tests/testing", ROOT).pathname, prefix: ".readme-" });
  try {
    await Deno.writeTextFile(`${dir}/model_test.ts`, code);
    const run = async (...extra: string[]) => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["test", "-A", `${dir}/model_test.ts`, ...extra],
        cwd: ROOT.pathname,
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      return { code: out.code, text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr) };
    };
    const first = await run();
    assert.equal(first.code, 1, "without a golden file the snapshot test fails");
    assert.match(first.text, /Missing golden checkpoint .* -- --update` to create it/);
    const update = await run("--", "--update");
    assert.equal(update.code, 0, update.text);
    const again = await run();
    assert.equal(again.code, 0, again.text);
    assert.match(again.text, /ok \| 2 passed \| 0 failed/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
