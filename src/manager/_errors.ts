// How the manager words I/O failures, and which failures mean "this checkpoint is damaged".

import { ChecksumMismatchError } from "../format/errors.ts";
import { ObjectNotFoundError } from "../storage/types.ts";
import { OsErrors } from "../runtime/errors.ts";

/** "Missing": `OsErrors.NotFound` (Deno's `Deno.errors.NotFound` in Deno). */
export function notFound(message: string, options?: ErrorOptions): Error {
  return new OsErrors.NotFound(message, options);
}

/** Whether `e` says "missing" ({@linkcode notFound}). */
export function isNotFound(e: unknown): boolean {
  return e instanceof OsErrors.NotFound || (e instanceof Error && e.name === "NotFound");
}

/**
 * `inner` without its leading `Cannot write "/a/b": ` where `what` already names that path (a
 * store's error inside the manager's own), so a message names each path once.
 */
function withoutRepeatedPath(what: string, inner: string): string {
  const m = /^Cannot [a-z]+ ("(?:[^"\\]|\\.)*"|\S+): /.exec(inner);
  if (!m) return inner;
  let path = m[1]!;
  try {
    if (path.startsWith('"')) path = JSON.parse(path);
    if (path.startsWith("file:")) path = decodeURIComponent(new URL(path).pathname);
  } catch {
    return inner;
  }
  return what.includes(path) ? inner.slice(m[0].length) : inner;
}

/** Rewraps an I/O error with a message saying what failed, keeping its class (`OsErrors.*`) and `code`. */
export function ioError(what: string, e: unknown): Error {
  if (!(e instanceof Error)) return new Error(`${what}: ${String(e)}`, { cause: e });
  if (e instanceof TypeError || e instanceof RangeError || e instanceof SyntaxError) return e;
  if (e instanceof ChecksumMismatchError) return e;
  const Ctor = e.constructor as new (message: string, options?: ErrorOptions) => Error;
  let out: Error;
  const message = `${what}: ${withoutRepeatedPath(what, e.message)}`;
  try {
    out = new Ctor(message, { cause: e });
  } catch {
    out = new Error(message, { cause: e });
  }
  // A class whose constructor takes other arguments (S3Error takes a URL and fields) would
  // garble the message: keep the message, as a plain Error caused by the original.
  if (out.message !== message) out = new Error(message, { cause: e });
  const code = (e as { code?: unknown }).code;
  if (code !== undefined) Object.defineProperty(out, "code", { value: code, enumerable: true });
  return out;
}

/** Errors that mean "this checkpoint's files are unusable", as opposed to a failing disk or a bad argument. */
export function isDamage(e: unknown): boolean {
  return isNotFound(e) || e instanceof ObjectNotFoundError || e instanceof ChecksumMismatchError ||
    e instanceof SyntaxError ||
    e instanceof RangeError;
}
