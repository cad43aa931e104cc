/**
 * S3-compatible object storage (AWS S3, Ceph RGW, MinIO, R2, GCS's XML API) as an
 * {@linkcode ObjectStore}. Requests are signed with `aws4fetch` (SigV4 over `fetch`), so the same
 * code runs in Deno, Node and browsers.
 *
 * - Small objects go up in one PUT; {@linkcode S3Store.writer} streams a multipart upload holding at
 *   most `concurrency` parts of `partSize` bytes in flight (plus the one being filled), each sent
 *   with its Content-Length. A failed or aborted write aborts its multipart upload: nothing is
 *   left behind and the previous object stays.
 * - Conditional writes: `"create"` sends `If-None-Match: *`, `{ ifMatch }` sends `If-Match` with the
 *   ETag unquoted (Ceph RGW refuses a quoted one). A failed condition is a
 *   {@linkcode PreconditionFailedError}, unless the object holds exactly the bytes being written:
 *   a write whose answer was lost, retried, fails the condition it changed itself.
 * - Transient failures (connection errors, 500, 502, 503, 504, 429, SlowDown, timeouts) are
 *   retried with exponential backoff and full jitter, `retries` times; a part's bytes are kept
 *   until the store acknowledges them, so a retried part is sent whole again.
 *
 * @module
 */

import { thisProcess } from "../runtime/process.ts";
// deno-lint-ignore no-import-prefix -- by full specifier, so the module loads without this repo's deno.json
import { AwsClient } from "npm:aws4fetch@1.0.20";
import { type BodySender, nodeBodySender } from "./_node_http.ts";
import { blockedPort, connectFailure, endpointOf, failureText } from "./_network.ts";
import { checkS3Options } from "./_storage_options.ts";
import { type AwsSettings, awsSettings } from "./_aws_config.ts";
import { DEFAULT_S3_PART_SIZE, DEFAULT_S3_READ_CONCURRENCY } from "./_s3_defaults.ts";
import { ResumableBody } from "./_s3_body.ts";
import { checkKey, checkPrefix, checkRange } from "./_validate.ts";
import {
  type GetOptions,
  type GetResult,
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  type ObjectWriter,
  PreconditionFailedError,
  type PutOptions,
  StoreUnreachableError,
  type WriteOptions,
} from "./types.ts";

export { DEFAULT_S3_PART_SIZE } from "./_s3_defaults.ts";
/** Default number of parts uploaded at once. */
export const DEFAULT_S3_CONCURRENCY = 4;
/** Default number of times a failed request is retried. */
export const DEFAULT_S3_RETRIES = 5;
/** Default milliseconds a request may wait for its response, or a response body for its next bytes. */
export const DEFAULT_S3_TIMEOUT_MS = 60_000;

/** The most S3 accepts in one PUT, and the most parts in one multipart upload. */
const MAX_SINGLE_PUT = 5 * 1024 ** 3;
const MAX_PARTS = 10_000;
const BACKOFF_BASE_MS = 100;
const BACKOFF_CAP_MS = 5_000;

/** Credentials for signing requests. */
export interface S3Credentials {
  /** The access key id (`AWS_ACCESS_KEY_ID`). */
  accessKeyId: string;
  /** The secret access key (`AWS_SECRET_ACCESS_KEY`). */
  secretAccessKey: string;
  /** A session token for temporary credentials (`AWS_SESSION_TOKEN`). */
  sessionToken?: string;
}

/** Options for {@linkcode S3Store}. */
export interface S3StoreOptions {
  /** The bucket. */
  bucket: string;
  /** A key prefix every key is relative to (`run/a` holds `run/a/...`). @default {""} */
  prefix?: string;
  /**
   * The S3 endpoint, for S3-compatible stores (`http://127.0.0.1:7480`); requests then use
   * path-style addressing (`endpoint/bucket/key`). Without one, AWS S3 in `region`, with
   * virtual-hosted addressing.
   *
   * @default {AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else the profile's endpoint_url in ~/.aws/config, else AWS S3}
   */
  endpoint?: string;
  /**
   * The signing region.
   *
   * @default {AWS_REGION, AWS_DEFAULT_REGION, else the profile's region in ~/.aws/config, else "us-east-1"}
   */
  region?: string;
  /**
   * The credentials to sign with.
   *
   * @default {AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from the environment, else the profile's keys in ~/.aws/credentials, else in ~/.aws/config}
   */
  credentials?: S3Credentials;
  /**
   * The profile of the shared AWS files (`~/.aws/credentials`, `~/.aws/config`, or the files
   * AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE name) to read what is not given here or in
   * the environment; a named profile that neither file holds is a `TypeError`.
   *
   * @default {AWS_PROFILE, else "default"}
   */
  profile?: string;
  /** Bytes per multipart part. @default {DEFAULT_S3_PART_SIZE} */
  partSize?: number;
  /** Parts uploaded at once by one writer. @default {DEFAULT_S3_CONCURRENCY} */
  concurrency?: number;
  /**
   * Ranged GETs of `partSize` bytes a whole-checkpoint load keeps in flight at once, each written
   * straight into its tensor's buffer (`src/storage/object_reader.ts`); 1 reads the object in one
   * GET, streamed into the tensors' buffers. Raise it for a store across a network, where one
   * connection is slower than the link (AWS S3 serves each connection at a fraction of what an
   * instance can take in); on a store that shares the machine's cores (a local Ceph RGW), one GET
   * costs the least CPU and was fastest (docs/performance.md).
   *
   * @default {1}
   */
  readConcurrency?: number;
  /** Times a request that failed transiently is retried. @default {DEFAULT_S3_RETRIES} */
  retries?: number;
  /**
   * Milliseconds a request may wait for its response headers, and a response body for its next
   * bytes, before it counts as failed (and is retried). @default {DEFAULT_S3_TIMEOUT_MS}
   */
  timeout?: number;
  /** Keys per ListObjectsV2 and ListMultipartUploads request (S3 gives at most 1000). @default {1000} */
  listPageSize?: number;
  /** The `fetch` to send requests with (to count or intercept them). @default {globalThis.fetch} */
  fetch?: typeof fetch;
}

