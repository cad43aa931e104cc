// The ObjectStore contract (tests/storage/_contract.ts, the suite every backend runs) against a
// real OpfsStore in Chromium, Firefox and WebKit: each store call is forwarded into the page,
// where the store runs; bytes cross over HTTP and errors come back as the same classes.
import { testObjectStore } from "../storage/_contract.ts";
import {
  type GetOptions,
  type GetResult,
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  type ObjectWriter,
  PreconditionFailedError,
  type PutOptions,
  type WriteOptions,
} from "../../src/storage/types.ts";
import { openSession, serveSite, type Site, type WebPage, type WebSession } from "./_browser.ts";
import { type Engine, noteSkip, runs, SELECTED } from "./_engines.ts";
import { ciException } from "../_ci_exceptions.ts";

type Page = WebPage;

type Rpc = typeof import("./page/store_entry.ts").rpc;
declare const m: { rpc: Rpc };

const OPTIONS = { entries: { store: "tests/web/page/store_entry.ts" } };
let site: Promise<Site> | undefined;
const sessions = new Map<Engine, Promise<WebSession>>();
const sessionOnce = (engine: Engine) => {
  let s = sessions.get(engine);
  if (!s) sessions.set(engine, s = (site ??= serveSite(OPTIONS)).then((site) => openSession(engine, site, OPTIONS)));
  return s;
};

interface PlainInfo {
  key: string;
  size: number;
  version: string;
  lastModified?: number;
}

function infoOf(p: PlainInfo): ObjectInfo {
  return {
    key: p.key,
    size: p.size,
    version: p.version,
    ...(p.lastModified !== undefined ? { lastModified: new Date(p.lastModified) } : {}),
  };
}

function rebuild(e: Record<string, unknown>): Error {
  const message = String(e.message);
  const url = String(e.url);
  let err: Error;
  switch (e.name) {
    case "ObjectNotFoundError":
      return new ObjectNotFoundError(url);
    case "PreconditionFailedError":
      err = new PreconditionFailedError(url, "");
      err.message = message;
      return err;
    case "TypeError":
      return new TypeError(message);
    case "RangeError":
      return new RangeError(message);
    case "SyntaxError":
      return new SyntaxError(message);
    default:
      err = new Error(message);
      err.name = String(e.name);
      return err;
  }
}

async function call<T>(page: Page, method: string, args: Record<string, unknown>): Promise<T> {
  const r = await page.evaluate((method: string, args: Record<string, unknown>) => m.rpc(method, args), method, args);
  if ("error" in r) throw rebuild(r.error);
  return r.ok as T;
}

let signals = 0;
let blobs = 0;

/** Puts bytes where the page can fetch them; gives the name to pass. */
function offer(session: WebSession, bytes: Uint8Array): string {
  const name = `b${++blobs}`;
  session.blobs.set(name, bytes.slice());
  return name;
}

/** Sets up a page-side AbortController mirroring `signal`; returns its id and whether it is already aborted. */
function mirror(page: Page, signal: AbortSignal | undefined): { signal?: number; aborted?: string } {
  if (!signal) return {};
  const id = ++signals;
  const reason = () => (signal.reason as Error)?.message ?? String(signal.reason);
  if (signal.aborted) return { signal: id, aborted: reason() };
  signal.addEventListener("abort", () => void call(page, "abortSignal", { signal: id, reason: reason() }), {
    once: true,
  });
  return { signal: id };
}

/** An ObjectStore whose every call runs on an OpfsStore in the page. */
class PageStore implements ObjectStore {
  readonly writable = true;
  readonly url: string;
  sweep: (prefix?: string) => Promise<number>;
  private page: Page;
  constructor(private session: WebSession, private id: number, path: string) {
    const page = session.page;
    this.page = page;
    this.url = `opfs:///${path}/`;
    this.sweep = (prefix?: string) => call(page, "sweep", { store: id, prefix });
  }
  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    const blob = `g${++blobs}`;
    const r = await call<{ info: PlainInfo; offset: number; length: number }>(this.page, "get", {
      store: this.id,
      key,
      range: options.range,
      blob,
    });
    const bytes = this.session.uploads.get(blob)!;
    this.session.uploads.delete(blob);
    return {
      info: infoOf(r.info),
      offset: r.offset,
      length: r.length,
      body: new Blob([bytes as Uint8Array<ArrayBuffer>]).stream(),
    };
  }
  async head(key: string): Promise<ObjectInfo | undefined> {
    const r = await call<PlainInfo | null>(this.page, "head", { store: this.id, key });
    return r ? infoOf(r) : undefined;
  }
  async put(key: string, data: Uint8Array, options: PutOptions = {}): Promise<ObjectInfo> {
    const blob = offer(this.session, data);
    try {
      return infoOf(
        await call(this.page, "put", {
          store: this.id,
          key,
          blob,
          mode: options.mode,
          ...mirror(this.page, options.signal),
        }),
      );
    } finally {
      this.session.blobs.delete(blob);
    }
  }
  async writer(key: string, options: WriteOptions = {}): Promise<ObjectWriter> {
    const page = this.page;
    const session = this.session;
    const id = await call<number>(page, "writer", { store: this.id, key, ...mirror(page, options.signal) });
    return {
      write: async (chunk) => {
        const blob = offer(session, chunk);
        try {
          await call(page, "write", { writer: id, blob });
        } finally {
          session.blobs.delete(blob);
        }
      },
      close: async () => infoOf(await call(page, "close", { writer: id })),
      abort: (reason) => call(page, "abort", { writer: id, reason: (reason as Error)?.message }),
    };
  }
  delete(key: string): Promise<void> {
    return call(this.page, "delete", { store: this.id, key });
  }
  async *list(prefix?: string): AsyncIterable<ObjectInfo> {
    const all = await call<PlainInfo[]>(this.page, "list", { store: this.id, prefix });
    yield* all.map(infoOf);
  }
}

/**
 * WebKit keeps file times in whole seconds: two same-size writes within a second have one version.
 * The reason lives in tests/_ci_exceptions.ts, which lets this test skip in CI.
 */
const WEBKIT_RULE = "concurrent { ifMatch } puts of one version: exactly one wins";
const WEBKIT_CANNOT = { [WEBKIT_RULE]: ciException(`OpfsStore [webkit] ${WEBKIT_RULE}`)! };

let stores = 0;
for (const engine of SELECTED) {
  noteSkip(engine);
  testObjectStore(`OpfsStore [${engine}]`, async () => {
    const s = await sessionOnce(engine);
    const page = s.page;
    const path = `contract/${++stores}`;
    const id = await call<number>(page, "open", { path });
    const store = new PageStore(s, id, path);
    return {
      store,
      seed: async (key, bytes) => void await store.put(key, bytes),
      close: () => call(page, "destroy", { store: id }),
    };
  }, { ignore: !runs(engine), sanitize: false, cannot: engine === "webkit" ? WEBKIT_CANNOT : {} });
}

Deno.test({
  name: "OpfsStore: let the browsers go and stop the server",
  ignore: !SELECTED.some(runs),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    for (const s of sessions.values()) await (await s).close();
    if (site) await (await site).close();
  },
});
