// The browser snippets of the README ("In the browser") and of docs/browser.md ("Save in the
// background in a page"), each run verbatim in headless Chromium against the web build (one
// browser, a page per snippet): the manager on OPFS, then a background save whose file the
// library's Web Worker writes.
import assert from "node:assert/strict";
import { join } from "node:path";
import { buildWeb, ROOT } from "../../web/build.ts";
import { type Served, serveStatic } from "../../web/serve.ts";
import { launch, noteSkip, RUN_BROWSER_TESTS } from "./_browser.ts";
import { parseMarkdown } from "../docs/_markdown.ts";

/** Where each html block is, what it logs, and whether it must start the worker. */
const EXPECTED: { file: string; section: string; line: RegExp; worker: boolean }[] = [
  { file: "README.md", section: "In the browser", line: /^1 /, worker: false },
  { file: "docs/browser.md", section: "Save in the background in a page", line: /^100 true$/, worker: true },
];

noteSkip();
Deno.test({
  name: "the browser snippets of the README and docs/browser.md run verbatim against the web build",
  ignore: !RUN_BROWSER_TESTS,
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
      await Deno.writeTextFile(join(dir, `snippet-${i}.html`), `<!doctype html><meta charset="utf-8">\n${html}`);
    }
    const served: Served[] = [];
    const server = serveStatic({ "": dir }, { onServed: (s) => served.push(s) });
    const browser = await launch();
    try {
      for (const [i, expected] of EXPECTED.entries()) {
        await t.step(`snippet ${i + 1}`, async () => {
          served.length = 0;
          const page = await browser.newPage();
          const errors: string[] = [];
          page.on("pageerror", (e) => errors.push(String(e)));
          const logged = new Promise<string>((resolve) =>
            page.on("console", (m) => m.type() === "log" && resolve(m.text()))
          );
          await page.goto(`${server.url}snippet-${i}.html`);
          const line = await Promise.race([
            logged,
            new Promise<string>((_, reject) =>
              setTimeout(() => reject(new Error(`no output; errors: ${errors}`)), 120_000)
            ),
          ]);
          await page.close();
          assert.deepEqual(errors, []);
          assert.match(line, expected.line);
          const worker = served.some((s) => s.path.endsWith("/ckpt-worker.js") && s.status === 200);
          assert.equal(worker, expected.worker, `ckpt-worker.js ${worker ? "was" : "was not"} loaded`);
        });
      }
    } finally {
      await browser.close();
      await server.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
