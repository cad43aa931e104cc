// A fault-injecting TCP proxy on 127.0.0.1, between an HTTP client and a server (RGW). It reads
// each request's head and Content-Length body from the client side, so it can act per request:
// pass it on, cut the connection after part of the body (a reset mid-part) or part of the
// response (a reset mid-download), answer 503 or SlowDown itself, or hold it without answering
// (a stall, for timeouts). Responses are relayed
// as bytes; clients send one request at a time per connection, so the framing stays simple.

/** What the proxy saw of one request. */
export interface SeenRequest {
  method: string;
  /** Path and query, as sent. */
  target: string;
  query: URLSearchParams;
  /** Body bytes the request declared. */
  length: number;
  /** The Range header, if any. */
  range?: string;
}

/** What to do with a request. */
export type FaultAction =
  | "pass"
  /** Forward half the body, then drop both connections. */
  | "reset"
  /** Read the whole request, answer 503 Service Unavailable, close. */
  | "503"
  /** Read the whole request, answer 503 with the S3 code SlowDown, close. */
  | "slowdown"
  /** Read the whole request and never answer (until the proxy closes). */
  | "stall"
  /** Read the whole request and forward it once {@linkcode FaultProxy.release} was called. */
  | "hold"
  /** Forward the request, relay the first 64 KiB of the response, then drop both connections. */
  | "cut"
  /**
   * Forward the request; when the server answers, drop both connections without relaying a byte
   * (a response lost after the store applied the request).
   */
  | "lose";

/** Decides per request; `"pass"` when it returns nothing. */
export type FaultRule = (request: SeenRequest) => FaultAction | undefined;

const enc = new TextEncoder();
const CUT_AFTER = 64 * 1024;

