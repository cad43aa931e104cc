/// <reference lib="dom" />
// The browser demo driven through one page in any engine: train, checkpoint, reload, resume, and
// a dropped file checked. Used by tests/web/demo_test.ts and scripts/web_screenshots.ts.
import assert from "node:assert/strict";
import type { WebPage } from "./_page.ts";

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

const text = (page: WebPage, id: string) =>
  page.evaluate((id: string) => document.getElementById(id)!.textContent ?? "", id);

/**
 * Runs the demo on `backend` in `page`: starts training, waits for `minSaved` saved steps, reloads
 * and checks the resume, then a dropped good and a dropped corrupt file. `shoot(stage)` is called
 * at each stage. Returns why it was skipped, or "".
 */
export async function runDemo(
  page: WebPage,
  base: string,
  backend: string,
  shoot: (stage: string) => Promise<void>,
  minSaved = 20,
): Promise<string> {
  const q = `?backend=${backend}&dir=test/${backend}&every=10&steps=100000`;
  await page.goto(`${base}${q}&autostart=1`);
  await page.waitFor("window.demo && (window.demo.ready || window.demo.error)", 120_000);
  const error = await page.evaluate(() => demo.error);
  // webgl and webgpu depend on what the engine offers here: a skip says why.
  if (error && /not available/.test(error) && (backend === "webgl" || backend === "webgpu")) {
    await shoot("unavailable");
    return error;
  }
  assert.equal(error, "");
  await shoot("started");
  await page.waitFor(`window.demo.saved >= ${minSaved} || window.demo.error`, 240_000);
  assert.equal(await page.evaluate(() => demo.error), "");
  await shoot("saved");
  const saved = await page.evaluate(() => demo.saved);
  await page.evaluate(() => localStorage.removeItem("ckpt-demo-training"));
  await page.goto(`${base}${q}`); // a reload, without autostart
  await page.waitFor("window.demo && (window.demo.ready || window.demo.error)", 120_000);
  await shoot("reloaded");
  const after = await page.evaluate(() => ({ ...demo }));
  assert.equal(after.error, "");
  assert.ok(after.resumedFrom >= saved, `resumed from ${after.resumedFrom}, saved ${saved}`);
  assert.match(await text(page, "status"), /^resumed from step \d+ \(verified\)$/);
  const rows = await page.evaluate(() => [...document.querySelectorAll("#list tr")].map((tr) => tr.textContent ?? ""));
  assert.ok(rows.length >= 2 && rows.length <= 3, `rows: ${rows.join(" | ")}`);
  // A dropped file: the newest checkpoint verifies; the same bytes with one bit flipped do not.
  const dropped = await page.evaluate(async (dir: string) => {
    const root = await navigator.storage.getDirectory();
    let d = root;
    for (const p of dir.split("/")) d = await d.getDirectoryHandle(p);
    const names: string[] = [];
    for await (const [name] of (d as unknown as { entries(): AsyncIterable<[string]> }).entries()) {
      if (name.endsWith(".ckpt")) names.push(name);
    }
    names.sort();
    const bytes = new Uint8Array(await (await (await d.getFileHandle(names.at(-1)!)).getFile()).arrayBuffer());
    await inspectFile(new File([bytes], "good.ckpt"));
    const good = document.getElementById("dropped")!.textContent!;
    bytes[bytes.byteLength >> 1]! ^= 0x10;
    await inspectFile(new File([bytes], "bad.ckpt"));
    return { good, bad: document.getElementById("dropped")!.textContent! };
  }, `test/${backend}`);
  await shoot("dropped");
  assert.match(dropped.good, /^good\.ckpt: verified\. Step \d+, \d+ tensors/);
  assert.match(dropped.bad, /^bad\.ckpt is not a valid checkpoint: /);
  return "";
}