/** What {@linkcode S3Error} is told. */
export interface S3ErrorInit extends ErrorOptions {
  /** The operation (`PUT`, `UploadPart 3 of`, ...). */
  operation: string;
  /** The HTTP status, or 0 when no response came. @default {0} */
  status?: number;
  /** The S3 error code. @default {""} */
  code?: string;
  /** More words, if any. @default {""} */
  detail?: string;
}

/**
 * An S3 request that failed: names the object, the HTTP status and the S3 error code.
 *
 * @example
 * ```ts
 * import { S3Error } from "./s3.ts";
 * import assert from "node:assert/strict";
 * const e = new S3Error("s3://bucket/run/a.ckpt", { operation: "PUT", status: 403, code: "AccessDenied" });
 * assert.equal(e.message, "Cannot PUT s3://bucket/run/a.ckpt: 403 AccessDenied");
 * assert.equal(e.code, "AccessDenied");
 * ```
 */
export class S3Error extends Error {
  /** The object's (or the bucket's) address. */
  readonly url: string;
  /** The HTTP status, or 0 when no response came (connection failure, timeout). */
  readonly status: number;
  /** The S3 error code (`NoSuchKey`, `SlowDown`, ...), or `""` when the response had none. */
  readonly code: string;
  /**
   * Describes a failed request.
   *
   * @param url the object's address
   * @param init the operation, the status, the S3 error code and more words
   */
  constructor(url: string, init: S3ErrorInit) {
    const status = init.status ?? 0;
    const code = init.code ?? "";
    const why = [status ? String(status) : "", code, init.detail ?? ""].filter((s) => s !== "").join(" ");
    super(`Cannot ${init.operation} ${url}: ${why}`, init.cause === undefined ? {} : { cause: init.cause });
    this.name = "S3Error";
    this.url = url;
    this.status = status;
    this.code = code;
  }
}

function env(name: string): string | undefined {
  return thisProcess.env(name); // undefined without --allow-env
}

/** Where requests go and who signs them. */
interface Signing {
  /** The bucket's URL, ending with `/`. */
  base: string;
  client: AwsClient;
}

/** The bucket's URL: path-style under an endpoint, else AWS S3's in `region`. */
function baseUrl(bucket: string, endpoint: string | undefined, region: string): string {
  if (endpoint) {
    let u: URL;
    try {
      u = new URL(endpoint);
    } catch {
      throw new TypeError(`Invalid S3 endpoint ${JSON.stringify(endpoint)}: not a URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new TypeError(`Invalid S3 endpoint ${endpoint}: expected http: or https:`);
    }
    return `${u.origin}${u.pathname.replace(/\/+$/, "")}/${encodeURIComponent(bucket)}/`;
  }
  if (bucket.includes(".")) return `https://s3.${region}.amazonaws.com/${encodeURIComponent(bucket)}/`;
  return `https://${bucket}.s3.${region}.amazonaws.com/`;
}

/** Why neither the environment nor the shared files gave credentials, and what to do. */
function noCredentials(shared: AwsSettings): string {
  const missing = [
    ...(env("AWS_ACCESS_KEY_ID") ? [] : ["AWS_ACCESS_KEY_ID"]),
    ...(env("AWS_SECRET_ACCESS_KEY") ? [] : ["AWS_SECRET_ACCESS_KEY"]),
  ];
  const denied = missing.filter((name) => !envReadable(name));
  const why = denied.length > 0
    ? `this process may not read ${denied.join(" and ")} (run with --allow-env)`
    : `${missing.join(" and ")} ${missing.length > 1 ? "are" : "is"} not set`;
  const files = shared.files.map((f) => f.state === "read" ? f.path : `${f.path} (${f.state})`);
  const inFiles = files.length > 0
    ? `, and profile "${shared.profile}" has no aws_access_key_id and aws_secret_access_key in ${files.join(" or ")}`
    : "";
  return `${why}${inFiles}; set them, or pass storage.s3.credentials (S3StoreOptions.credentials)`;
}

/** Whether the process may read the environment variable `name` (Deno asks; elsewhere it may). */
function envReadable(name: string): boolean {
  try {
    const query = globalThis.Deno?.permissions.querySync;
    return query === undefined || query({ name: "env", variable: name }).state === "granted";
  } catch {
    return true;
  }
}

/** What a refused (403) request should make the caller check, by S3 error code. */
function refusedHint(code: string): string {
  switch (code) {
    case "InvalidAccessKeyId":
      return "the store does not know this access key id: check AWS_ACCESS_KEY_ID or storage.s3.credentials";
    case "SignatureDoesNotMatch":
      return "the signature does not match: check the secret key (AWS_SECRET_ACCESS_KEY or storage.s3.credentials) and the region";
    case "RequestTimeTooSkewed":
      return "this machine's clock is too far from the store's: set the clock right (requests are signed with the time)";
    case "ExpiredToken":
    case "InvalidToken":
      return "the session token expired or is not valid: get fresh credentials (AWS_SESSION_TOKEN)";
    default:
      return "the store refused the request: check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), this machine's clock, and the bucket's policy";
  }
}

function positiveInt(value: number, name: string, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`Invalid S3StoreOptions.${name}: expected an integer >= ${min}, got ${value}`);
  }
  return value;
}

/** `"abc"` → `abc`; RGW wants If-Match unquoted, and versions compare as plain strings. */
function unquote(etag: string | null): string {
  if (etag === null) return "";
  const e = etag.startsWith("W/") ? etag.slice(2) : etag;
  return e.length >= 2 && e.startsWith('"') && e.endsWith('"') ? e.slice(1, -1) : e;
}

function xmlUnescape(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);/g, (_, e: string) => {
    switch (e) {
      case "amp":
        return "&";
      case "lt":
        return "<";
      case "gt":
        return ">";
      case "quot":
        return '"';
      case "apos":
        return "'";
      default:
        return String.fromCodePoint(e[1] === "x" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
    }
  });
}

