// The README's "In the browser" snippet, run verbatim in headless Chromium against the web build.
import assert from "node:assert/strict";
import { join } from "node:path";
import { buildWeb, ROOT } from "../../web/build.ts";
import { serveStatic } from "../../web/serve.ts";
import { launch, noteSkip, RUN_BROWSER_TESTS } from "./_browser.ts";

noteSkip();
Deno.test({
  name: "the README's browser snippet runs verbatim against the web build",
  ignore: !RUN_BROWSER_TESTS,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const readme = await Deno.readTextFile(join(ROOT, "README.md"));
    const section = readme.slice(readme.indexOf("## In the browser"));
    const html = /```html\n([\s\S]*?)```/.exec(section)?.[1];
    assert.ok(html, "no html block in the README's In the browser section");
    const dir = await Deno.makeTempDir({ prefix: "ckpt-web-readme-" });
    await buildWeb(dir);
    await Deno.writeTextFile(join(dir, "index.html"), `<!doctype html><meta charset="utf-8">\n${html}`);
    const server = serveStatic({ "": dir });
    const browser = await launch();
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(String(e)));
      const logged = new Promise<string>((resolve) =>
        page.on("console", (m) => m.type() === "log" && resolve(m.text()))
      );
      await page.goto(server.url);
      const line = await Promise.race([
        logged,
        new Promise<string>((_, reject) =>
          setTimeout(() => reject(new Error(`no output; errors: ${errors}`)), 120_000)
        ),
      ]);
      assert.deepEqual(errors, []);
      assert.match(line, /^1 /);
    } finally {
      await browser.close();
      await server.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
