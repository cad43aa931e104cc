/// <reference lib="dom" />
// The browser demo (deno task web) driven in headless Chromium: it trains, checkpoints into OPFS
// from the library's Web Worker, and after a reload resumes from the newest checkpoint, on each
// TF.js backend Chromium offers here. Screenshots of every stage are written under the test's temp dir when a stage fails.
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import { startDemo } from "../../demo/web/serve.ts";
import { launch, noteSkip, RUN_BROWSER_TESTS } from "./_browser.ts";

interface DemoState {
  ready: boolean;
  backend: string;
  step: number;
  resumedFrom: number;
  saved: number;
  saving: boolean;
  error: string;
}
declare const demo: DemoState;
declare const inspectFile: (f: File) => Promise<void>;

const text = (page: Page, id: string) => page.$eval(`#${id}`, (e) => e.textContent ?? "");

noteSkip();
Deno.test({
  name: "the browser demo resumes from its newest checkpoint after a reload (cpu, wasm, webgl, webgpu)",
  ignore: !RUN_BROWSER_TESTS,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const server = await startDemo(0);
    const browser = await launch();
    const shotsDir = await Deno.makeTempDir({ prefix: "ckpt-web-demo-test-" });
    let failed = false;
    try {
      for (const backend of ["cpu", "wasm", "webgl", "webgpu"]) {
        const shots: [string, Uint8Array][] = [];
        const page = await browser.newPage();
        const requested: string[] = [];
        page.on("request", (r) => void requested.push(r.url()));
        const shoot = async (stage: string) => shots.push([stage, await page.screenshot({ type: "png" })]);
        const ok = await t.step(backend, async () => {
          try {
            const q = `?backend=${backend}&dir=test/${backend}&every=10&steps=100000`;
            await page.goto(`${server.url}${q}&autostart=1`);
            await page.waitForFunction("window.demo && (window.demo.ready || window.demo.error)", { timeout: 120_000 });
            const error = await page.evaluate(() => demo.error);
            // webgl and webgpu depend on what this Chromium offers (SwiftShader here): a skip says why.
            if (error && /not available/.test(error) && (backend === "webgl" || backend === "webgpu")) {
              console.log(`${backend}: ${error} (skipped)`);
              await shoot("unavailable");
              return;
            }
            assert.equal(error, "");
            await shoot("started");
            await page.waitForFunction("window.demo.saved >= 20", { timeout: 180_000 });
            await shoot("saved");
            const saved = await page.evaluate(() => demo.saved);
            assert.ok(requested.some((u) => u.endsWith("/ckpt-worker.js")), "the saves ran in the library's worker");
            await page.evaluate(() => localStorage.removeItem("ckpt-demo-training"));
            await page.goto(`${server.url}${q}`); // a reload, without autostart
            await page.waitForFunction("window.demo && (window.demo.ready || window.demo.error)", { timeout: 120_000 });
            await shoot("reloaded");
            const after = await page.evaluate(() => ({ ...demo }));
            assert.equal(after.error, "");
            assert.ok(after.resumedFrom >= saved, `resumed from ${after.resumedFrom}, saved ${saved}`);
            assert.match(await text(page, "status"), /^resumed from step \d+ \(verified\)$/);
            const rows = await page.$$eval("#list tr", (trs) => trs.map((tr) => tr.textContent ?? ""));
            assert.ok(rows.length >= 2 && rows.length <= 3, `rows: ${rows.join(" | ")}`);
            // A dropped file: the newest checkpoint verifies; the same bytes with one bit flipped do not.
            await page.evaluate(async (dir: string) => {
              const root = await navigator.storage.getDirectory();
              let d = root;
              for (const p of dir.split("/")) d = await d.getDirectoryHandle(p);
              const names: string[] = [];
              for await (const [name] of (d as unknown as { entries(): AsyncIterable<[string]> }).entries()) {
                if (name.endsWith(".ckpt")) names.push(name);
              }
              names.sort();
              const bytes = new Uint8Array(
                await (await (await d.getFileHandle(names.at(-1)!)).getFile()).arrayBuffer(),
              );
              await inspectFile(new File([bytes], "good.ckpt"));
              (globalThis as { good?: string }).good = document.getElementById("dropped")!.textContent!;
              bytes[bytes.byteLength >> 1]! ^= 0x10;
              await inspectFile(new File([bytes], "bad.ckpt"));
            }, `test/${backend}`);
            await shoot("dropped");
            const good = await page.evaluate(() => (globalThis as { good?: string }).good ?? "");
            assert.match(good, /^good\.ckpt: verified\. Step \d+, \d+ tensors/);
            assert.match(await text(page, "dropped"), /^bad\.ckpt is not a valid checkpoint: /);
          } catch (e) {
            await shoot("failure").catch(() => {});
            for (const [stage, png] of shots) await Deno.writeFile(join(shotsDir, `${backend}-${stage}.png`), png);
            console.error(`screenshots of the ${backend} run: ${shotsDir}`);
            throw e;
          } finally {
            await page.close();
          }
        });
        failed ||= !ok;
      }
    } finally {
      await browser.close();
      await server.close();
      if (!failed) await Deno.remove(shotsDir, { recursive: true });
    }
  },
});
