/**
 * HTTP(S) as a read-only {@linkcode ObjectStore}: any static server that honours `Range`
 * (nginx, a CDN, S3 or GCS public buckets, `Deno.serve` with a file handler).
 *
 * @module
 */
import { checkOptionNames } from "../format/_options.ts";
import { connectFailure, endpointOf, failureText } from "./_network.ts";
import { HTTP_OPTION_NAMES } from "./_storage_options.ts";
import { checkKey, checkRange, clipRange } from "./_validate.ts";
import { iterate, readableFrom } from "../format/_streams.ts";
import {
  type ByteRange,
  type GetOptions,
  type GetResult,
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  type ObjectWriter,
  StoreUnreachableError,
} from "./types.ts";
import { withArticle } from "../format/_article.ts";

/** Options for {@linkcode HttpStore}. */
export interface HttpStoreOptions {
  /**
   * The `fetch` to use (one that adds authentication, say).
   *
   * @default {globalThis.fetch}
   */
  fetch?: typeof fetch;
  /** Headers sent with every request (an `Authorization` header, say). */
  headers?: HeadersInit;
  /**
   * A query string added to every request, such as the signature of a pre-signed URL
   * (`?X-Amz-Signature=…`).
   *
   * @default {""}
   */
  search?: string;
}

/**
 * A server answered with a status that is not a success (and not a 404, which is an
 * {@linkcode ObjectNotFoundError}).
 *
 * @example
 * ```ts
 * import { HttpStatusError } from "./http.ts";
 * import assert from "node:assert/strict";
 * const e = new HttpStatusError("https://host/x.ckpt", 503, "Service Unavailable");
 * assert.equal(e.status, 503);
 * assert.equal(e.message, "Cannot read https://host/x.ckpt: HTTP 503 Service Unavailable");
 * ```
 */
export class HttpStatusError extends Error {
  /** The URL requested. */
  readonly url: string;
  /** The HTTP status code. */
  readonly status: number;
  /**
   * Names the URL and the status.
   *
   * @param url the URL requested
   * @param status the status code
   * @param statusText the status text, if any
   */
  constructor(url: string, status: number, statusText = "") {
    super(`Cannot read ${url}: HTTP ${status}${statusText ? ` ${statusText}` : ""}`);
    this.name = "HttpStatusError";
    this.url = url;
    this.status = status;
  }
}

const CONTENT_RANGE = /^bytes (\d+)-(\d+)\/(\d+|\*)$/;
const UNSATISFIED_RANGE = /^bytes \*\/(\d+)$/;

/**
 * Parses a `Content-Range` header: `bytes FIRST-LAST/SIZE` (SIZE may be `*`) or, on a 416
 * answer, `bytes *\/SIZE`.
 *
 * @example
 * ```ts
 * import { parseContentRange } from "./http.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(parseContentRange("bytes 10-19/100"), { offset: 10, length: 10, size: 100 });
 * assert.deepEqual(parseContentRange("bytes *\/100"), { offset: undefined, length: 0, size: 100 });
 * assert.equal(parseContentRange("bytes 5-1/100"), undefined);
 * ```
 */
export function parseContentRange(
  header: string,
): { offset: number | undefined; length: number; size: number | undefined } | undefined {
  const m = CONTENT_RANGE.exec(header.trim());
  if (m) {
    const first = Number(m[1]);
    const last = Number(m[2]);
    const size = m[3] === "*" ? undefined : Number(m[3]);
    if (!Number.isSafeInteger(first) || !Number.isSafeInteger(last) || last < first) return undefined;
    if (size !== undefined && (!Number.isSafeInteger(size) || last >= size)) return undefined;
    return { offset: first, length: last - first + 1, size };
  }
  const u = UNSATISFIED_RANGE.exec(header.trim());
  if (u && Number.isSafeInteger(Number(u[1]))) return { offset: undefined, length: 0, size: Number(u[1]) };
  return undefined;
}

function rangeHeader(range: ByteRange): string {
  if ("suffix" in range) return `bytes=-${range.suffix}`;
  return range.length === undefined
    ? `bytes=${range.offset}-`
    : `bytes=${range.offset}-${range.offset + range.length - 1}`;
}

