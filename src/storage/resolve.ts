/**
 * Addresses to stores: where a path is accepted, so are `file:` URLs, `http(s)://` URLs (for
 * reads), `s3://bucket/key`, `opfs:///dir/key` (the browser's Origin Private File System, in a
 * page or a worker), and `{ store, key }` for a backend of your own.
 *
 * @module
 */
import { basename, dirname, resolve as resolvePath } from "node:path";
import { fileURLToPath } from "node:url";
import { FileStore } from "./file.ts";
import { HttpStore, type HttpStoreOptions } from "./http.ts";
import type { S3StoreOptions } from "./s3.ts";
import { DEFAULT_S3_PART_SIZE, DEFAULT_S3_READ_CONCURRENCY } from "./_s3_defaults.ts";
import type { ObjectInfo, ObjectStore } from "./types.ts";
import { checkStorageOptions } from "./_storage_options.ts";

/** One object in a store of your own. */
export interface StoreObject {
  /** The store. */
  store: ObjectStore;
  /** The object's key in it. */
  key: string;
}

/**
 * Where one object is: a local path, a `file:` URL, an `http:`/`https:` URL (read-only),
 * `s3://bucket/key`, or a store and a key.
 */
export type StorageAddress = string | URL | StoreObject;

/** Where a set of objects is (a checkpoint directory, say): a path, a URL, or a store. */
export type DirectoryAddress = string | URL | ObjectStore;

/** Settings for the stores an address resolves to. */
export interface ResolveOptions {
  /** For `http(s)://` addresses. */
  http?: Omit<HttpStoreOptions, "search">;
  /**
   * For `s3://` addresses: endpoint, region, credentials and tuning (`bucket` and `prefix` come
   * from the address); what is not given comes from the `AWS_*` environment variables, then
   * the shared AWS files (`~/.aws/credentials`, `~/.aws/config`, profile `AWS_PROFILE`).
   */
  s3?: Omit<S3StoreOptions, "bucket" | "prefix">;
}

const SCHEME = /^([a-zA-Z][a-zA-Z0-9+.-]+):/;

/** Whether `value` is a `{ store, key }` address. */
export function isStoreObject(value: unknown): value is StoreObject {
  return typeof value === "object" && value !== null && !(value instanceof URL) &&
    typeof (value as StoreObject).key === "string" && isObjectStore((value as StoreObject).store);
}

/** Whether `value` looks like an {@linkcode ObjectStore}. */
export function isObjectStore(value: unknown): value is ObjectStore {
  const s = value as ObjectStore;
  return typeof value === "object" && value !== null && typeof s.get === "function" &&
    typeof s.head === "function" && typeof s.writer === "function" && typeof s.url === "string";
}

/**
 * Whether `value` is an address (a string, a URL or `{ store, key }`) rather than bytes or a
 * stream.
 *
 * @example
 * ```ts
 * import { isAddress } from "./resolve.ts";
 * import assert from "node:assert/strict";
 * assert.ok(isAddress("s3://bucket/x.ckpt"));
 * assert.ok(!isAddress(new Uint8Array(1)));
 * ```
 */
export function isAddress(value: unknown): value is StorageAddress {
  return typeof value === "string" || value instanceof URL || isStoreObject(value);
}

/**
 * Whether `address` names a store by URL (`s3:`, `https:`, `opfs:`, ...) rather than a local
 * path: it starts with a scheme of two or more characters and a colon. `file:` URLs count as
 * local. The one rule for the library and the CLI: `s3:/ckpt/x` is a (malformed) S3 address,
 * not a file named so.
 *
 * @example
 * ```ts
 * import { isUrlAddress } from "./resolve.ts";
 * import assert from "node:assert/strict";
 * assert.ok(isUrlAddress("s3://ckpt/a.ckpt"));
 * assert.ok(isUrlAddress("s3:/ckpt/a.ckpt"));
 * assert.ok(!isUrlAddress("runs/a.ckpt"));
 * assert.ok(!isUrlAddress("file:///tmp/a.ckpt"));
 * ```
 */
export function isUrlAddress(address: string): boolean {
  const scheme = SCHEME.exec(address)?.[1];
  return scheme !== undefined && scheme.toLowerCase() !== "file";
}

function toUrl(address: string | URL): URL | undefined {
  if (address instanceof URL) return address;
  if (!SCHEME.test(address)) return undefined;
  try {
    return new URL(address);
  } catch {
    throw new TypeError(`Invalid address ${JSON.stringify(address)}: not a valid URL`);
  }
}

