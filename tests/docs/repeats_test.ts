// Text said twice: the README's sentences each say something new, and docs/manager.md keeps one
// introductory example rather than a copy of a README block that links back to the page itself.
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);
const read = (path: string) => Deno.readTextFile(new URL(path, ROOT));

/** The prose paragraphs of a Markdown text (code blocks, tables and lists left out), whitespace folded. */
function paragraphs(markdown: string): string[] {
  const prose = markdown.replace(/^```[^]*?^```$/gm, "");
  return prose.split(/\n\s*\n/).map((p) => p.replace(/\s+/g, " ").trim())
    .filter((p) => p.length > 0 && !/^[#|\-*]/.test(p));
}

Deno.test("no sentence of the README's prose begins like another", async () => {
  const seen = new Map<string, string>();
  for (const p of paragraphs(await read("README.md"))) {
    for (const sentence of p.split(/(?<=[.:!?)])\s+(?=[A-Z`])/).filter((s) => s.length >= 50)) {
      const start = sentence.slice(0, 50);
      assert.ok(!seen.has(start), `said twice:\n${seen.get(start)}\n${sentence}`);
      seen.set(start, sentence);
    }
  }
});

Deno.test("docs/manager.md opens the manager in one example and does not link to itself", async () => {
  const page = await read("docs/manager.md");
  const opens = [...page.matchAll(/^```ts[^\n]*\n([^]*?)^```$/gm)].filter((m) =>
    m[1]!.includes('CheckpointManager.open("runs/mlp"')
  );
  assert.equal(opens.length, 1, "one introductory example");
  assert.doesNotMatch(page, /\]\(manager\.md\)/);
});
