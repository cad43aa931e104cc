// docs/api.md, where the README's "API reference" link leads: a page that works in a fresh clone
// (the HTML reference in docs/api/ is built, not committed). Its table names exactly the entry
// points the doc task documents, each under the import deno.json exports it as, and its commands
// print the reference with nothing built first.
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);
const read = (path: string) => Deno.readTextFile(new URL(path, ROOT));

Deno.test("the README's API reference link leads to a committed page", async () => {
  const readme = await read("README.md");
  const link = /\[API reference\]\(([^)]+)\)/.exec(readme)?.[1];
  assert.equal(link, "docs/api.md");
  assert.ok((await Deno.stat(new URL(link, ROOT))).isFile);
  const ignored = await read(".gitignore");
  assert.match(ignored, /^\/?docs\/api\/?$/m, "docs/api/ stays out of git, so docs/api.md must stand alone");
});

Deno.test("docs/api.md names every entry point of the doc task under its import, and only those", async () => {
  const config = JSON.parse(await read("deno.json")) as { exports: Record<string, string>; tasks: { doc: string } };
  const documented = config.tasks.doc.split(" ").filter((a) => a.endsWith(".ts"));
  const page = await read("docs/api.md");
  const rows = [...page.matchAll(/^\| `(@ckpt\/ckpt[^`]*)` +\| `([^`]+)` +\|/gm)].map((m) => [m[1]!, m[2]!] as const);
  assert.deepEqual(rows.map(([, file]) => file).sort(), [...documented].sort());
  for (const [name, file] of rows) {
    const subpath = name.replace("@ckpt/ckpt", ".");
    assert.equal(config.exports[subpath], `./${file}`, `deno.json exports ${subpath} as ./${file}`);
  }
});

Deno.test("docs/api.md's commands print the reference in a checkout with nothing built", async () => {
  const page = await read("docs/api.md");
  const commands = page.match(/```sh\n([^]*?)```/)![1]!.split("\n").map((l) => l.replace(/#.*$/, "").trim())
    .filter(Boolean);
  assert.equal(commands.length, 2);
  for (const command of commands) {
    const [deno, ...args] = command.split(/\s+/);
    assert.equal(deno, "deno");
    const out = await new Deno.Command(Deno.execPath(), { args, cwd: ROOT, stdout: "piped", stderr: "piped" })
      .output();
    // deno doc colours its output where NO_COLOR is unset (a developer's terminal, not CI): read it plain.
    // deno-lint-ignore no-control-regex -- the colour codes
    const text = new TextDecoder().decode(out.stdout).replace(/\x1b\[[0-9;]*m/g, "");
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.match(text, /class CheckpointManager/, command);
  }
});
