// Why a file could not be created for a write, in the words of the target and its directory:
// never the temporary name the write goes through (`.x.ckpt.tmp-8103-9e3ba4ff`), never a bare
// "os error 2". The error keeps the file system's class (`OsErrors.NotFound`, ...), so code
// that tells them apart still can, and holds the original error as its cause.
import { dirname } from "node:path";
import { OsErrors } from "../runtime/errors.ts";
import { files } from "../runtime/files.ts";

/** Whether `e` is of one of the file system's error `kinds` (its class, in every runtime). */
function isKind(e: unknown, ...kinds: (keyof typeof OsErrors)[]): boolean {
  return kinds.some((kind) => e instanceof OsErrors[kind]);
}

/** The file system's own reason, without `(os error N)` and the path it names. */
function reason(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  // Deno: "No such file or directory (os error 2): open '/x'"; Node: "ENOENT: no such file or directory, open '/x'"
  return message.replace(/^E[A-Z]+: /, "").replace(/\s*\(os error \d+\)/, "").replace(/[:,]\s*\w+ '.*'$/s, "").trim();
}

async function kindOf(path: string): Promise<"directory" | "other" | "absent" | "unknown"> {
  try {
    return (await files.stat(path)).isDirectory ? "directory" : "other";
  } catch (e) {
    // A file where a directory should be (`a.ckpt/x`) is as absent as a missing one.
    return isKind(e, "NotFound", "NotADirectory") ? "absent" : "unknown";
  }
}

/** The nearest ancestor of `dir` that exists, and `dir`'s first missing component below it. */
async function firstMissing(dir: string): Promise<string> {
  let missing = dir;
  for (let up = dirname(dir); up !== missing; missing = up, up = dirname(up)) {
    if (await kindOf(up) !== "absent") return missing;
  }
  return missing;
}

/**
 * The error to throw when creating the temporary file for `path` failed with `e`: names `path`
 * and, where the directory is the cause, the directory (`directory "/a/b" does not exist`).
 */
export async function createError(path: string, e: unknown): Promise<unknown> {
  if (!(e instanceof Error)) return e;
  const dir = dirname(path);
  let why = reason(e);
  if (isKind(e, "NotFound", "NotADirectory")) {
    const kind = await kindOf(dir);
    if (kind === "absent") {
      const missing = await firstMissing(dir);
      why = (await kindOf(dirname(missing))) === "other"
        ? `${JSON.stringify(dirname(missing))} is not a directory`
        : `directory ${JSON.stringify(missing)} does not exist`;
    } else if (kind === "other") {
      why = `${JSON.stringify(dir)} is not a directory`;
    } else {
      why = `cannot create a file in directory ${JSON.stringify(dir)}: ${why}`;
    }
  } else if (isKind(e, "PermissionDenied")) {
    why = `cannot create a file in directory ${JSON.stringify(dir)}: Permission denied`;
  } else {
    why = `cannot create a file in directory ${JSON.stringify(dir)}: ${why}`;
  }
  const message = `Cannot write ${JSON.stringify(path)}: ${why}`;
  const Class = e.constructor as new (message: string, options?: ErrorOptions) => Error;
  try {
    const out = new Class(message, { cause: e });
    out.name = e.name;
    // Node's errno code (`EACCES`, ...), which src/runtime keeps on its errors.
    const code = (e as { code?: unknown }).code;
    if (code !== undefined) Object.defineProperty(out, "code", { value: code, enumerable: true });
    return out;
  } catch {
    return new Error(message, { cause: e });
  }
}
