// The browser test harness: finds Chromium, builds a page entry with the web build, serves it on
// 127.0.0.1 and drives headless Chromium through puppeteer-core (no browser download: it uses the
// system's chromium). Without Chromium the tests skip with one line; in CI (CI=true) they fail.
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { join } from "node:path";
import { buildWeb } from "../../web/build.ts";
import { type Served, serveStatic, type StaticServer } from "../../web/serve.ts";

const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];

function findChromium(): string | undefined {
  const env = Deno.env.get("CHROMIUM");
  for (const p of env ? [env] : CANDIDATES) {
    try {
      if (Deno.statSync(p).isFile) return p;
    } catch { /* not here */ }
  }
  return undefined;
}

/** The Chromium executable, if there is one. */
export const CHROMIUM: string | undefined = findChromium();
const IN_CI = Deno.env.get("CI") === "true";
let warned = false;

/** Flags for headless Chromium here: no sandbox (root), SwiftShader WebGL, WebGPU when offered. */
export const CHROMIUM_ARGS: readonly string[] = [
  "--no-sandbox",
  "--use-angle=swiftshader",
  "--enable-unsafe-swiftshader",
  "--enable-unsafe-webgpu",
  "--disable-dev-shm-usage",
];

/** Launches headless Chromium with a long protocol timeout (this machine is slow and shared). */
export async function launch(): Promise<Browser> {
  return await puppeteer.launch({
    executablePath: CHROMIUM!,
    headless: true,
    protocolTimeout: 600_000,
    args: [...CHROMIUM_ARGS],
  });
}

/** What a browser test is given. */
export interface WebContext {
  browser: Browser;
  page: Page;
  /** The server's base URL, ending in `/`. */
  url: string;
  server: StaticServer;
  /** Every request the server answered, in order. */
  served: Served[];
  /** Bytes pages PUT to `/upload/NAME`, by NAME. */
  uploads: Map<string, Uint8Array>;
  /** Bytes the server gives at `/blob/NAME`, by NAME (set them from the test). */
  blobs: Map<string, Uint8Array>;
  /** A directory the server serves at `/files/`. */
  filesDir: string;
  /** A temporary directory for the test's own output (screenshots). */
  tempDir: string;
  /** Opens `path` (relative to the server) in a new page and waits for `window.ready`. */
  open(path: string): Promise<Page>;
}

/** Options for {@linkcode browserTest}. */
export interface BrowserTestOptions {
  /** Page bundles to build: output name to source file relative to the repository root. */
  entries: Record<string, string>;
  /** Extra HTML pages to serve, by file name. */
  pages?: Record<string, string>;
}

/** Whether browser tests should run: Chromium is here, or CI demands it (then they fail without it). */
export const RUN_BROWSER_TESTS: boolean = CHROMIUM !== undefined || IN_CI;

/** Prints, once, why the browser tests are skipped. */
export function noteSkip(): void {
  if (!warned && !RUN_BROWSER_TESTS) {
    console.log("browser tests skipped: no chromium (apt-get install chromium, or set CHROMIUM=path)");
  }
  warned = true;
}

/** A running browser session: build, server and Chromium, with a page open on the first entry. */
export interface WebSession extends WebContext {
  close(): Promise<void>;
}

/** Builds `entries`, serves them and launches Chromium with the first entry's page open. */
export async function startWeb(options: BrowserTestOptions): Promise<WebSession> {
  if (!CHROMIUM) throw new Error("Chromium is required in CI (CI=true) but was not found: apt-get install chromium");
  const tempDir = await Deno.makeTempDir({ prefix: "ckpt-web-test-" });
  const bundleDir = join(tempDir, "bundle");
  const filesDir = join(tempDir, "files");
  const pagesDir = join(tempDir, "pages");
  await Deno.mkdir(filesDir);
  await Deno.mkdir(pagesDir);
  await buildWeb(bundleDir, { entries: options.entries, external: [], minify: false });
  const html = (entry: string) =>
    `<!doctype html><meta charset="utf-8"><title>${entry}</title><script type="module">
import * as m from "/bundle/${entry}.js"; window.m = m; window.ready = true;
</script>`;
  for (const entry of Object.keys(options.entries)) {
    await Deno.writeTextFile(join(pagesDir, `${entry}.html`), html(entry));
  }
  for (const [file, text] of Object.entries(options.pages ?? {})) await Deno.writeTextFile(join(pagesDir, file), text);
  const served: Served[] = [];
  const uploads = new Map<string, Uint8Array>();
  const blobs = new Map<string, Uint8Array>();
  const server = serveStatic({ "": pagesDir, bundle: bundleDir, files: filesDir }, {
    onServed: (s) => served.push(s),
    handler: async (req) => {
      const u = new URL(req.url);
      if (req.method === "PUT" && u.pathname.startsWith("/upload/")) {
        uploads.set(decodeURIComponent(u.pathname.slice(8)), new Uint8Array(await req.arrayBuffer()));
        return new Response(null, { status: 204 });
      }
      const blob = req.method === "GET" && u.pathname.startsWith("/blob/")
        ? blobs.get(decodeURIComponent(u.pathname.slice(6)))
        : undefined;
      if (blob) return new Response(blob as Uint8Array<ArrayBuffer>);
      return undefined;
    },
  });
  const browser = await launch();
  const kill = () => browser.process()?.kill("SIGKILL");
  globalThis.addEventListener("unload", kill);
  const open = async (path: string) => {
    const page = await browser.newPage();
    page.on("pageerror", (e) => console.error(`[page error] ${e}`));
    page.on("console", (msg) => {
      if (msg.type() === "error") console.error(`[page console] ${msg.text()}`);
    });
    await page.goto(server.url + path);
    await page.waitForFunction("window.ready === true", { timeout: 120_000 });
    return page;
  };
  let page: Page;
  try {
    page = await open(`${Object.keys(options.entries)[0]!}.html`);
  } catch (e) {
    await browser.close();
    await server.close();
    throw e;
  }
  return {
    browser,
    page,
    url: server.url,
    server,
    served,
    uploads,
    blobs,
    filesDir,
    tempDir,
    open,
    async close() {
      globalThis.removeEventListener("unload", kill);
      await browser.close();
      await server.close();
      await Deno.remove(tempDir, { recursive: true }).catch(() => {});
    },
  };
}

/**
 * Registers one Deno test that builds `entries`, serves them, launches Chromium and runs `fn`
 * (which runs its cases as steps). Skips with a line when there is no Chromium, unless CI=true.
 */
export function browserTest(
  name: string,
  options: BrowserTestOptions,
  fn: (t: Deno.TestContext, ctx: WebContext) => Promise<void>,
): void {
  noteSkip();
  Deno.test({ name, ignore: !RUN_BROWSER_TESTS, sanitizeOps: false, sanitizeResources: false }, async (t) => {
    const session = await startWeb(options);
    try {
      await fn(t, session);
    } finally {
      await session.close();
    }
  });
}
