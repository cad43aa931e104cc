/**
 * Screenshots of the browser demo in each engine, for the docs: the demo trains on the wasm
 * backend, checkpoints into OPFS from the library's worker, reloads and resumes; the page as it
 * stands after the resume is written to `docs/demo-<engine>.png`.
 *
 *   deno task screenshots:web [--engines chromium,firefox,webkit]
 *
 * Uses the browser test harness (tests/web/): each engine's browser is started for the run and
 * stopped after it.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { startDemo } from "../demo/web/serve.ts";
import { ROOT } from "../web/build.ts";
import { type Engine, ENGINES, locate } from "../tests/web/_engines.ts";
import { connectBrowser } from "../tests/web/_page.ts";
import { runDemo } from "../tests/web/_demo.ts";

const { values } = parseArgs({ args: Deno.args, options: { engines: { type: "string", default: ENGINES.join(",") } } });
const engines = values.engines.split(",").filter((e) => e !== "") as Engine[];
for (const e of engines) {
  if (!ENGINES.includes(e)) throw new TypeError(`--engines: unknown engine "${e}" (${ENGINES})`);
  const { missing } = locate(e);
  if (missing.length) throw new Error(`${e} needs ${missing.join(", ")} (apt-get install them)`);
}
const server = await startDemo(0);
try {
  for (const engine of engines) {
    const browser = await connectBrowser(engine);
    try {
      const page = await browser.newPage();
      let shot: Uint8Array | undefined;
      await runDemo(page, server.url, "wasm", async (stage) => {
        if (stage === "reloaded") shot = await page.screenshot();
      }, 20);
      const file = join(ROOT, "docs", `demo-${engine}.png`);
      await Deno.writeFile(file, shot!);
      console.log(`${browser.version}: ${file}`);
    } finally {
      await browser.disconnect();
    }
  }
} finally {
  await server.close();
}
