// Sends a request whose body is a buffer through node:http(s), with its Content-Length, and gives
// the answer as a web Response. Deno's fetch copies every buffer body it is given (a JS-heap copy
// that V8 frees lazily: a 1 GiB multipart save peaked at 342 MiB RSS), and a stream body goes
// chunked, which Ceph RGW refuses (411). node:http writes the caller's buffer as it is: the same
// save peaked near ckpt's own part buffers (measured in docs/storage.md).
//
// Only Deno and Node have node:http; the module is imported on first use, so a browser bundle never
// loads it (the S3 store uses fetch there).

type NodeHttp = typeof import("node:http");
type NodeAgent = import("node:http").Agent;

/** A client for one origin's connections: keep-alive sockets, reused between requests. */
export interface BodySender {
  /** Sends `body` with its Content-Length; rejects with a `TypeError` when no answer came. */
  send(
    url: string,
    init: { method: string; headers: Headers; body: Uint8Array; signal: AbortSignal },
  ): Promise<Response>;
}

/** Statuses whose Response may hold no body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

let modules: Promise<{ http: NodeHttp; https: NodeHttp } | undefined> | undefined;

function isServerRuntime(): boolean {
  const g = globalThis as { Deno?: { version?: { deno?: unknown } }; process?: { versions?: { node?: unknown } } };
  return typeof g.Deno?.version?.deno === "string" || typeof g.process?.versions?.node === "string";
}

function load(): Promise<{ http: NodeHttp; https: NodeHttp } | undefined> {
  modules ??= isServerRuntime()
    ? Promise.all([import("node:http"), import("node:https")]).then(
      ([http, https]) => ({ http, https: https as unknown as NodeHttp }),
      () => undefined,
    )
    : Promise.resolve(undefined);
  return modules;
}

/**
 * A sender over node:http(s), or `undefined` where the runtime has none (a browser): then the
 * caller sends with `fetch`.
 */
export async function nodeBodySender(): Promise<BodySender | undefined> {
  const m = await load();
  if (!m) return undefined;
  const agents = new Map<string, NodeAgent>();
  const agentFor = (protocol: string): NodeAgent => {
    let a = agents.get(protocol);
    if (!a) {
      const mod = protocol === "https:" ? m.https : m.http;
      a = new mod.Agent({ keepAlive: true });
      agents.set(protocol, a);
    }
    return a;
  };
  return {
    send(url, { method, headers, body, signal }) {
      const u = new URL(url);
      const mod = u.protocol === "https:" ? m.https : m.http;
      const head: Record<string, string> = {};
      headers.forEach((v, k) => head[k] = v);
      head["content-length"] = String(body.byteLength);
      return new Promise<Response>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        let settled = false;
        const req = mod.request(u, { method, headers: head, agent: agentFor(u.protocol) }, (res) => {
          const status = res.statusCode ?? 0;
          const out = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (v === undefined) continue;
            for (const one of Array.isArray(v) ? v : [v]) out.append(k, one);
          }
          let stream: ReadableStream<Uint8Array> | null = null;
          if (NULL_BODY.has(status)) res.resume();
          else {
            stream = new ReadableStream<Uint8Array>({
              start(c) {
                res.on("data", (b: Uint8Array) => {
                  c.enqueue(new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
                  if ((c.desiredSize ?? 1) <= 0) res.pause();
                });
                res.on("end", () => {
                  try {
                    c.close();
                  } catch { /* cancelled */ }
                });
                res.on("error", (e: Error) => {
                  try {
                    c.error(new TypeError(`response body failed (${e.message})`));
                  } catch { /* cancelled */ }
                });
              },
              pull() {
                res.resume();
              },
              cancel() {
                res.destroy();
              },
            });
          }
          settled = true;
          signal.removeEventListener("abort", onAbort);
          resolve(new Response(stream, { status, statusText: res.statusMessage ?? "", headers: out }));
        });
        const onAbort = () => {
          req.destroy();
          if (!settled) reject(signal.reason);
        };
        signal.addEventListener("abort", onAbort, { once: true });
        req.on("error", (e: Error) => {
          signal.removeEventListener("abort", onAbort);
          if (settled) return;
          settled = true;
          reject(signal.aborted ? signal.reason : new TypeError(`${e.message}`, { cause: e }));
        });
        req.end(body);
      });
    },
  };
}
