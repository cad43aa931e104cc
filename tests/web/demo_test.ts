/// <reference lib="dom" />
// The browser demo (deno task web) driven in Chromium, Firefox and WebKit: it trains, checkpoints
// into OPFS from the library's Web Worker, and after a reload resumes from the newest checkpoint,
// on each TF.js backend the engine offers here. Screenshots of every stage are written under the
// test's temp dir when a stage fails (scripts/demo_screenshots.ts takes the docs' ones).
import assert from "node:assert/strict";
import { join } from "node:path";
import { startDemo } from "../../demo/web/serve.ts";
import type { Served } from "../../web/serve.ts";
import { type Engine, noteSkip, runs, SELECTED } from "./_engines.ts";
import { connectBrowser } from "./_page.ts";
import { runDemo } from "./_demo.ts";

/** The backends each engine runs the demo on (webgl and webgpu skip, saying why, where the engine has none here). */
const BACKENDS: Record<Engine, string[]> = {
  chromium: ["cpu", "wasm", "webgl", "webgpu"],
  firefox: ["cpu", "wasm", "webgl"],
  webkit: ["wasm", "webgl"],
};

for (const engine of SELECTED) {
  noteSkip(engine);
  Deno.test({
    name: `the browser demo resumes from its newest checkpoint after a reload [${engine}]`,
    ignore: !runs(engine),
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      const served: Served[] = [];
      const server = await startDemo(0, { onServed: (s) => served.push(s) });
      const browser = await connectBrowser(engine);
      const shotsDir = await Deno.makeTempDir({ prefix: "ckpt-web-demo-test-" });
      let failed = false;
      try {
        for (const backend of BACKENDS[engine]) {
          const shots: [string, Uint8Array][] = [];
          const page = await browser.newPage();
          const shoot = async (stage: string) => void shots.push([stage, await page.screenshot()]);
          const ok = await t.step(backend, async () => {
            try {
              served.length = 0;
              const skipped = await runDemo(page, server.url, backend, shoot);
              if (skipped) return console.log(`${engine} ${backend}: ${skipped} (skipped)`);
              assert.ok(
                served.some((s) => s.path.endsWith("/ckpt-worker.js")),
                "the saves ran in the library's worker",
              );
            } catch (e) {
              await shoot("failure").catch(() => {});
              for (const [stage, png] of shots) await Deno.writeFile(join(shotsDir, `${backend}-${stage}.png`), png);
              console.error(`screenshots of the ${engine} ${backend} run: ${shotsDir}`);
              throw e;
            } finally {
              await page.close();
            }
          });
          failed ||= !ok;
        }
      } finally {
        await browser.disconnect();
        await server.close();
        if (!failed) await Deno.remove(shotsDir, { recursive: true });
      }
    },
  });
}