function errorResponse(code: string): Uint8Array {
  const body =
    `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>injected by the test proxy</Message></Error>`;
  return enc.encode(
    `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: ${body.length}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  );
}

/** Reads from a connection with a pending buffer, so requests can be framed. */
class Framer {
  #pending = new Uint8Array(0);
  constructor(readonly conn: Deno.Conn) {}

  async #more(): Promise<boolean> {
    const buf = new Uint8Array(64 * 1024);
    const n = await this.conn.read(buf);
    if (n === null) return false;
    const joined = new Uint8Array(this.#pending.length + n);
    joined.set(this.#pending);
    joined.set(buf.subarray(0, n), this.#pending.length);
    this.#pending = joined;
    return true;
  }

  /** The bytes of a request head (through the blank line), or null at a clean end. */
  async head(): Promise<Uint8Array | null> {
    for (;;) {
      const i = findBlankLine(this.#pending);
      if (i >= 0) {
        const head = this.#pending.slice(0, i + 4);
        this.#pending = this.#pending.slice(i + 4);
        return head;
      }
      if (!(await this.#more())) return null;
    }
  }

  /** Up to `n` bytes of body (fewer when the connection ends). */
  async take(n: number): Promise<Uint8Array> {
    while (this.#pending.length < n) {
      if (!(await this.#more())) break;
    }
    const out = this.#pending.slice(0, n);
    this.#pending = this.#pending.slice(out.length);
    return out;
  }
}

function findBlankLine(b: Uint8Array): number {
  for (let i = 0; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
}

/** A running proxy: point the client at `endpoint`. */
export class FaultProxy {
  readonly endpoint: string;
  /** Every request seen, with what was done to it. */
  readonly log: { request: SeenRequest; action: FaultAction }[] = [];
  rule: FaultRule = () => "pass";
  /** Connections clients opened to the proxy so far. */
  connections = 0;
  readonly #listener: Deno.Listener;
  readonly #upstream: { hostname: string; port: number };
  readonly #conns = new Set<Deno.Conn>();
  readonly #tasks = new Set<Promise<void>>();
  #accepting: Promise<void>;
  #closed = Promise.withResolvers<void>();
  #released = Promise.withResolvers<void>();

  constructor(upstream: string) {
    const u = new URL(upstream);
    this.#upstream = { hostname: u.hostname, port: Number(u.port || 80) };
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.endpoint = `http://127.0.0.1:${(this.#listener.addr as Deno.NetAddr).port}`;
    this.#accepting = this.#accept();
  }

  /** Lets held requests (and any held later) go on to the server. */
  release(): void {
    this.#released.resolve();
  }

  /** How many requests were met with `action`. */
  count(action: FaultAction): number {
    return this.log.filter((l) => l.action === action).length;
  }

  async #accept(): Promise<void> {
    for (;;) {
      let client: Deno.Conn;
      try {
        client = await this.#listener.accept();
      } catch {
        return; // closed
      }
      this.connections++;
      const t = this.#serve(client).catch(() => {}).finally(() => this.#tasks.delete(t));
      this.#tasks.add(t);
    }
  }

  #track(conn: Deno.Conn): Deno.Conn {
    this.#conns.add(conn);
    return conn;
  }

  #drop(...conns: (Deno.Conn | undefined)[]): void {
    for (const c of conns) {
      if (c && this.#conns.delete(c)) {
        try {
          c.close();
        } catch {
          // already closed
        }
      }
    }
  }

  async #serve(client: Deno.Conn): Promise<void> {
    this.#track(client);
    const from = new Framer(client);
    let server: Deno.Conn | undefined;
    let relay: Promise<void> | undefined;
    const cut: { after?: number } = {};
    try {
      for (;;) {
        const head = await from.head();
        if (head === null) return;
        const text = new TextDecoder().decode(head);
        const [method = "", target = ""] = text.split("\r\n", 1)[0]!.split(" ");
        const length = Number(text.match(/\r\ncontent-length:\s*(\d+)/i)?.[1] ?? 0);
        const request: SeenRequest = {
          method,
          target,
          query: new URL(target, "http://x").searchParams,
          length,
        };
        const range = text.match(/\r\nrange:\s*([^\r]*)/i)?.[1];
        if (range !== undefined) request.range = range;
        const action = this.rule(request) ?? "pass";
        this.log.push({ request, action });
        if (action === "503" || action === "slowdown") {
          await from.take(length);
          await writeAll(client, errorResponse(action === "503" ? "ServiceUnavailable" : "SlowDown"));
          return;
        }
        if (action === "stall") {
          await from.take(length);
          await this.#closed.promise; // never answers, until the proxy closes
          return;
        }
        // A held request is read whole first, as a stalled one is, then waits for release().
        const held = action === "hold" ? await from.take(length) : undefined;
        if (action === "hold") await Promise.race([this.#released.promise, this.#closed.promise]);
        if (!server) {
          server = this.#track(await Deno.connect(this.#upstream));
          relay = this.#relay(server, client, cut).catch(() => {});
        }
        if (action === "cut") cut.after = CUT_AFTER;
        if (action === "lose") cut.after = 0;
        await writeAll(server, head);
        if (action === "reset") {
          await writeAll(server, await from.take(Math.floor(length / 2)));
          return;
        }
        await writeAll(server, held ?? await from.take(length));
      }
    } finally {
      this.#drop(client, server);
      await relay;
    }
  }

  /** Responses flow back as bytes, up to `cut.after` of them when set. */
  async #relay(server: Deno.Conn, client: Deno.Conn, cut: { after?: number }): Promise<void> {
    const buf = new Uint8Array(64 * 1024);
    for (;;) {
      const n = await server.read(buf);
      if (n === null) return;
      const out = buf.subarray(0, n);
      if (cut.after !== undefined && out.length >= cut.after) {
        await writeAll(client, out.subarray(0, cut.after));
        this.#drop(client, server);
        return;
      }
      if (cut.after !== undefined) cut.after -= out.length;
      await writeAll(client, out);
    }
  }

  /** Stops listening and cuts every connection. */
  async close(): Promise<void> {
    this.#listener.close();
    this.#closed.resolve();
    await this.#accepting;
    this.#drop(...this.#conns);
    await Promise.allSettled([...this.#tasks]);
  }
}