/** A body of exactly `length` bytes: more is cut off (and the rest cancelled), fewer is an error. */
function exactly(
  body: ReadableStream<Uint8Array>,
  skip: number,
  length: number,
  url: string,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let skipped = 0;
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      for (;;) {
        if (sent === length) {
          await reader.cancel().catch(() => {});
          c.close();
          return;
        }
        const r = await reader.read();
        if (r.done) {
          c.error(new SyntaxError(`Cannot read ${url}: the body ended after ${sent} of ${length} bytes`));
          return;
        }
        let chunk = r.value;
        if (skipped < skip) {
          const n = Math.min(skip - skipped, chunk.byteLength);
          skipped += n;
          chunk = chunk.subarray(n);
        }
        if (chunk.byteLength === 0) continue;
        chunk = chunk.subarray(0, length - sent);
        sent += chunk.byteLength;
        c.enqueue(chunk);
        return;
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/** The last `n` bytes of a body of unknown length, holding at most about `n` bytes. */
async function lastBytes(body: ReadableStream<Uint8Array>, n: number): Promise<[Uint8Array, number]> {
  const kept: Uint8Array[] = [];
  let keptBytes = 0;
  let total = 0;
  for await (const c of iterate(body)) {
    total += c.byteLength;
    kept.push(c);
    keptBytes += c.byteLength;
    while (kept.length > 0 && keptBytes - kept[0]!.byteLength >= n) keptBytes -= kept.shift()!.byteLength;
  }
  const all = new Uint8Array(keptBytes);
  let at = 0;
  for (const c of kept) {
    all.set(c, at);
    at += c.byteLength;
  }
  return [all.subarray(Math.max(0, keptBytes - n)), total];
}

/**
 * A read-only {@linkcode ObjectStore} over HTTP(S): `get` with `Range` (including a suffix
 * `bytes=-N`), `head` with `HEAD`. A server that ignores `Range` and sends the whole object (200)
 * is handled: the wanted bytes are cut out of the body and the rest cancelled, and
 * {@linkcode HttpStore.rangeIgnored} counts it. A 404 or 410 is an
 * {@linkcode ObjectNotFoundError}; another failure an {@linkcode HttpStatusError} naming the URL
 * and the status. An object's `version` is its `ETag` (else its `Last-Modified`). The write
 * methods and `list` throw a `TypeError`.
 *
 * @example
 * ```ts
 * import { HttpStore } from "./http.ts";
 * import assert from "node:assert/strict";
 * const data = new Uint8Array([1, 2, 3, 4, 5]);
 * const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
 *   const m = /^bytes=-(\d+)$/.exec(req.headers.get("range") ?? "");
 *   if (!m) return new Response(data);
 *   const n = Math.min(Number(m[1]), data.byteLength);
 *   return new Response(data.slice(data.byteLength - n), {
 *     status: 206,
 *     headers: { "content-range": `bytes ${data.byteLength - n}-${data.byteLength - 1}/${data.byteLength}` },
 *   });
 * });
 * const store = new HttpStore(`http://127.0.0.1:${server.addr.port}/files/`);
 * const r = await store.get("x.bin", { range: { suffix: 2 } });
 * assert.equal(r.info.size, 5);
 * assert.deepEqual(new Uint8Array(await new Response(r.body).arrayBuffer()), new Uint8Array([4, 5]));
 * await server.shutdown();
 * ```
 */
export class HttpStore implements ObjectStore {
  /** The base URL, ending in `/`; keys are resolved against it. */
  readonly url: string;
  /** Always false. */
  readonly writable = false;
  #fetch: typeof fetch;
  #headers: Headers;
  #search: string;
  #rangeIgnored = 0;
  #requests = 0;

  /**
   * A store whose keys are paths below `base`.
   *
   * @param base an `http:` or `https:` URL; a `/` is added when it lacks one
   */
  constructor(base: string | URL, options: HttpStoreOptions = {}) {
    checkOptionNames(options, HTTP_OPTION_NAMES, "Cannot open an HttpStore");
    let url: URL;
    try {
      url = new URL(base);
    } catch {
      throw new TypeError(`Cannot open an HttpStore at ${String(base)}: not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`Cannot open an HttpStore at ${url.href}: not an http: or https: URL`);
    }
    url.search = "";
    url.hash = "";
    this.url = url.href.endsWith("/") ? url.href : `${url.href}/`;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#headers = new Headers(options.headers);
    const search = options.search ?? "";
    this.#search = search === "" || search.startsWith("?") ? search : `?${search}`;
  }

  /** How many answers sent the whole object although a range was asked for. */
  get rangeIgnored(): number {
    return this.#rangeIgnored;
  }

  /** How many requests this store has made. */
  get requests(): number {
    return this.#requests;
  }

  #objectUrl(key: string): string {
    checkKey(key, this.url);
    return this.url + key.split("/").map(encodeURIComponent).join("/") + this.#search;
  }

  async #request(url: string, method: string, range: string | undefined, signal?: AbortSignal): Promise<Response> {
    const headers = new Headers(this.#headers);
    if (range) headers.set("range", range);
    // A transformed (compressed) body would make ranges and lengths meaningless.
    headers.set("accept-encoding", "identity");
    this.#requests++;
    try {
      return await this.#fetch(url, { method, headers, ...(signal ? { signal } : {}) });
    } catch (e) {
      if (signal?.aborted) throw e;
      const unreachable = connectFailure(e, url);
      if (unreachable !== undefined) throw new StoreUnreachableError(url, endpointOf(url), unreachable, { cause: e });
      throw new Error(`Cannot read ${url}: ${failureText(e)}`, { cause: e });
    }
  }

  #info(key: string, res: Response, size: number): ObjectInfo {
    const etag = res.headers.get("etag");
    const modified = res.headers.get("last-modified");
    const info: ObjectInfo = { key, size, version: etag ?? modified ?? "" };
    if (modified && !Number.isNaN(Date.parse(modified))) info.lastModified = new Date(modified);
    return info;
  }

  /** Reads an object or a range of it; see the class for how servers that ignore `Range` are handled. */
  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    const url = this.#objectUrl(key);
    const range = options.range;
    checkRange(range);
    const signal = options.signal;
    signal?.throwIfAborted();
    const empty = range !== undefined && ("suffix" in range ? range.suffix === 0 : range.length === 0);
    if (empty) {
      // HTTP cannot ask for zero bytes: learn the size instead.
      const info = await this.head(key);
      if (!info) throw new ObjectNotFoundError(url);
      const { offset } = clipRange(range, info.size);
      return { info, offset, length: 0, body: readableFrom<Uint8Array>([]) };
    }
    const res = await this.#request(url, "GET", range && rangeHeader(range), signal);
    if (res.status === 404 || res.status === 410) {
      await res.body?.cancel();
      throw new ObjectNotFoundError(url);
    }
    if (res.status === 416) {
      // Nothing of the range is in the object (it starts at or past the end): an empty body.
      await res.body?.cancel();
      const parsed = parseContentRange(res.headers.get("content-range") ?? "");
      const info = parsed?.size !== undefined ? this.#info(key, res, parsed.size) : await this.head(key);
      if (!info) throw new ObjectNotFoundError(url);
      const { offset, length } = clipRange(range, info.size);
      if (length !== 0) throw new SyntaxError(`Cannot read ${url}: HTTP 416 for a range the object holds`);
      return { info, offset, length: 0, body: readableFrom<Uint8Array>([]) };
    }
    if (res.status === 206) {
      const header = res.headers.get("content-range") ?? "";
      const parsed = parseContentRange(header);
      if (!parsed || parsed.offset === undefined) {
        await res.body?.cancel();
        throw new SyntaxError(
          `Cannot read ${url}: HTTP 206 with a missing or malformed Content-Range ${JSON.stringify(header)}`,
        );
      }
      let size = parsed.size;
      if (size === undefined) {
        const info = await this.head(key);
        if (!info) {
          await res.body?.cancel();
          throw new ObjectNotFoundError(url);
        }
        size = info.size;
      }
      const want = clipRange(range, size);
      if (parsed.offset !== want.offset || parsed.length !== want.length) {
        await res.body?.cancel();
        throw new SyntaxError(
          `Cannot read ${url}: asked for ${JSON.stringify(range)} of ${
            withArticle(`${size}-byte`)
          } object, the server sent ${header}`,
        );
      }
      return {
        info: this.#info(key, res, size),
        offset: want.offset,
        length: want.length,
        body: exactly(res.body ?? readableFrom<Uint8Array>([]), 0, want.length, url),
      };
    }
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new HttpStatusError(url, res.status, res.statusText);
    }
    // The whole object.
    if (range) this.#rangeIgnored++;
    const body = res.body ?? readableFrom<Uint8Array>([]);
    const declared = res.headers.get("content-length");
    const size = declared !== null && /^\d+$/.test(declared) ? Number(declared) : undefined;
    if (size === undefined) {
      if (range === undefined) {
        // No length given: read it all to know the size (what a full read needs anyway).
        const bytes = new Uint8Array(await new Response(body).arrayBuffer());
        return {
          info: this.#info(key, res, bytes.byteLength),
          offset: 0,
          length: bytes.byteLength,
          body: readableFrom([bytes]),
        };
      }
      if ("suffix" in range) {
        const [tail, total] = await lastBytes(body, range.suffix);
        return {
          info: this.#info(key, res, total),
          offset: total - tail.byteLength,
          length: tail.byteLength,
          body: readableFrom([tail]),
        };
      }
      const head = await this.head(key);
      if (!head) throw new ObjectNotFoundError(url);
      const want = clipRange(range, head.size);
      return {
        info: head,
        offset: want.offset,
        length: want.length,
        body: exactly(body, want.offset, want.length, url),
      };
    }
    const want = clipRange(range, size);
    if (want.length === 0) await body.cancel();
    return {
      info: this.#info(key, res, size),
      offset: want.offset,
      length: want.length,
      body: want.length === 0 ? readableFrom<Uint8Array>([]) : exactly(body, want.offset, want.length, url),
    };
  }

  /** Describes an object with a `HEAD` request (a one-byte `GET` where `HEAD` is refused). */
  async head(key: string): Promise<ObjectInfo | undefined> {
    const url = this.#objectUrl(key);
    const res = await this.#request(url, "HEAD", undefined);
    await res.body?.cancel();
    if (res.status === 404 || res.status === 410) return undefined;
    if (res.status === 405 || res.status === 501) {
      const r = await this.#request(url, "GET", "bytes=0-0");
      await r.body?.cancel();
      if (r.status === 404 || r.status === 410) return undefined;
      const parsed = parseContentRange(r.headers.get("content-range") ?? "");
      if ((r.status === 206 || r.status === 416) && parsed?.size !== undefined) return this.#info(key, r, parsed.size);
      const length = r.headers.get("content-length");
      if (r.status === 200 && length !== null && /^\d+$/.test(length)) return this.#info(key, r, Number(length));
      throw new HttpStatusError(url, r.status, r.statusText);
    }
    if (res.status !== 200) throw new HttpStatusError(url, res.status, res.statusText);
    const length = res.headers.get("content-length");
    if (length === null || !/^\d+$/.test(length)) {
      throw new SyntaxError(`Cannot read ${url}: HEAD gave no Content-Length`);
    }
    return this.#info(key, res, Number(length));
  }

  #readOnly(key: string, verb: string): Promise<never> {
    return Promise.reject(new TypeError(`Cannot ${verb} ${this.url}${String(key)}: an HTTP store is read-only`));
  }

  /** Throws a `TypeError`: an HTTP store is read-only. */
  put(key: string): Promise<ObjectInfo> {
    return this.#readOnly(key, "write");
  }

  /** Throws a `TypeError`: an HTTP store is read-only. */
  writer(key: string): Promise<ObjectWriter> {
    return this.#readOnly(key, "write");
  }

  /** Throws a `TypeError`: an HTTP store is read-only. */
  delete(key: string): Promise<void> {
    return this.#readOnly(key, "delete");
  }

  /** Throws a `TypeError`: HTTP has no listing. */
  // deno-lint-ignore require-yield
  async *list(): AsyncIterable<ObjectInfo> {
    throw new TypeError(`Cannot list ${this.url}: HTTP has no listing`);
  }
}