function s3Parts(url: URL): { bucket: string; key: string } {
  const bucket = url.hostname;
  if (bucket === "") throw new TypeError(`Invalid address ${url.href}: no bucket (write s3://bucket/key)`);
  const key = decodeURIComponent(url.pathname.replace(/^\//, ""));
  return { bucket, key };
}

/**
 * An S3 store, its module (and the S3 client it brings) loaded on first use, so that code which
 * never touches `s3://` never loads it.
 */
function s3Store(url: URL, prefix: string, options: ResolveOptions): ObjectStore {
  const bucket = s3Parts(url).bucket;
  let real: Promise<ObjectStore> | undefined;
  const load = () => real ??= import("./s3.ts").then((m) => new m.S3Store({ ...options.s3, bucket, prefix }));
  // As the S3Store will say (which checks the values when it is made, at the first request): a
  // whole-object read goes through the object reader (bodies into their buffers, hashed as from
  // a file), not through a stream of the body.
  const ranged = {
    concurrency: options.s3?.readConcurrency ?? DEFAULT_S3_READ_CONCURRENCY,
    partSize: options.s3?.partSize ?? DEFAULT_S3_PART_SIZE,
  };
  return { ...lazyStore(`s3://${bucket}/${prefix}`, load), ranged };
}

/**
 * A writable store named `url` that calls `load()` (once, it caches) on first use and forwards to
 * it; `address` when a worker can open the same store from a URL.
 */
function lazyStore(url: string, load: () => Promise<ObjectStore>, address?: string): ObjectStore {
  return {
    url,
    ...(address === undefined ? {} : { address }),
    writable: true,
    get: async (key, o) => await (await load()).get(key, o),
    head: async (key) => await (await load()).head(key),
    put: async (key, data, o) => await (await load()).put(key, data, o),
    writer: async (key, o) => await (await load()).writer(key, o),
    delete: async (key) => await (await load()).delete(key),
    list: async function* (p?: string): AsyncGenerator<ObjectInfo> {
      yield* (await load()).list(p);
    },
    sweep: async (p) => {
      const store = await load();
      return store.sweep ? await store.sweep(p) : 0;
    },
  };
}

/** The `/`-separated directory path of an `opfs:` URL (`opfs:///runs/demo/`), without slashes around it. */
function opfsPath(url: URL): string {
  if (url.host !== "") {
    throw new TypeError(
      `Invalid address ${url.href}: an opfs: URL has no host (write opfs:///${url.host}${url.pathname})`,
    );
  }
  return decodeURIComponent(url.pathname).replace(/^\/+/, "");
}

/**
 * An OPFS store, its module loaded and its directory opened on first use (resolving an address
 * is synchronous; opening an OPFS directory is not).
 */
function opfsStore(dir: string): ObjectStore {
  const parts = dir.split("/").filter((p) => p !== "");
  let real: Promise<ObjectStore> | undefined;
  const load = () => real ??= import("./opfs.ts").then((m) => m.OpfsStore.open(parts.join("/")));
  const url = `opfs:///${parts.map((p) => p + "/").join("")}`;
  return lazyStore(url, load, url);
}

/**
 * The store and key of one object.
 *
 * - a path (`runs/a.ckpt`) or `file:` URL: a {@linkcode FileStore} on its directory, key the file name;
 * - `https://host/dir/a.ckpt`: an {@linkcode HttpStore} on `https://host/dir/`, key `a.ckpt`
 *   (a query string, such as a pre-signed URL's signature, is kept for every request);
 * - `s3://bucket/run/a.ckpt`: an S3 store on bucket `bucket` and prefix `run/`, key `a.ckpt`;
 * - `opfs:///runs/demo/a.ckpt`: the Origin Private File System store on directory `runs/demo`
 *   (created when first used), key `a.ckpt`: in a page or a worker, not in Deno;
 * - `{ store, key }`: as given.
 *
 * @example
 * ```ts
 * import { resolveObject } from "./resolve.ts";
 * import assert from "node:assert/strict";
 * const { store, key } = resolveObject("https://example.com/models/v1/model.ckpt");
 * assert.equal(store.url, "https://example.com/models/v1/");
 * assert.equal(key, "model.ckpt");
 * const local = resolveObject("/tmp/runs/step-5.ckpt");
 * assert.deepEqual([local.store.url, local.key], ["file:///tmp/runs/", "step-5.ckpt"]);
 * ```
 */
export function resolveObject(address: StorageAddress, options: ResolveOptions = {}): StoreObject {
  checkStorageOptions(options, "Invalid storage options");
  if (isStoreObject(address)) return address;
  if (typeof address !== "string" && !(address instanceof URL)) {
    throw new TypeError("Invalid address: expected a path, a URL or { store, key }");
  }
  if (address === "") throw new TypeError("Invalid address: empty");
  const url = toUrl(address);
  if (!url || url.protocol === "file:") {
    const path = resolvePath(url ? fileURLToPath(url) : address as string);
    const key = basename(path);
    if (key === "") throw new TypeError(`Invalid address ${JSON.stringify(String(address))}: names a directory`);
    return { store: new FileStore(dirname(path)), key };
  }
  if (url.protocol === "http:" || url.protocol === "https:") {
    const cut = url.pathname.lastIndexOf("/");
    const key = decodeURIComponent(url.pathname.slice(cut + 1));
    if (key === "") throw new TypeError(`Invalid address ${url.href}: names a directory, not an object`);
    const base = new URL(url.href);
    base.pathname = url.pathname.slice(0, cut + 1);
    return { store: new HttpStore(base, { ...options.http, search: url.search }), key };
  }
  if (url.protocol === "s3:") {
    const { key: path } = s3Parts(url);
    const cut = path.lastIndexOf("/");
    const key = path.slice(cut + 1);
    if (key === "") throw new TypeError(`Invalid address ${url.href}: names a prefix, not an object`);
    return { store: s3Store(url, path.slice(0, cut + 1), options), key };
  }
  if (url.protocol === "opfs:") {
    const path = opfsPath(url);
    const cut = path.lastIndexOf("/");
    const key = path.slice(cut + 1);
    if (key === "") throw new TypeError(`Invalid address ${url.href}: names a directory, not an object`);
    return { store: opfsStore(path.slice(0, cut + 1)), key };
  }
  throw new TypeError(
    `Invalid address ${url.href}: unsupported scheme ${url.protocol} (use a path, file:, http(s):, s3: or opfs:)`,
  );
}

/**
 * A store rooted at a directory-like address: a path or `file:` URL (a {@linkcode FileStore}),
 * `s3://bucket/prefix` (an S3 store on that prefix), `http(s)://host/dir/` (read-only),
 * `opfs:///dir` (the Origin Private File System, in a browser), or a store as given.
 *
 * @example
 * ```ts
 * import { resolveDirectory } from "./resolve.ts";
 * import assert from "node:assert/strict";
 * assert.equal(resolveDirectory("/tmp/runs").url, "file:///tmp/runs/");
 * assert.equal(resolveDirectory("https://example.com/m").url, "https://example.com/m/");
 * ```
 */
export function resolveDirectory(address: DirectoryAddress, options: ResolveOptions = {}): ObjectStore {
  checkStorageOptions(options, "Invalid storage options");
  if (isObjectStore(address)) return address;
  if (typeof address !== "string" && !(address instanceof URL)) {
    throw new TypeError("Invalid directory: expected a path, a URL or an ObjectStore");
  }
  if (address === "") throw new TypeError("Invalid directory: empty");
  const url = toUrl(address);
  if (!url || url.protocol === "file:") return new FileStore(url ?? address);
  if (url.protocol === "http:" || url.protocol === "https:") {
    return new HttpStore(url, { ...options.http, search: url.search });
  }
  if (url.protocol === "s3:") {
    const { key } = s3Parts(url);
    return s3Store(url, key === "" || key.endsWith("/") ? key : `${key}/`, options);
  }
  if (url.protocol === "opfs:") return opfsStore(opfsPath(url));
  throw new TypeError(
    `Invalid directory ${url.href}: unsupported scheme ${url.protocol} (use a path, file:, http(s):, s3: or opfs:)`,
  );
}

/**
 * The address another thread (a Web Worker) can open `{ store, key }` by: the store's
 * {@linkcode ObjectStore.address} followed by the key, each `/`-separated part URL-encoded; or
 * `undefined` when the store has no address (a memory store, say).
 *
 * @example
 * ```ts
 * import { FileStore } from "./file.ts";
 * import { MemoryStore } from "./memory.ts";
 * import { objectAddress, resolveObject } from "./resolve.ts";
 * import assert from "node:assert/strict";
 * const address = objectAddress({ store: new FileStore("/tmp/runs"), key: "a b/#1.ckpt" });
 * assert.equal(address, "file:///tmp/runs/a%20b/%231.ckpt");
 * const { store, key } = resolveObject(address!);
 * assert.deepEqual([store.url, key], ["file:///tmp/runs/a%20b/", "#1.ckpt"]);
 * assert.equal(objectAddress({ store: new MemoryStore(), key: "a.ckpt" }), undefined);
 * ```
 */
export function objectAddress(object: StoreObject): string | undefined {
  const base = object.store.address;
  if (base === undefined) return undefined;
  return base + object.key.split("/").map(encodeURIComponent).join("/");
}

/**
 * An address in words, for messages: the URL of the object.
 *
 * @example
 * ```ts
 * import { describeAddress } from "./resolve.ts";
 * import assert from "node:assert/strict";
 * assert.equal(describeAddress("https://h/a.ckpt"), "https://h/a.ckpt");
 * ```
 */
export function describeAddress(address: StorageAddress): string {
  if (isStoreObject(address)) return address.store.url + address.key;
  return address instanceof URL ? address.href : address;
}
