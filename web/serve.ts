/**
 * A small static file server for the web build, the demo page and the browser tests: GET and
 * HEAD with single byte ranges (`Range: bytes=a-b`, `a-`, `-n`), on 127.0.0.1 only.
 *
 * @module
 */
import { extname, join, normalize } from "node:path";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".png": "image/png",
};

/** One request the server answered, for tests that check what a page read. */
export interface Served {
  method: string;
  path: string;
  range: string | null;
  status: number;
  bytes: number;
}

/** Options for {@linkcode serveStatic}. */
export interface ServeOptions {
  /** Port; 0 picks a free one. @default {0} */
  port?: number;
  /** Called for each request answered. */
  onServed?: (s: Served) => void;
  /** Answers requests before the files do (return undefined to fall through). */
  handler?: (req: Request) => Response | undefined | Promise<Response | undefined>;
}

/** A running server: its base URL (ending in `/`) and how to stop it. */
export interface StaticServer {
  url: string;
  close(): Promise<void>;
}

function parseRange(header: string, size: number): [number, number] | "bad" {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return "bad";
  if (m[1] === "") {
    const n = Number(m[2]);
    return [Math.max(0, size - n), size];
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size : Math.min(size, Number(m[2]) + 1);
  if (start >= size || end <= start) return "bad";
  return [start, end];
}

/** Serves the files under each directory of `roots` (URL prefix, without slashes, to directory). */
export function serveStatic(roots: Record<string, string>, options: ServeOptions = {}): StaticServer {
  const served = (s: Served, r: Response) => {
    options.onServed?.(s);
    return r;
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: options.port ?? 0, onListen() {} }, async (req) => {
    const custom = await options.handler?.(req);
    if (custom) return custom;
    const path = decodeURIComponent(new URL(req.url).pathname);
    const log = { method: req.method, path, range: req.headers.get("range"), status: 200, bytes: 0 };
    if (req.method !== "GET" && req.method !== "HEAD") {
      return served({ ...log, status: 405 }, new Response("method not allowed", { status: 405 }));
    }
    const [, first = "", ...rest] = path.split("/");
    const dir = roots[first] ?? roots[""];
    const relative = roots[first] !== undefined ? rest.join("/") : [first, ...rest].join("/");
    const file = normalize(join(dir ?? "/nonexistent", relative || "index.html"));
    if (!dir || !file.startsWith(normalize(dir))) {
      return served({ ...log, status: 404 }, new Response("not found", { status: 404 }));
    }
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = await Deno.readFile(file);
    } catch {
      return served({ ...log, status: 404 }, new Response("not found", { status: 404 }));
    }
    const headers = new Headers({
      "content-type": TYPES[extname(file)] ?? "application/octet-stream",
      "accept-ranges": "bytes",
      "cache-control": "no-store",
    });
    const rangeHeader = req.headers.get("range");
    if (rangeHeader) {
      const range = parseRange(rangeHeader, bytes.byteLength);
      if (range === "bad") {
        headers.set("content-range", `bytes */${bytes.byteLength}`);
        return served({ ...log, status: 416 }, new Response(null, { status: 416, headers }));
      }
      const [start, end] = range;
      headers.set("content-range", `bytes ${start}-${end - 1}/${bytes.byteLength}`);
      const body = bytes.subarray(start, end);
      return served(
        { ...log, status: 206, bytes: body.byteLength },
        new Response(req.method === "HEAD" ? null : body, { status: 206, headers }),
      );
    }
    headers.set("content-length", String(bytes.byteLength));
    return served(
      { ...log, bytes: bytes.byteLength },
      new Response(req.method === "HEAD" ? null : bytes, { status: 200, headers }),
    );
  });
  return { url: `http://127.0.0.1:${server.addr.port}/`, close: () => server.shutdown() };
}
