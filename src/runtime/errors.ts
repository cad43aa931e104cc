/**
 * The operating system's errors, by kind, the same classes in every runtime: Deno's own
 * (`Deno.errors.NotFound`, ...) in Deno; in Node and browsers classes of the same names, which
 * the Node file system ({@linkcode files}) throws in place of Node's errno errors, keeping
 * Node's `code` (`ENOENT`, ...). Code above src/runtime tests `e instanceof OsErrors.NotFound`
 * and never asks which runtime it runs on.
 *
 * @example
 * ```ts
 * import { OsErrors } from "./errors.ts";
 * import { files } from "./files.ts";
 * import assert from "node:assert/strict";
 * await assert.rejects(files.stat("/no/such/file"), OsErrors.NotFound);
 * ```
 *
 * @module
 */
import { RUNTIME } from "./_which.ts";

/** An error class of {@linkcode OsErrors}. */
export type OsErrorClass = new (message?: string, options?: ErrorOptions) => Error;

/** The error kinds ckpt tells apart, named as Deno names them. */
export const OS_ERROR_KINDS = [
  "NotFound",
  "AlreadyExists",
  "PermissionDenied",
  "IsADirectory",
  "NotADirectory",
  "BrokenPipe",
  "WriteZero",
  "UnexpectedEof",
  "NotCapable",
  "Interrupted",
  "FilesystemLoop",
  "InvalidData",
  "Busy",
] as const;

/** One of {@linkcode OS_ERROR_KINDS}. */
export type OsErrorKind = typeof OS_ERROR_KINDS[number];

function ownClasses(): Record<OsErrorKind, OsErrorClass> {
  const out = {} as Record<OsErrorKind, OsErrorClass>;
  for (const name of OS_ERROR_KINDS) {
    out[name] = {
      [name]: class extends Error {
        constructor(message?: string, options?: ErrorOptions) {
          super(message, options);
          this.name = name;
        }
      },
    }[name]!;
  }
  return out;
}

/** The error class of each kind: Deno's in Deno, ckpt's own elsewhere. */
export const OsErrors: Readonly<Record<OsErrorKind, OsErrorClass>> = Object.freeze(
  RUNTIME === "deno"
    ? (globalThis as unknown as { Deno: { errors: Record<OsErrorKind, OsErrorClass> } }).Deno.errors
    : ownClasses(),
);

/** Node's errno codes to the kinds above (the rest stay plain `Error`s with their `code`). */
export const ERRNO_KINDS: Readonly<Record<string, OsErrorKind>> = Object.freeze({
  ENOENT: "NotFound",
  EEXIST: "AlreadyExists",
  EACCES: "PermissionDenied",
  EPERM: "PermissionDenied",
  EISDIR: "IsADirectory",
  ENOTDIR: "NotADirectory",
  EPIPE: "BrokenPipe",
  EINTR: "Interrupted",
  ELOOP: "FilesystemLoop",
  EBUSY: "Busy",
});

/**
 * Node's error as ckpt's: an instance of the {@linkcode OsErrors} class its `code` names (an
 * `Error` otherwise), with Node's message and `code` kept and the original as `cause`.
 *
 * @example
 * ```ts
 * import { fromErrno, OsErrors } from "./errors.ts";
 * import assert from "node:assert/strict";
 * const e = fromErrno(Object.assign(new Error("ENOENT: no such file or directory, open '/x'"), { code: "ENOENT" }));
 * assert.ok(e instanceof OsErrors.NotFound);
 * assert.equal((e as { code?: string }).code, "ENOENT");
 * ```
 */
export function fromErrno(e: unknown): unknown {
  const code = (e as { code?: unknown } | null)?.code;
  if (!(e instanceof Error) || typeof code !== "string") return e;
  const kind = ERRNO_KINDS[code];
  if (kind === undefined) return e;
  const out = new OsErrors[kind](e.message, { cause: e });
  Object.defineProperty(out, "code", { value: code, enumerable: true });
  return out;
}
