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

/** Rewraps an I/O error with a message saying what failed, keeping its class (`OsErrors.*`) and `code`. */
export function ioError(what: string, e: unknown): Error {
  if (!(e instanceof Error)) return new Error(`${what}: ${String(e)}`, { cause: e });
  if (e instanceof TypeError || e instanceof RangeError || e instanceof SyntaxError) return e;
  if (e instanceof ChecksumMismatchError) return e;
  const Ctor = e.constructor as new (message: string, options?: ErrorOptions) => Error;
  let out: Error;
  try {
    out = new Ctor(`${what}: ${e.message}`, { cause: e });
  } catch {
    out = new Error(`${what}: ${e.message}`, { cause: e });
  }
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
