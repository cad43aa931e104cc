// The browser test harness: builds page entries with the web build, serves them on 127.0.0.1 and
// runs each test once per engine (Chromium, Firefox, WebKit) in that engine's one browser for the
// whole test run (tests/web/_page.ts). Test bodies are engine-neutral: they drive the page through
// `page.evaluate`. An engine that is not installed skips with one line; in CI (CI set) it fails.
import { join } from "node:path";
import { buildWeb } from "../../web/build.ts";
import { type Served, serveStatic, type StaticServer } from "../../web/serve.ts";
import { type Engine, noteSkip, runs, SELECTED } from "./_engines.ts";
import { connectBrowser, type EngineBrowser, type WebPage } from "./_page.ts";
import type { HostKind } from "./_browser_host.ts";

export type { Engine, EngineBrowser, WebPage };

/** What a browser test is given: the site, the engine's browser, and a page on the first entry. */
export interface WebContext extends Omit<Site, "close"> {
  engine: Engine;
  browser: EngineBrowser;
  page: WebPage;
  /** Opens `path` (relative to the server) in a new page and waits for `window.ready`. */
  open(path: string): Promise<WebPage>;
}

/** Options for {@linkcode browserTest}. */
export interface BrowserTestOptions {
  /** Page bundles to build: output name to source file relative to the repository root. */
  entries: Record<string, string>;
  /** Extra HTML pages to serve, by file name. */
  pages?: Record<string, string>;
  /** Engines this test does not run in, each with the reason (printed once when skipped). */
  notIn?: Partial<Record<Engine, string>>;
  /** The browser to use for WebKit: Safari 26's features (default), or Safari before 26. */
  webkit?: "webkit" | "webkit-legacy";
}

/** A built and served site: pages, bundles and the test's own files. */
export interface Site {
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
  close(): Promise<void>;
}

/** Builds `entries` and serves them, with `/upload/NAME` (PUT) and `/blob/NAME` (GET) for bytes. */
export async function serveSite(options: BrowserTestOptions): Promise<Site> {
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
  return {
    url: server.url,
    server,
    served,
    uploads,
    blobs,
    filesDir,
    tempDir,
    async close() {
      await server.close();
      await Deno.remove(tempDir, { recursive: true }).catch(() => {});
    },
  };
}

/** A running session: the site, this run's browser of the engine, and a page on the first entry. */
export interface WebSession extends WebContext {
  close(): Promise<void>;
}

/** Connects to the engine's browser and opens the first entry's page on `site`. */
export async function openSession(
  engine: Engine,
  site: Site,
  options: BrowserTestOptions,
  kind: HostKind = engine === "webkit" ? options.webkit ?? "webkit" : engine,
): Promise<WebSession> {
  const browser = await connectBrowser(kind);
  const open = async (path: string) => {
    const page = await browser.newPage(site.url + path);
    await page.waitFor("window.ready === true", 120_000);
    return page;
  };
  let page: WebPage;
  try {
    page = await open(`${Object.keys(options.entries)[0]!}.html`);
  } catch (e) {
    await browser.disconnect();
    throw e;
  }
  return { ...site, engine, browser, page, open, close: () => browser.disconnect() };
}

/** Builds and serves `options.entries` once for all the engines' runs of a test file, and closes it after. */
function sharedSite(options: BrowserTestOptions, users: number): { get(): Promise<Site>; done(): Promise<void> } {
  let site: Promise<Site> | undefined;
  let left = users;
  return {
    get: () => site ??= serveSite(options),
    async done() {
      if (--left === 0 && site) await (await site).close();
    },
  };
}

/**
 * Registers one Deno test per engine (named `name [engine]`) that runs `fn` against a page on
 * the first entry, in this run's browser of that engine. The build and server are shared by the
 * engines. An engine that is not here skips with a line, unless CI is set; `notIn` names engines the
 * test cannot run in, with the reason.
 */
export function browserTest(
  name: string,
  options: BrowserTestOptions,
  fn: (t: Deno.TestContext, ctx: WebContext) => Promise<void>,
): void {
  const engines = SELECTED.filter((e) => runs(e) && !options.notIn?.[e]);
  const site = sharedSite(options, engines.length);
  for (const engine of SELECTED) {
    noteSkip(engine);
    const why = options.notIn?.[engine];
    if (why && runs(engine)) console.log(`${name} [${engine}] not run: ${why}`);
    Deno.test({
      name: `${name} [${engine}]`,
      ignore: !engines.includes(engine),
      sanitizeOps: false,
      sanitizeResources: false,
    }, async (t) => {
      try {
        const session = await openSession(engine, await site.get(), options);
        try {
          await fn(t, session);
        } finally {
          await session.close();
        }
      } finally {
        await site.done();
      }
    });
  }
}
