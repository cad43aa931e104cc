// One browser per engine for the whole test run, and a page that every engine drives the same
// way: `evaluate(fn, ...args)` runs `fn`'s source in the page with JSON arguments and gives back
// its (awaited) JSON result. Chromium and Firefox through puppeteer-core, WebKit through the
// `webdriver` client's Execute Script (which awaits a returned promise). The browser itself is kept
// by tests/web/_browser_host.ts, started by the first test file that needs it.
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import WebDriver from "webdriver";
import { join } from "node:path";
import { tmpdir } from "node:os";
import type { HostKind, HostState } from "./_browser_host.ts";
import type { Engine } from "./_engines.ts";

/** A page in any engine. */
export interface WebPage {
  readonly engine: Engine;
  /** Runs `fn` in the page (its source, so it may only use its arguments and the page's globals). */
  evaluate<A extends unknown[], R>(fn: (...args: A) => R, ...args: A): Promise<Awaited<R>>;
  /** Loads `url` and waits for its load event. */
  goto(url: string): Promise<void>;
  /** Waits until `expression` is truthy in the page. */
  waitFor(expression: string, timeoutMs?: number): Promise<void>;
  /** A PNG of the viewport. */
  screenshot(): Promise<Uint8Array>;
  close(): Promise<void>;
  /** The puppeteer page (Chromium and Firefox), for what only a DevTools protocol offers. */
  readonly puppeteer?: Page;
}

/** A connection to this run's browser of one kind. */
export interface EngineBrowser {
  readonly engine: Engine;
  readonly kind: HostKind;
  /** The browser's name and version, as it reports them. */
  readonly version: string;
  /** A new page (tab or window), at `url` if given. */
  newPage(url?: string): Promise<WebPage>;
  /** Closes the pages this connection opened and lets the browser go (it stays up for other files). */
  disconnect(): Promise<void>;
  /** The puppeteer browser (Chromium and Firefox). */
  readonly puppeteer?: Browser;
}

const LONG = 600_000;

function engineOf(kind: HostKind): Engine {
  return kind === "webkit-legacy" ? "webkit" : kind;
}

