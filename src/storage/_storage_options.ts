// The names of the storage settings (`{ storage: { s3, http } }`, S3StoreOptions and its
// credentials, HttpStoreOptions), checked at every depth. They live here, not beside the stores,
// because the S3 module (and its client) is loaded only when an s3:// address is first used,
// while a misspelt `storage.s3.endpiont` must be refused before anything is sent. `optionNames`
// fails the type check when an interface gains a field these lists lack.
import { checkOptionNames, optionNames } from "../format/_options.ts";
import type { FileStoreOptions } from "./file.ts";
import type { HttpStoreOptions } from "./http.ts";
import type { MemoryStoreOptions } from "./memory.ts";
import type { OpfsStoreOptions } from "./opfs.ts";
import type { ResolveOptions } from "./resolve.ts";
import type { S3Credentials, S3StoreOptions } from "./s3.ts";

const S3_OPTION_NAMES = optionNames<S3StoreOptions>()([
  "bucket",
  "prefix",
  "endpoint",
  "region",
  "credentials",
  "profile",
  "partSize",
  "concurrency",
  "readConcurrency",
  "retries",
  "timeout",
  "listPageSize",
  "fetch",
]);
const CREDENTIAL_NAMES = optionNames<S3Credentials>()(["accessKeyId", "secretAccessKey", "sessionToken"]);
const HTTP_OPTION_NAMES = optionNames<HttpStoreOptions>()(["fetch", "headers", "search"]);
const STORAGE_NAMES = optionNames<ResolveOptions>()(["s3", "http"]);
/** The names {@linkcode FileStore}'s options take. */
export const FILE_STORE_OPTION_NAMES = optionNames<FileStoreOptions>()(["directWrites"]);
/** The names {@linkcode MemoryStore}'s options take. */
export const MEMORY_STORE_OPTION_NAMES = optionNames<MemoryStoreOptions>()(["name"]);
/** The names {@linkcode OpfsStore.open}'s options take. */
export const OPFS_STORE_OPTION_NAMES = optionNames<OpfsStoreOptions>()(["root"]);
/** The names {@linkcode HttpStore}'s options take. */
export { HTTP_OPTION_NAMES };

/** A credential's field beside the endpoint is almost always meant for `credentials`. */
function credentialHints(path: string): Record<string, string> {
  return Object.fromEntries(
    CREDENTIAL_NAMES.map((name) => [name, `it belongs under ${path}credentials: { ${name}, ... }`]),
  );
}

/**
 * Checks S3 settings by name: the store's options and its `credentials`. `path` is where they
 * sit in the caller's options (`"storage.s3."`); `fromAddress` leaves out `bucket` and `prefix`,
 * which an `s3://` address gives.
 */
export function checkS3Options(options: unknown, context: string, path = "", fromAddress = false): void {
  const known = fromAddress ? S3_OPTION_NAMES.filter((n) => n !== "bucket" && n !== "prefix") : S3_OPTION_NAMES;
  const hints: Record<string, string> = credentialHints(path);
  if (fromAddress) {
    hints.bucket = "the bucket comes from the s3:// address";
    hints.prefix = "the prefix comes from the s3:// address";
  }
  checkOptionNames(options, known, context, hints, path);
  const { credentials } = options as { credentials?: unknown };
  if (credentials === undefined) return;
  checkOptionNames(credentials, CREDENTIAL_NAMES, context, {}, `${path}credentials.`);
  for (const name of ["accessKeyId", "secretAccessKey"] as const) {
    const value = (credentials as Record<string, unknown>)[name];
    if (typeof value !== "string" || value === "") {
      throw new TypeError(`${context}: option ${path}credentials.${name} must be a non-empty string`);
    }
  }
}

/** Checks `{ storage: { s3, http } }` settings by name at every depth; `path` is where they sit. */
export function checkStorageOptions(storage: unknown, context: string, path = "storage."): void {
  if (storage === undefined) return;
  checkOptionNames(storage, STORAGE_NAMES, context, {
    ...Object.fromEntries(
      S3_OPTION_NAMES.filter((n) => n !== "fetch").map((n) => [n, `S3 settings go under ${path}s3`]),
    ),
    ...Object.fromEntries(CREDENTIAL_NAMES.map((n) => [n, `S3 credentials go under ${path}s3.credentials`])),
  }, path);
  const { s3, http } = storage as ResolveOptions;
  if (s3 !== undefined) checkS3Options(s3, context, `${path}s3.`, true);
  if (http !== undefined) {
    checkOptionNames(http, HTTP_OPTION_NAMES.filter((n) => n !== "search"), context, {
      search: "the query string comes from the https:// address",
    }, `${path}http.`);
  }
}