function xmlEscape(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The text of the first `<tag>` in `xml`, unescaped, or `undefined`. */
function xmlTag(xml: string, tag: string): string | undefined {
  const m = xml.match(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`));
  return m ? xmlUnescape(m[1]!) : undefined;
}

/** Every `<tag>...</tag>` block in `xml`. */
function xmlBlocks(xml: string, tag: string): string[] {
  return [...xml.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, "g"))].map((m) => m[1]!);
}

function encodeKey(key: string): string {
  return key.split("/").map(encodeURIComponent).join("/");
}

/** Why a request failed, and whether trying again may help. */
class Attempt extends Error {
  constructor(
    readonly retryable: boolean,
    readonly status: number,
    readonly code: string,
    detail: string,
    options?: ErrorOptions,
    /** Set when no connection could be made: why, in a few words. */
    readonly unreachable?: string,
  ) {
    super(detail, options);
  }
}

const RETRY_STATUS = new Set([429, 500, 502, 503, 504]);
const RETRY_CODES = new Set(["SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling"]);

interface RequestSpec {
  method: string;
  /** The key relative to the bucket (with the store's prefix), or `""` for the bucket. */
  path: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: Uint8Array;
  /** Statuses that are not errors (besides 2xx). */
  accept?: number[];
  /** What the error message calls the operation. */
  what: string;
  /** Retries for this request. @default {the store's} */
  retries?: number;
  signal?: AbortSignal | undefined;
}

/**
 * An {@linkcode ObjectStore} over S3-compatible object storage.
 *
 * @example Save and read back an object (needs an S3 endpoint, such as `deno task store:start`)
 * ```ts ignore
 * import { S3Store } from "./s3.ts";
 * const store = new S3Store({ bucket: "ckpt", prefix: "runs/a" });
 * await store.put("hello.txt", new TextEncoder().encode("hello"));
 * const { body } = await store.get("hello.txt", { range: { suffix: 4 } });
 * console.log(await new Response(body).text()); // "ello"
 * ```
 *
 * @example Options are checked when the store is made
 * ```ts
 * import { S3Store } from "./s3.ts";
 * import assert from "node:assert/strict";
 * const store = new S3Store({
 *   bucket: "ckpt",
 *   prefix: "runs/a",
 *   endpoint: "http://127.0.0.1:7480",
 *   credentials: { accessKeyId: "id", secretAccessKey: "secret" },
 * });
 * assert.equal(store.url, "s3://ckpt/runs/a/");
 * assert.throws(() => new S3Store({ bucket: "ckpt", partSize: 0 }), RangeError);
 * ```
 */
export class S3Store implements ObjectStore {
  /** `s3://bucket/prefix/`. */
  readonly url: string;
  /** Always true. */
  readonly writable = true;
  /** Ranged GETs of `partSize` a whole load keeps in flight; 1: one GET (`S3StoreOptions.readConcurrency`). */
  readonly ranged: { concurrency: number; partSize: number };
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #partSize: number;
  readonly #concurrency: number;
  readonly #retries: number;
  readonly #timeout: number;
  readonly #fetch: typeof fetch;
  /** node:http for request bodies (no copy, a Content-Length), where the runtime has it and no `fetch` was given. */
  #sender: Promise<BodySender | undefined> | undefined;
  readonly #pageSize: number;
  readonly #given: Pick<S3StoreOptions, "endpoint" | "region" | "credentials" | "profile">;
  /** The address and the signer, resolved on first use (the shared files are read then). */
  #signing: Promise<Signing> | undefined;

  /**
   * A store on a bucket (and a prefix in it). Checks the options; sends nothing.
   *
   * @param options where the objects are and how to reach them
   */
  constructor(options: S3StoreOptions) {
    checkS3Options(options, "Invalid S3StoreOptions");
    const { bucket } = options;
    if (typeof bucket !== "string" || !/^[a-z0-9][a-z0-9.\-_]{1,254}$/i.test(bucket)) {
      throw new TypeError(`Invalid S3StoreOptions.bucket: ${JSON.stringify(bucket)} is not a bucket name`);
    }
    let prefix = options.prefix ?? "";
    prefix = prefix.replace(/^\/+/, "");
    if (prefix !== "" && !prefix.endsWith("/")) prefix += "/";
    if (prefix !== "") checkPrefix(prefix, `s3://${bucket}/`);
    this.#bucket = bucket;
    this.#prefix = prefix;
    this.url = `s3://${bucket}/${prefix}`;
    this.#partSize = positiveInt(options.partSize ?? DEFAULT_S3_PART_SIZE, "partSize", 1);
    this.#concurrency = positiveInt(options.concurrency ?? DEFAULT_S3_CONCURRENCY, "concurrency", 1);
    this.#retries = positiveInt(options.retries ?? DEFAULT_S3_RETRIES, "retries", 0);
    this.ranged = {
      concurrency: positiveInt(options.readConcurrency ?? DEFAULT_S3_READ_CONCURRENCY, "readConcurrency", 1),
      partSize: this.#partSize,
    };
    this.#timeout = positiveInt(options.timeout ?? DEFAULT_S3_TIMEOUT_MS, "timeout", 1);
    this.#pageSize = positiveInt(options.listPageSize ?? 1000, "listPageSize", 1);
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    // A fetch of the caller's sees every request, bodies included.
    if (options.fetch !== undefined) this.#sender = Promise.resolve(undefined);
    // An endpoint given or in the environment is checked now; one from ~/.aws/config on first use.
    const endpoint = options.endpoint ?? (env("AWS_ENDPOINT_URL_S3") || env("AWS_ENDPOINT_URL"));
    if (endpoint) baseUrl(bucket, endpoint, "");
    if (options.profile !== undefined && (typeof options.profile !== "string" || options.profile === "")) {
      throw new TypeError(`Invalid S3StoreOptions.profile: ${JSON.stringify(options.profile)} is not a profile name`);
    }
    this.#given = options;
  }

  /**
   * The address and the signer, made on first use (so a store can be described without
   * credentials) from the options, the environment and the shared AWS files. Missing credentials
   * or a missing named profile are configuration errors: a `TypeError` at once, never retried.
   */
  #signer(): Promise<Signing> {
    if (this.#signing === undefined) {
      this.#signing = this.#resolve();
      this.#signing.catch(() => this.#signing = undefined); // a fixed configuration is read again
    }
    return this.#signing;
  }

  async #resolve(): Promise<Signing> {
    const given = this.#given;
    const all = given.credentials !== undefined && given.region !== undefined && given.endpoint !== undefined;
    const shared = all ? undefined : await awsSettings({ env, profile: given.profile });
    const c = given.credentials ?? shared?.credentials;
    if (!c) throw new TypeError(`Cannot sign requests to ${this.url}: no credentials: ${noCredentials(shared!)}`);
    const region = given.region ?? shared?.region ?? "us-east-1";
    const client = new AwsClient({
      accessKeyId: c.accessKeyId,
      secretAccessKey: c.secretAccessKey,
      ...(c.sessionToken ? { sessionToken: c.sessionToken } : {}),
      service: "s3",
      region,
      retries: 0,
    });
    return { base: baseUrl(this.#bucket, given.endpoint ?? shared?.endpoint, region), client };
  }

  #where(key: string): string {
    return `s3://${this.#bucket}/${key}`;
  }

  /**
   * Sends a request, retrying transient failures. Resolves with a response whose status is 2xx or
   * in `accept`; its body is the caller's to read or cancel.
   */
  async #request(spec: RequestSpec): Promise<Response> {
    const { base, client: signer } = await this.#signer(); // a configuration error throws here, before any attempt
    const url = new URL(base + encodeKey(spec.path));
    for (const [k, v] of Object.entries(spec.query ?? {})) url.searchParams.set(k, v);
    const where = this.#where(spec.path);
    for (let attempt = 0;; attempt++) {
      spec.signal?.throwIfAborted();
      try {
        return await this.#attempt(signer, url, spec);
      } catch (e) {
        if (!(e instanceof Attempt)) throw e;
        if (!e.retryable || attempt >= (spec.retries ?? this.#retries)) {
          const tries = attempt > 0 ? ` (after ${attempt + 1} attempts)` : "";
          if (e.unreachable !== undefined) {
            throw new StoreUnreachableError(where, endpointOf(url), e.unreachable + tries, { cause: e.cause });
          }
          const detail = e.status === 403 ? [e.message, refusedHint(e.code)].filter((s) => s).join(": ") : e.message;
          throw new S3Error(where, {
            operation: spec.what,
            status: e.status,
            code: e.code,
            detail: detail + tries,
            cause: e.cause,
          });
        }
      }
      await sleep(Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt), spec.signal);
    }
  }

  async #attempt(signer: AwsClient, url: URL, spec: RequestSpec): Promise<Response> {
    const timer = new AbortController();
    const timeout = setTimeout(() => timer.abort(), this.#timeout);
    const signal = spec.signal ? AbortSignal.any([spec.signal, timer.signal]) : timer.signal;
    let res: Response;
    try {
      // Signed without the body (S3 takes UNSIGNED-PAYLOAD), which then goes to fetch directly:
      // a Request made with it would hold one more copy of every part in flight.
      const signed = await signer.sign(url.href, {
        method: spec.method,
        ...(spec.headers ? { headers: spec.headers } : {}),
      });
      const sender = spec.body ? await (this.#sender ??= nodeBodySender()) : undefined;
      if (sender && spec.body) {
        res = await sender.send(signed.url, { method: spec.method, headers: signed.headers, body: spec.body, signal });
      } else {
        const init: RequestInit = { method: spec.method, headers: signed.headers, signal };
        if (spec.body) init.body = spec.body as Uint8Array<ArrayBuffer>;
        res = await this.#fetch(signed.url, init);
      }
    } catch (e) {
      clearTimeout(timeout);
      if (spec.signal?.aborted) throw spec.signal.reason;
      if (timer.signal.aborted) {
        throw new Attempt(true, 0, "", `no response within ${this.#timeout} ms`, { cause: e });
      }
      if (e instanceof TypeError) {
        const unreachable = connectFailure(e, url);
        throw new Attempt(!blockedPort(e), 0, "", `request failed (${failureText(e)})`, { cause: e }, unreachable);
      }
      throw e;
    }
    clearTimeout(timeout);
    if ((res.status >= 200 && res.status < 300) || spec.accept?.includes(res.status)) return res;
    // An error: S3 describes it in an XML body (none for HEAD).
    let text = "";
    try {
      text = spec.method === "HEAD" ? "" : await res.text();
    } catch {
      // a body cut off: the status says enough
    }
    const code = xmlTag(text, "Code") ?? "";
    const message = xmlTag(text, "Message") ?? "";
    const retryable = RETRY_STATUS.has(res.status) || RETRY_CODES.has(code);
    throw new Attempt(retryable, res.status, code, message);
  }

  /**
   * Reads an object or a range of it (a suffix range fetches the last bytes without knowing the
   * size). The body errors with an {@linkcode S3Error} if the connection stalls for `timeout` ms.
   */
  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    checkKey(key, this.url);
    const { range, signal } = options;
    checkRange(range);
    const path = this.#prefix + key;
    let header: string | undefined;
    if (range !== undefined) {
      if ("suffix" in range) header = range.suffix > 0 ? `bytes=-${range.suffix}` : undefined;
      else if (range.length === undefined) header = `bytes=${range.offset}-`;
      else if (range.length > 0) header = `bytes=${range.offset}-${range.offset + range.length - 1}`;
      // Empty ranges: nothing to fetch but the object's description.
      if (header === undefined) return this.#emptyGet(key, range, signal);
    }
    const res = await this.#request({
      method: "GET",
      path,
      what: "GET",
      signal,
      accept: [404, 416],
      ...(header ? { headers: { range: header } } : {}),
    });
    if (res.status === 404) {
      // NoSuchKey is an absent object; NoSuchBucket and the like are errors of their own.
      const text = await res.text().catch(() => "");
      const code = xmlTag(text, "Code") ?? "";
      if (code !== "" && code !== "NoSuchKey") {
        throw new S3Error(this.#where(path), {
          operation: "GET",
          status: 404,
          code,
          detail: xmlTag(text, "Message") ?? "",
        });
      }
      throw new ObjectNotFoundError(this.#where(path));
    }
    if (res.status === 416) {
      // The range starts at or past the end (or the object is empty): an empty body, clipped.
      await res.body?.cancel();
      return this.#emptyGet(key, range!, signal);
    }
    const info = this.#info(key, res.headers);
    let offset = 0;
    let length = Number(res.headers.get("content-length"));
    if (res.status === 206) {
      const m = (res.headers.get("content-range") ?? "").match(/^bytes (\d+)-(\d+)\/(\d+)$/);
      if (!m) {
        await res.body?.cancel();
        throw new S3Error(this.#where(path), {
          operation: "GET",
          status: 206,
          detail: `unreadable Content-Range ${res.headers.get("content-range")}`,
        });
      }
      offset = Number(m[1]);
      length = Number(m[2]) - offset + 1;
      info.size = Number(m[3]);
    } else {
      info.size = length;
    }
    const body = this.#resumable(res, path, { offset, length, version: info.version }, signal);
    return { info, offset, length, body };
  }

  async #emptyGet(
    key: string,
    range: NonNullable<GetOptions["range"]>,
    signal: AbortSignal | undefined,
  ): Promise<GetResult> {
    signal?.throwIfAborted();
    const info = await this.head(key);
    if (!info) throw new ObjectNotFoundError(this.#where(this.#prefix + key));
    const offset = "suffix" in range ? info.size : Math.min(range.offset, info.size);
    return { info, offset, length: 0, body: new ReadableStream({ start: (c) => c.close() }) };
  }

  /**
   * The body of a GET of `length` bytes from `offset`, made resilient (src/storage/_s3_body.ts):
   * if no bytes come for `timeout` ms, or the connection fails, the rest is fetched again from
   * where it stopped (a range request with `If-Match`, so a changed object is an error, never a
   * splice), up to `retries` times in a row. A byte stream: a reader's own buffer is filled in place.
   */
  #resumable(
    first: Response,
    path: string,
    span: { offset: number; length: number; version: string },
    signal: AbortSignal | undefined,
  ): ReadableStream<Uint8Array> {
    const where = this.#where(path);
    const end = span.offset + span.length;
    return new ResumableBody(first.body, span, {
      timeout: this.#timeout,
      retries: this.#retries,
      signal,
      refetch: async (pos) => {
        const headers: Record<string, string> = { range: `bytes=${pos}-${end - 1}` };
        if (span.version !== "") headers["if-match"] = span.version;
        // One attempt: the body's own loop counts the failures.
        const res = await this.#request({
          method: "GET",
          path,
          headers,
          what: "GET",
          signal,
          accept: [412],
          retries: 0,
        });
        if (res.status === 412) {
          await res.body?.cancel();
          throw new S3Error(where, { operation: "GET", status: 412, detail: "the object changed while it was read" });
        }
        return res.body ?? undefined;
      },
      transient: (e) =>
        !(e instanceof S3Error) || e.status === 0 || RETRY_STATUS.has(e.status) || RETRY_CODES.has(e.code),
      exhausted: (pos, failures, e) =>
        new S3Error(where, {
          operation: "GET",
          detail: `the body failed at byte ${pos} (${
            e instanceof Error ? e.message : String(e)
          }) (after ${failures} attempts)`,
          cause: e,
        }),
      backoff: (failures) =>
        sleep(Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (failures - 1)), signal),
    }).stream();
  }

  #info(key: string, headers: Headers): ObjectInfo {
    const info: ObjectInfo = {
      key,
      size: Number(headers.get("content-length") ?? 0),
      version: unquote(headers.get("etag")),
    };
    const lm = headers.get("last-modified");
    if (lm) info.lastModified = new Date(lm);
    return info;
  }

  /** Describes an object, or gives `undefined` when there is none. */
  async head(key: string): Promise<ObjectInfo | undefined> {
    checkKey(key, this.url);
    const res = await this.#request({ method: "HEAD", path: this.#prefix + key, what: "HEAD", accept: [404] });
    await res.body?.cancel();
    return res.status === 404 ? undefined : this.#info(key, res.headers);
  }

  /**
   * Writes an object in one PUT. `"create"` sends `If-None-Match: *` and `{ ifMatch }` sends
   * `If-Match` with the version unquoted; a failed condition is a {@linkcode PreconditionFailedError}.
   */
  async put(key: string, data: Uint8Array, options: PutOptions = {}): Promise<ObjectInfo> {
    checkKey(key, this.url);
    if (!(data instanceof Uint8Array)) {
      throw new TypeError(`Cannot write ${this.#where(this.#prefix + key)}: data is not a Uint8Array`);
    }
    const mode = options.mode ?? "overwrite";
    if (data.byteLength > MAX_SINGLE_PUT) {
      if (mode !== "overwrite") {
        throw new RangeError(
          `Cannot write ${
            this.#where(this.#prefix + key)
          }: a conditional write holds at most ${MAX_SINGLE_PUT} bytes, got ${data.byteLength}`,
        );
      }
      const w = await this.writer(key, options.signal ? { signal: options.signal } : {});
      try {
        await w.write(data);
      } catch (e) {
        await w.abort(e);
        throw e;
      }
      return w.close();
    }
    return this.#putOnce(key, data, mode, options.signal);
  }

  async #putOnce(
    key: string,
    data: Uint8Array,
    mode: NonNullable<PutOptions["mode"]>,
    signal: AbortSignal | undefined,
  ): Promise<ObjectInfo> {
    const path = this.#prefix + key;
    const headers: Record<string, string> = { "content-type": "application/octet-stream" };
    if (mode === "create") headers["if-none-match"] = "*";
    else if (typeof mode === "object") {
      if (typeof mode.ifMatch !== "string" || mode.ifMatch === "") {
        throw new TypeError(`Cannot write ${this.#where(path)}: ifMatch must be a version string`);
      }
      headers["if-match"] = unquote(mode.ifMatch);
    } else if (mode !== "overwrite") {
      throw new TypeError(`Cannot write ${this.#where(path)}: unknown mode ${String(mode)}`);
    }
    const res = await this.#request({
      method: "PUT",
      path,
      what: "PUT",
      headers,
      body: data,
      signal,
      accept: [404, 409, 412],
    });
    const text = await res.text();
    if (res.status === 412 || res.status === 409 || (res.status === 404 && typeof mode === "object")) {
      // A write whose answer was lost may have been applied, and its retry (ours, or one the
      // HTTP client makes on its own, unseen) then fails the condition our own write changed. The
      // object holding exactly our bytes says so; another writer's would differ (a manager's
      // commit names its writer), or be the same write.
      const mine = await this.#holds(key, data, signal);
      if (mine) return mine;
      const why = mode === "create"
        ? "an object with that key already exists"
        : "the object changed (or was deleted) since version " + (typeof mode === "object" ? mode.ifMatch : "");
      throw new PreconditionFailedError(this.#where(path), why);
    }
    if (res.status === 404) {
      throw new S3Error(this.#where(path), {
        operation: "PUT",
        status: 404,
        code: xmlTag(text, "Code") ?? "",
        detail: xmlTag(text, "Message") ?? "",
      });
    }
    const info: ObjectInfo = { key, size: data.byteLength, version: unquote(res.headers.get("etag")) };
    if (info.version === "") return (await this.head(key)) ?? info;
    return info;
  }

  /** The object's description if it holds exactly `data`, else `undefined`. */
  async #holds(key: string, data: Uint8Array, signal: AbortSignal | undefined): Promise<ObjectInfo | undefined> {
    let got: GetResult;
    try {
      got = await this.get(key, signal ? { signal } : {});
    } catch (e) {
      if (e instanceof ObjectNotFoundError) return undefined;
      throw e;
    }
    if (got.info.size !== data.byteLength) {
      await got.body.cancel();
      return undefined;
    }
    const bytes = new Uint8Array(await new Response(got.body).arrayBuffer());
    for (let i = 0; i < bytes.byteLength; i++) if (bytes[i] !== data[i]) return undefined;
    return got.info;
  }

  /**
   * Starts a streaming write: up to one part is buffered, then sent as a multipart upload with at
   * most `concurrency` parts in flight. An object no bigger than one part goes up in one PUT. A
   * `sizeHint` above 10 000 parts (S3's limit) raises the part size to fit. Parts filled in the
   * caller's own memory go up without a copy: {@linkcode PartWriter.writePart}.
   */
  // deno-lint-ignore require-await
  async writer(key: string, options: WriteOptions = {}): Promise<ObjectWriter> {
    checkKey(key, this.url);
    options.signal?.throwIfAborted();
    const path = this.#prefix + key;
    return new S3Writer({
      url: this.#where(path),
      // A size hint past 10 000 parts of partSize raises the part size to fit.
      partSize: Math.max(this.#partSize, Math.ceil((options.sizeHint ?? 0) / MAX_PARTS)),
      concurrency: this.#concurrency,
      putWhole: (data, signal) => this.#putOnce(key, data, "overwrite", signal),
      create: (signal) => this.#createUpload(path, signal),
      part: (id, n, data, signal) => this.#uploadPart(path, id, n, data, signal),
      complete: (id, etags, size, signal) => this.#completeUpload(key, path, id, etags, size, signal),
      abort: (id) => this.#abortUpload(path, id),
    }, options.signal);
  }

  /** Deletes an object; an absent one is not an error. */
  async delete(key: string): Promise<void> {
    checkKey(key, this.url);
    const res = await this.#request({ method: "DELETE", path: this.#prefix + key, what: "DELETE", accept: [404] });
    await res.body?.cancel();
  }

  /** Every object whose key starts with `prefix`, in key order, paging through ListObjectsV2. */
  async *list(prefix = ""): AsyncIterable<ObjectInfo> {
    checkPrefix(prefix, this.url);
    let token: string | undefined;
    do {
      const query: Record<string, string> = {
        "list-type": "2",
        prefix: this.#prefix + prefix,
        "max-keys": String(this.#pageSize),
      };
      if (token !== undefined) query["continuation-token"] = token;
      const res = await this.#request({ method: "GET", path: "", query, what: "ListObjectsV2" });
      const xml = await res.text();
      for (const block of xmlBlocks(xml, "Contents")) {
        const full = xmlTag(block, "Key") ?? "";
        const info: ObjectInfo = {
          key: full.slice(this.#prefix.length),
          size: Number(xmlTag(block, "Size") ?? 0),
          version: unquote(xmlTag(block, "ETag") ?? ""),
        };
        const lm = xmlTag(block, "LastModified");
        if (lm) info.lastModified = new Date(lm);
        yield info;
      }
      token = xmlTag(xml, "IsTruncated") === "true" ? xmlTag(xml, "NextContinuationToken") : undefined;
    } while (token !== undefined);
  }

  /**
   * A presigned URL: anyone holding it may GET the object (with any `Range`) for `expires`
   * seconds, without credentials, so it can be handed to an HTTP reader or a browser.
   * Nothing is sent; the object need not exist yet.
   *
   * @example
   * ```ts
   * import { S3Store } from "./s3.ts";
   * import assert from "node:assert/strict";
   * const store = new S3Store({
   *   bucket: "ckpt",
   *   endpoint: "http://127.0.0.1:7480",
   *   credentials: { accessKeyId: "id", secretAccessKey: "secret" },
   * });
   * const url = new URL(await store.presign("runs/a/model.ckpt", { expires: 600 }));
   * assert.equal(url.pathname, "/ckpt/runs/a/model.ckpt");
   * assert.equal(url.searchParams.get("X-Amz-Expires"), "600");
   * ```
   */
  async presign(key: string, options: { expires?: number } = {}): Promise<string> {
    checkKey(key, this.url);
    const expires = positiveInt(options.expires ?? 3600, "expires", 1);
    const { base, client } = await this.#signer();
    const url = new URL(base + encodeKey(this.#prefix + key));
    url.searchParams.set("X-Amz-Expires", String(expires));
    const signed = await client.sign(url.href, { method: "GET", aws: { signQuery: true } } as RequestInit);
    return signed.url;
  }

  /** Aborts every incomplete multipart upload under `prefix` and says how many there were. */
  async sweep(prefix = ""): Promise<number> {
    checkPrefix(prefix, this.url);
    let count = 0;
    for (const { key, uploadId } of await this.uploads(prefix)) {
      await this.#abortUpload(this.#prefix + key, uploadId);
      count++;
    }
    return count;
  }

  /**
   * The incomplete multipart uploads under `prefix` (keys relative to the store), from
   * ListMultipartUploads.
   */
  async uploads(prefix = ""): Promise<{ key: string; uploadId: string }[]> {
    checkPrefix(prefix, this.url);
    const out: { key: string; uploadId: string }[] = [];
    let keyMarker: string | undefined;
    let idMarker: string | undefined;
    for (;;) {
      const query: Record<string, string> = {
        uploads: "",
        prefix: this.#prefix + prefix,
        "max-uploads": String(this.#pageSize),
      };
      if (keyMarker !== undefined) query["key-marker"] = keyMarker;
      if (idMarker !== undefined) query["upload-id-marker"] = idMarker;
      const res = await this.#request({ method: "GET", path: "", query, what: "ListMultipartUploads" });
      const xml = await res.text();
      for (const block of xmlBlocks(xml, "Upload")) {
        out.push({
          key: (xmlTag(block, "Key") ?? "").slice(this.#prefix.length),
          uploadId: xmlTag(block, "UploadId") ?? "",
        });
      }
      if (xmlTag(xml, "IsTruncated") !== "true") return out;
      keyMarker = xmlTag(xml, "NextKeyMarker");
      idMarker = xmlTag(xml, "NextUploadIdMarker");
    }
  }

  // The multipart protocol, for S3Writer.

  async #createUpload(path: string, signal: AbortSignal | undefined): Promise<string> {
    const res = await this.#request({
      method: "POST",
      path,
      query: { uploads: "" },
      headers: { "content-type": "application/octet-stream" },
      what: "CreateMultipartUpload",
      signal,
    });
    const id = xmlTag(await res.text(), "UploadId");
    if (!id) {
      throw new S3Error(this.#where(path), {
        operation: "CreateMultipartUpload",
        status: res.status,
        detail: "no UploadId in the response",
      });
    }
    return id;
  }

  /** Uploads one part; resolves with its ETag (quoted, as CompleteMultipartUpload wants it). */
  async #uploadPart(
    path: string,
    uploadId: string,
    part: number,
    data: Uint8Array,
    signal: AbortSignal | undefined,
  ): Promise<string> {
    const res = await this.#request({
      method: "PUT",
      path,
      query: { partNumber: String(part), uploadId },
      body: data,
      what: `UploadPart ${part} of`,
      signal,
    });
    // Read to its (empty) end rather than cancelled: a cancelled body closes its connection,
    // and every part then paid for a new one (TCP connect, a socket set up, 8 per 64 MiB).
    await res.arrayBuffer();
    const etag = res.headers.get("etag");
    if (!etag) {
      throw new S3Error(this.#where(path), {
        operation: `UploadPart ${part} of`,
        status: res.status,
        detail: "no ETag in the response",
      });
    }
    return etag;
  }

  async #completeUpload(
    key: string,
    path: string,
    uploadId: string,
    etags: string[],
    size: number,
    signal: AbortSignal | undefined,
  ): Promise<ObjectInfo> {
    const xml = "<CompleteMultipartUpload>" +
      etags.map((e, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${xmlEscape(e)}</ETag></Part>`).join("") +
      "</CompleteMultipartUpload>";
    const res = await this.#request({
      method: "POST",
      path,
      query: { uploadId },
      headers: { "content-type": "application/xml" },
      body: new TextEncoder().encode(xml),
      what: "CompleteMultipartUpload",
      signal,
    });
    // S3 may answer 200 and still fail, with an <Error> in the body.
    const text = await res.text();
    if (/<Error>/.test(text)) {
      throw new S3Error(this.#where(path), {
        operation: "CompleteMultipartUpload",
        status: res.status,
        code: xmlTag(text, "Code") ?? "",
        detail: xmlTag(text, "Message") ?? "",
      });
    }
    // Ceph RGW answers with an empty ETag; HEAD has the real one.
    const etag = unquote(xmlTag(text, "ETag") ?? "");
    if (etag !== "") return { key, size, version: etag };
    const info = await this.head(key);
    if (!info) {
      throw new S3Error(this.#where(path), {
        operation: "CompleteMultipartUpload",
        status: res.status,
        detail: "the object is not there after completing",
      });
    }
    return info;
  }

  /** Aborts a multipart upload (an absent one is not an error). */
  async #abortUpload(path: string, uploadId: string): Promise<void> {
    const res = await this.#request({
      method: "DELETE",
      path,
      query: { uploadId },
      what: "AbortMultipartUpload",
      accept: [404],
    });
    await res.body?.cancel();
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** What a writer needs of its store: one object's multipart protocol. */
interface Multipart {
  /** The object's address, for messages. */
  url: string;
  partSize: number;
  concurrency: number;
  putWhole(data: Uint8Array, signal: AbortSignal): Promise<ObjectInfo>;
  create(signal: AbortSignal | undefined): Promise<string>;
  part(uploadId: string, part: number, data: Uint8Array, signal: AbortSignal): Promise<string>;
  complete(uploadId: string, etags: string[], size: number, signal: AbortSignal): Promise<ObjectInfo>;
  abort(uploadId: string): Promise<void>;
}

/**
 * What an {@linkcode S3Store.writer} offers beyond {@linkcode ObjectWriter} (found by testing for
 * `writePart`; not in the public API): parts the caller fills in memory of its own go up as they
 * are, without the copy `write` makes into the writer's part buffers (a mirror's copy of a
 * committed file reads each part from the file straight into one of its buffers).
 */
export interface PartWriter extends ObjectWriter {
  /** Bytes of every part but the last. */
  readonly partSize: number;
  /** Parts in flight at most. */
  readonly concurrency: number;
  /**
   * Sends `part` as the next part, as it is: resolves once its upload is under way (at most
   * `concurrency` parts in flight), with `sent`, which resolves once the writer no longer reads
   * `part` (sent, or given up: a failure is reported by the next call and by `close`); until then
   * the caller leaves `part` unchanged. Every part but the last holds `partSize` bytes: a shorter
   * one is the last. Not after `write` left bytes buffered (a `TypeError`).
   */
  writePart(part: Uint8Array): Promise<{ sent: Promise<void> }>;
  /**
   * Starts the multipart upload now, for an object the caller knows takes more than one part:
   * its CreateMultipartUpload then overlaps the filling of the first part (a mirror's copy reads
   * it from the file meanwhile). A failure is reported by the next call, as a part's is.
   */
  begin(): void;
}

/** A streaming write: one part filling, at most `concurrency` parts in flight. */
class S3Writer implements PartWriter {
  readonly #mp: Multipart;
  readonly #abort = new AbortController();
  #buffer: Uint8Array | undefined;
  #filled = 0;
  #size = 0;
  /** A part shorter than partSize was given to writePart: it was the last. */
  #ended = false;
  #uploadId: Promise<string> | undefined;
  #etags: string[] = [];
  #inFlight = new Set<Promise<void>>();
  #spare: Uint8Array[] = [];
  #failure: { error: unknown } | undefined;
  #state: "open" | "closing" | "closed" | "aborted" = "open";
  #cleanup: Promise<void> | undefined;
  #cleanupError: { error: unknown } | undefined;

  constructor(mp: Multipart, signal: AbortSignal | undefined) {
    this.#mp = mp;
    signal?.addEventListener("abort", () => this.abort(signal.reason).catch(() => {}), { once: true });
  }

  get partSize(): number {
    return this.#mp.partSize;
  }

  get concurrency(): number {
    return this.#mp.concurrency;
  }

  /** Throws what stops a write (or, `closing`, a close). */
  #check(closing = false): void {
    if (this.#failure) throw this.#failure.error;
    if (this.#state !== "open") {
      throw new TypeError(`Cannot write ${this.#mp.url}: the writer is ${this.#state}`);
    }
    if (this.#ended && !closing) {
      throw new TypeError(`Cannot write ${this.#mp.url}: a part shorter than partSize was the last`);
    }
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.#check();
    let at = 0;
    while (at < chunk.byteLength) {
      this.#buffer ??= this.#spare.pop() ?? new Uint8Array(this.#mp.partSize);
      const n = Math.min(chunk.byteLength - at, this.#mp.partSize - this.#filled);
      this.#buffer.set(chunk.subarray(at, at + n), this.#filled);
      this.#filled += n;
      this.#size += n;
      at += n;
      if (this.#filled === this.#mp.partSize) await this.#sendFilled();
      this.#check();
    }
  }

  async writePart(part: Uint8Array): Promise<{ sent: Promise<void> }> {
    this.#check();
    if (!(part instanceof Uint8Array) || part.byteLength === 0 || part.byteLength > this.#mp.partSize) {
      throw new TypeError(`Cannot write ${this.#mp.url}: a part is 1 to ${this.#mp.partSize} bytes`);
    }
    if (this.#filled > 0) {
      throw new TypeError(`Cannot write ${this.#mp.url}: writePart after write left bytes of a part buffered`);
    }
    this.#ended = part.byteLength < this.#mp.partSize;
    this.#size += part.byteLength;
    const { sent } = await this.#sendPart(part, false);
    if (this.#failure) throw this.#failure.error;
    return { sent };
  }

  begin(): void {
    this.#check();
    this.#create();
  }

  /** Starts the multipart upload, once. */
  #create(): void {
    if (this.#uploadId !== undefined) return;
    // Not cancelled by an abort: a CreateMultipartUpload cut after the store acted on it would
    // leave an upload no one knows the id of. It completes (bounded by the request timeout), and
    // #discard then aborts the upload it made.
    this.#uploadId = this.#mp.create(undefined);
    this.#uploadId.catch(() => {}); // awaited by every part; seen there
  }

  /** Hands the full buffer to an upload (its buffer is reused once sent). */
  async #sendFilled(): Promise<void> {
    const data = this.#buffer!.subarray(0, this.#filled);
    this.#buffer = undefined;
    this.#filled = 0;
    await this.#sendPart(data, true);
  }

  /**
   * Starts the upload of `data` as the next part, after waiting for a free slot; `sent` resolves
   * once the upload no longer reads `data`. `recycle`: its buffer is one of the writer's, to fill
   * again once sent.
   */
  async #sendPart(data: Uint8Array, recycle: boolean): Promise<{ sent: Promise<void> }> {
    const part = this.#etags.length + 1;
    if (part > MAX_PARTS) {
      this.#fail(
        new RangeError(
          `Cannot write ${this.#mp.url}: more than ${MAX_PARTS} parts of ${this.#mp.partSize} bytes; raise partSize`,
        ),
      );
      return { sent: Promise.resolve() };
    }
    this.#etags.push("");
    this.#create();
    while (this.#inFlight.size >= this.#mp.concurrency) await Promise.race(this.#inFlight);
    if (this.#failure) return { sent: Promise.resolve() };
    const task = (async () => {
      try {
        const id = await this.#uploadId!;
        this.#etags[part - 1] = await this.#mp.part(id, part, data, this.#abort.signal);
        if (recycle && this.#spare.length <= this.#mp.concurrency) {
          this.#spare.push(new Uint8Array(data.buffer, data.byteOffset, this.#mp.partSize));
        }
      } catch (e) {
        this.#fail(e);
      }
    })();
    const tracked = task.finally(() => this.#inFlight.delete(tracked));
    this.#inFlight.add(tracked);
    return { sent: tracked };
  }

  /** Records the first failure and aborts the upload at once (the caller may never call abort). */
  #fail(error: unknown): void {
    if (this.#failure) return;
    this.#failure = { error };
    this.#cleanup ??= this.#discard().catch((e) => {
      this.#cleanupError = { error: e };
    });
  }

  /** Stops the parts in flight, then aborts the multipart upload, if one was started. */
  async #discard(): Promise<void> {
    this.#abort.abort(this.#failure?.error);
    await Promise.allSettled([...this.#inFlight]);
    this.#buffer = undefined;
    this.#spare = [];
    if (this.#uploadId === undefined) return;
    let id: string;
    try {
      id = await this.#uploadId;
    } catch {
      return; // never created
    }
    await this.#mp.abort(id);
  }

  async close(): Promise<ObjectInfo> {
    this.#check(true);
    this.#state = "closing";
    try {
      if (this.#etags.length === 0) {
        // Never filled a part: one PUT (and an upload begun for nothing is aborted).
        const data = this.#buffer?.subarray(0, this.#filled) ?? new Uint8Array(0);
        const info = await this.#mp.putWhole(data, this.#abort.signal);
        this.#buffer = undefined;
        this.#state = "closed";
        if (this.#uploadId !== undefined) await this.#mp.abort(await this.#uploadId).catch(() => {});
        return info;
      }
      if (this.#filled > 0) await this.#sendFilled();
      while (this.#inFlight.size > 0) await Promise.race(this.#inFlight);
      if (this.#failure) throw this.#failure.error;
      const info = await this.#mp.complete(
        await this.#uploadId!, // (a part was sent: the upload was created)
        this.#etags,
        this.#size,
        this.#abort.signal,
      );
      this.#state = "closed";
      return info;
    } catch (e) {
      this.#fail(e);
      this.#state = "aborted";
      await this.#cleanup;
      throw e;
    }
  }

  async abort(reason?: unknown): Promise<void> {
    if (this.#state === "closed") return;
    this.#state = "aborted";
    this.#fail(reason ?? new Error(`The write of ${this.#mp.url} was aborted`));
    await this.#cleanup;
    // The upload could not be aborted (the store is unreachable): say so, since its parts remain
    // until a sweep.
    if (this.#cleanupError) throw this.#cleanupError.error;
  }
}