/** This run's browser of `kind`: started by the first caller in the test process, reused after. */
async function hostState(kind: HostKind): Promise<HostState> {
  const dir = join(tmpdir(), `ckpt-web-browsers-${Deno.pid}`);
  await Deno.mkdir(dir, { recursive: true });
  const file = join(dir, `${kind}.json`);
  let exited = false; // the host this file started is gone (/proc needs --allow-all in Deno: the status tells)
  try {
    await Deno.writeTextFile(join(dir, `${kind}.starting`), "", { createNew: true });
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--quiet",
        "--import-map=tools.imports.json", // the repository's test tools (puppeteer-core, webdriver)
        "--lock=tools.lock",
        new URL("./_browser_host.ts", import.meta.url).pathname,
        kind,
        `${Deno.pid}`,
        file,
      ],
      cwd: new URL("../..", import.meta.url).pathname,
      detached: true,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    child.unref();
    child.status.then(() => exited = true, () => exited = true);
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw e; // another file started it
  }
  const end = Date.now() + 240_000;
  for (;;) {
    try {
      return JSON.parse(await Deno.readTextFile(file)) as HostState;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    if (Date.now() > end) throw new Error(`the ${kind} browser did not start within 240 s`);
    if (exited) {
      // It may have written its state just before it went.
      await new Promise((r) => setTimeout(r, 100));
      try {
        return JSON.parse(await Deno.readTextFile(file)) as HostState;
      } catch {
        throw new Error(`the ${kind} browser host exited before it started`);
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

class PuppeteerPage implements WebPage {
  constructor(readonly engine: Engine, readonly puppeteer: Page) {
    puppeteer.on("pageerror", (e) => console.error(`[${engine} page error] ${e}`));
    puppeteer.on("console", (msg) => {
      if (msg.type() === "error") console.error(`[${engine} page console] ${msg.text()}`);
    });
  }
  evaluate<A extends unknown[], R>(fn: (...args: A) => R, ...args: A): Promise<Awaited<R>> {
    return this.puppeteer.evaluate(fn as never, ...(args as unknown as never[])) as Promise<Awaited<R>>;
  }
  async goto(url: string): Promise<void> {
    await this.puppeteer.goto(url);
  }
  async waitFor(expression: string, timeoutMs = 120_000): Promise<void> {
    await this.puppeteer.waitForFunction(expression, { timeout: timeoutMs, polling: 100 });
  }
  async screenshot(): Promise<Uint8Array> {
    return await this.puppeteer.screenshot({ type: "png" });
  }
  async close(): Promise<void> {
    if (!this.puppeteer.isClosed()) await this.puppeteer.close();
  }
}

type Client = Awaited<ReturnType<typeof WebDriver.attachToSession>>;

/** WebDriver has one current window per session: every call switches to its own, one call at a time. */
class DriverSession {
  #current = "";
  #queue: Promise<unknown> = Promise.resolve();
  constructor(readonly client: Client) {}
  run<T>(handle: string, f: () => Promise<T>): Promise<T> {
    const go = async () => {
      if (this.#current !== handle) {
        await this.client.switchToWindow(handle);
        this.#current = handle;
      }
      return await f();
    };
    const p = this.#queue.then(go, go);
    this.#queue = p.catch(() => {});
    return p;
  }
  forget(handle: string): void {
    if (this.#current === handle) this.#current = "";
  }
}

class DriverPage implements WebPage {
  readonly engine: Engine = "webkit";
  #closed = false;
  constructor(readonly session: DriverSession, readonly handle: string, private onClose: () => void) {}
  evaluate<A extends unknown[], R>(fn: (...args: A) => R, ...args: A): Promise<Awaited<R>> {
    return this.session.run(this.handle, async (): Promise<Awaited<R>> => {
      try {
        // The result crosses as JSON text: WebKit's own serialisation fails on some objects
        // (an `undefined` property among them).
        const script = `return Promise.resolve((${fn}).apply(null, arguments))` +
          `.then((r) => r === undefined ? "undefined" : JSON.stringify(r))`;
        const text = await this.session.client.executeScript(script, args as never) as string;
        return (text === "undefined" ? undefined : JSON.parse(text)) as Awaited<R>;
      } catch (e) {
        // "javascript error: TypeError: …": the page's error, without the protocol's wrapping.
        const message = (e as Error).message.replace(/^javascript error: /, "");
        throw new Error(`Evaluation failed in WebKit: ${message}`);
      }
    });
  }
  goto(url: string): Promise<void> {
    return this.session.run(this.handle, async () => void await this.session.client.navigateTo(url));
  }
  async waitFor(expression: string, timeoutMs = 120_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (!(await this.evaluate((e: string) => Boolean((0, eval)(e)), expression))) {
      if (Date.now() > end) throw new Error(`Waiting for ${expression} failed: ${timeoutMs} ms exceeded`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  screenshot(): Promise<Uint8Array> {
    return this.session.run(this.handle, async () => {
      const b64 = await this.session.client.takeScreenshot();
      return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    });
  }
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.onClose();
    await this.session.run(this.handle, async () => void await this.session.client.closeWindow());
    this.session.forget(this.handle);
  }
}

async function connectPuppeteer(engine: "chromium" | "firefox", state: { endpoint: string; version: string }) {
  const browser = await puppeteer.connect({
    browserWSEndpoint: state.endpoint,
    protocolTimeout: LONG,
    ...(engine === "firefox" ? { protocol: "webDriverBiDi" as const } : {}),
  });
  const pages = new Set<PuppeteerPage>();
  return {
    engine,
    kind: engine,
    version: state.version,
    puppeteer: browser,
    async newPage(url?: string) {
      const page = new PuppeteerPage(engine, await browser.newPage());
      pages.add(page);
      if (url) await page.goto(url);
      return page;
    },
    async disconnect() {
      for (const p of pages) await p.close().catch(() => {});
      await browser.disconnect();
    },
  } satisfies EngineBrowser;
}

async function connectDriver(
  kind: "webkit" | "webkit-legacy",
  state: { port: number; sessionId: string; version: string; capabilities: unknown },
) {
  const client = await WebDriver.attachToSession({
    sessionId: state.sessionId,
    hostname: "127.0.0.1",
    port: state.port,
    protocol: "http",
    logLevel: "silent",
    connectionRetryTimeout: LONG,
    connectionRetryCount: 0,
    capabilities: state.capabilities as never,
  } as never) as Client;
  const session = new DriverSession(client);
  const home = await client.getWindowHandle(); // the session's first window stays: closing the last ends it
  const pages = new Set<DriverPage>();
  return {
    engine: "webkit" as const,
    kind,
    version: state.version,
    async newPage(url?: string) {
      const { handle } = await session.run(home, () => client.createWindow("tab"));
      const page: DriverPage = new DriverPage(session, handle, () => pages.delete(page));
      pages.add(page);
      if (url) await page.goto(url);
      return page;
    },
    async disconnect() {
      for (const p of [...pages]) await p.close().catch(() => {});
      await session.run(home, () => Promise.resolve());
    },
  } satisfies EngineBrowser;
}

/** Connects to this run's browser of `kind`, starting it if this is the first file to need it. */
export async function connectBrowser(kind: HostKind): Promise<EngineBrowser> {
  const state = await hostState(kind);
  if ("error" in state) throw new Error(state.error);
  if ("endpoint" in state) return await connectPuppeteer(state.kind, state);
  return await connectDriver(state.kind, state);
}

export { engineOf };
