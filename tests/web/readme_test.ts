// The browser snippets of the README ("In the browser") and of docs/browser.md ("Save in the
// background in a page"), each run verbatim in Chromium, Firefox and WebKit against the web build
// (a page per snippet): the manager on OPFS, then a background save whose file the library's Web
// Worker writes.
import assert from "node:assert/strict";
import { join } from "node:path";
import { buildWeb, ROOT } from "../../web/build.ts";
import { type Served, serveStatic } from "../../web/serve.ts";
import { parseMarkdown } from "../docs/_markdown.ts";
import { noteSkip, runs, SELECTED } from "./_engines.ts";
import { connectBrowser } from "./_page.ts";

/** Put before each snippet: what it logs and what goes wrong, kept for the test to read. */
const RECORDER = `<script>
window.logged = []; window.errors = [];
const log = console.log.bind(console);
console.log = (...a) => { window.logged.push(a.join(" ")); log(...a); };
addEventListener("error", (e) => window.errors.push(String(e.message)));
addEventListener("unhandledrejection", (e) => window.errors.push(String(e.reason)));
</script>`;

/** Where each html block is, what it logs, and whether it must start the worker. */
const EXPECTED: { file: string; section: string; line: RegExp; worker: boolean }[] = [
  { file: "README.md", section: "In the browser", line: /^1 /, worker: false },
  { file: "docs/browser.md", section: "Save in the background in a page", line: /^100 true$/, worker: true },
];

for (const engine of SELECTED) {
  noteSkip(engine);
  Deno.test({
    name: `the browser snippets of the README and docs/browser.md run verbatim against the web build [${engine}]`,
    ignore: !runs(engine),
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      const blocks: string[] = [];
      for (const { file, section } of EXPECTED) {
        const text = parseMarkdown(await Deno.readTextFile(join(ROOT, file))).sections.get(section);
        assert.ok(text, `${file} has a section "${section}"`);
        const html = parseMarkdown(text).blocks.filter((b) => b.info === "html");
        assert.equal(html.length, 1, `one html block in ${file}, "${section}"`);
        blocks.push(html[0]!.code);
      }
      const dir = await Deno.makeTempDir({ prefix: "ckpt-web-readme-" });
      await buildWeb(dir);
      for (const [i, html] of blocks.entries()) {
        await Deno.writeTextFile(
          join(dir, `snippet-${i}.html`),
          `<!doctype html><meta charset="utf-8">\n${RECORDER}\n${html}`,
        );
      }
      const served: Served[] = [];
      const server = serveStatic({ "": dir }, { onServed: (s) => served.push(s) });
      const browser = await connectBrowser(engine);
      try {
        for (const [i, expected] of EXPECTED.entries()) {
          await t.step(`snippet ${i + 1}`, async () => {
            served.length = 0;
            const page = await browser.newPage(`${server.url}snippet-${i}.html`);
            try {
              await page.waitFor("window.logged.length > 0 || window.errors.length > 0", 120_000);
              const r = await page.evaluate(() => {
                const w = window as unknown as { logged: string[]; errors: string[] };
                return { line: w.logged[0] ?? "", errors: w.errors };
              });
              assert.deepEqual(r.errors, []);
              assert.match(r.line, expected.line);
            } finally {
              await page.close();
            }
            const worker = served.some((s) => s.path.endsWith("/ckpt-worker.js") && s.status === 200);
            assert.equal(worker, expected.worker, `ckpt-worker.js ${worker ? "was" : "was not"} loaded`);
          });
        }
      } finally {
        await browser.disconnect();
        await server.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
