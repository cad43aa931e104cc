// A static file server on 127.0.0.1 for tests: serves a directory, honours single byte ranges
// (`bytes=A-B`, `bytes=A-`, `bytes=-N`) with 206/416 and Content-Range, answers HEAD, and counts
// requests and body bytes sent. It can also ignore Range (answer 200 with the whole file), refuse
// HEAD, or fail with a status, to test how clients cope.
import { join } from "node:path";

export interface ServerOptions {
  /** Answer every GET with the whole file, as a server without range support does. */
  ignoreRange?: boolean;
  /** Answer HEAD with 405. */
  noHead?: boolean;
  /** Answer every request with this status. */
  failWith?: number;
}

export interface StaticServer {
  /** `http://127.0.0.1:PORT/` */
  url: string;
  /** Requests answered so far, as "METHOD PATH RANGE". */
  log: string[];
  /** Body bytes sent so far. */
  bytesSent: number;
  options: ServerOptions;
  close(): Promise<void>;
}

function parseRange(header: string, size: number): { start: number; end: number } | "bad" | "unsatisfiable" {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return "bad";
  if (m[1] === "") {
    const n = Number(m[2]);
    if (n === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return "unsatisfiable";
  return { start, end };
}

export function serveDirectory(root: string, options: ServerOptions = {}): StaticServer {
  const state: StaticServer = {
    url: "",
    log: [],
    bytesSent: 0,
    options,
    close: async () => {},
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    const range = req.headers.get("range");
    state.log.push(`${req.method} ${url.pathname}${url.search}${range ? ` ${range}` : ""}`);
    if (state.options.failWith) return new Response("failing on purpose", { status: state.options.failWith });
    if (req.method === "HEAD" && state.options.noHead) return new Response(null, { status: 405 });
    const path = join(root, ...decodeURIComponent(url.pathname).split("/").filter((s) => s !== ""));
    let bytes: Uint8Array;
    let mtime: Date | null;
    try {
      const st = await Deno.stat(path);
      if (!st.isFile) return new Response("not found", { status: 404 });
      mtime = st.mtime;
      bytes = await Deno.readFile(path);
    } catch {
      return new Response("not found", { status: 404 });
    }
    const headers = new Headers({
      "etag": `"${bytes.byteLength}-${mtime?.getTime() ?? 0}"`,
      "accept-ranges": state.options.ignoreRange ? "none" : "bytes",
    });
    if (mtime) headers.set("last-modified", mtime.toUTCString());
    const send = (body: Uint8Array, status: number) => {
      headers.set("content-length", String(body.byteLength));
      if (req.method === "HEAD") return new Response(null, { status, headers });
      state.bytesSent += body.byteLength;
      return new Response(body as Uint8Array<ArrayBuffer>, { status, headers });
    };
    if (!range || state.options.ignoreRange || req.method === "HEAD") return send(bytes, 200);
    const r = parseRange(range, bytes.byteLength);
    if (r === "bad") return send(bytes, 200);
    if (r === "unsatisfiable") {
      headers.set("content-range", `bytes */${bytes.byteLength}`);
      return new Response(null, { status: 416, headers });
    }
    headers.set("content-range", `bytes ${r.start}-${r.end}/${bytes.byteLength}`);
    return send(bytes.subarray(r.start, r.end + 1), 206);
  });
  state.url = `http://127.0.0.1:${server.addr.port}/`;
  state.close = () => server.shutdown();
  return state;
}

/**
 * A server on 127.0.0.1 that answers every request with `status` (and `body`, except to HEAD),
 * as a store that refuses or lacks an object does, and records each request as "METHOD PATH".
 */
export function answering(status: number, body = ""): { url: string; seen: string[]; close(): Promise<void> } {
  const seen: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    seen.push(`${req.method} ${new URL(req.url).pathname}`);
    return new Response(req.method === "HEAD" ? null : body, { status });
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, seen, close: () => server.shutdown() };
}
