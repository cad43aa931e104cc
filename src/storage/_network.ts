// Which network failures mean "no connection could be made" (the store is unreachable), and
// the words for each, from the errors Deno's fetch, Node's fetch (undici) and node:http give:
// a TypeError("fetch failed") whose cause says "client error (Connect): tcp connect error:
// Connection refused (os error 111)" in Deno, a cause with `code: "ECONNREFUSED"` in Node.
// A port the Fetch standard blocks (1, 9, 6000, ...: https://fetch.spec.whatwg.org/#bad-port)
// is refused before any connection: "Requests to port 9 are blocked" in Deno, a TypeError("fetch
// failed") whose cause says only "bad port" in Node.

const CODES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "no such host",
  EAI_AGAIN: "no such host (name lookup failed)",
  EHOSTUNREACH: "no route to host",
  ENETUNREACH: "network unreachable",
  UND_ERR_CONNECT_TIMEOUT: "connect timed out",
  ETIMEDOUT: "connect timed out",
};

const WORDS: [RegExp, string][] = [
  [/connection refused/i, "connection refused"],
  [/dns error|failed to lookup address|name or service not known|nodename nor servname/i, "no such host"],
  [/no route to host/i, "no route to host"],
  [/network is unreachable/i, "network unreachable"],
  [/\(Connect\)|tcp connect error|connect timed out/i, "could not connect"],
];

/** The errors in `e`'s cause chain, outermost first. */
function chain(e: unknown): unknown[] {
  const out: unknown[] = [];
  for (let x = e; x !== undefined && x !== null && out.length < 8; x = (x as { cause?: unknown }).cause) out.push(x);
  return out;
}

const BLOCKED_PORT = /\bbad port\b|requests to port \d+ are blocked/i;

/** Whether `e` is `fetch` refusing a port the Fetch standard blocks: no retry can help. */
export function blockedPort(e: unknown): boolean {
  return chain(e).some((x) => BLOCKED_PORT.test(x instanceof Error ? x.message : String(x)));
}

/** The messages of `e` and its causes, joined: `fetch failed: bad port`. */
export function failureText(e: unknown): string {
  const words: string[] = [];
  for (const x of chain(e)) {
    const message = x instanceof Error ? x.message : String(x);
    if (message !== "" && !words.includes(message)) words.push(message);
  }
  return words.join(": ");
}

/**
 * Why no connection was made, in a few words (`connection refused`, `no such host`), when `e` is
 * a failure to connect to `url`; `undefined` for anything else (a reset mid-request, an abort, a bug).
 */
export function connectFailure(e: unknown, url?: string | URL): string | undefined {
  if (blockedPort(e)) {
    const port = url === undefined ? "" : ` ${new URL(url).port}`;
    return `fetch refuses port${port}, one the Fetch standard blocks (https://fetch.spec.whatwg.org/#bad-port): serve the store on another port`;
  }
  for (const x of chain(e)) {
    const code = (x as { code?: unknown }).code;
    if (typeof code === "string" && Object.hasOwn(CODES, code)) return CODES[code];
  }
  for (const x of chain(e)) {
    const message = x instanceof Error ? x.message : String(x);
    for (const [pattern, words] of WORDS) if (pattern.test(message)) return words;
  }
  return undefined;
}

/** `https://host:port` of a URL: the server a request went to. */
export function endpointOf(url: string | URL): string {
  try {
    return new URL(url).origin;
  } catch {
    return String(url);
  }
}
