// Preemption in a page, in real headless Chromium: leaving the page (a real navigation, which
// fires visibilitychange to hidden and pagehide) delivers the notice, and a notice handler that
// saves synchronously (localStorage here) has its checkpoint when the user comes back. Self-
// contained: the module is bundled with esbuild and served from a tiny server of its own.
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { IN_CI } from "../_ci.ts";

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
});

const PAGE = `<!doctype html><script type="module">
import { Preemption } from "/preemption.js";
let step = 0;
const preemption = Preemption.listen({
  onNotice: (n) => localStorage.setItem("saved", JSON.stringify({ step, reason: n.reason, status: n.status })),
});
setInterval(() => { step++; }, 5); // training
globalThis.ready = true;
globalThis.preemption = preemption;
</script>`;

Deno.test({
  name: "Preemption in Chromium: leaving the page is a notice, and the step is saved before it goes",
  ignore: !CHROMIUM && !IN_CI,
  async fn() {
    assert.ok(CHROMIUM, "Chromium is needed (CI set)");
    const bundle = await build({
      entryPoints: [fileURLToPath(new URL("../../src/manager/preemption.ts", import.meta.url))],
      bundle: true,
      format: "esm",
      write: false,
    });
    const js = bundle.outputFiles[0]!.text;
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/preemption.js") return new Response(js, { headers: { "content-type": "text/javascript" } });
      if (path === "/other") {
        return new Response("<!doctype html>elsewhere", { headers: { "content-type": "text/html" } });
      }
      return new Response(PAGE, { headers: { "content-type": "text/html" } });
    });
    const origin = `http://127.0.0.1:${server.addr.port}`;
    const browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-dev-shm-usage"],
      protocolTimeout: 120_000,
    });
    try {
      const page = await browser.newPage();
      await page.goto(`${origin}/`);
      await page.waitForFunction(() => (globalThis as { ready?: boolean }).ready === true);
      await new Promise((r) => setTimeout(r, 100)); // some steps
      assert.equal(await page.evaluate(() => localStorage.getItem("saved")), null, "no notice while visible");
      await page.goto(`${origin}/other`); // leaving: visibilitychange to hidden, then pagehide
      const saved = JSON.parse((await page.evaluate(() => localStorage.getItem("saved")))!);
      assert.ok(saved.step > 0, JSON.stringify(saved));
      assert.ok(["visibilitychange", "pagehide"].includes(saved.reason), JSON.stringify(saved));
      assert.equal(saved.status, 0, "a page is not a process: nothing exits");
    } finally {
      await browser.close();
      await server.shutdown();
    }
  },
});
