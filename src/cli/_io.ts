// The CLI's contact with the outside: standard streams, input files, error classes and exit
// codes, progress on a terminal, and human-readable numbers.

import { createHash, type Hash } from "node:crypto";
import { isUrlAddress, resolveObject } from "../storage/resolve.ts";
import type { GetResult } from "../storage/types.ts";
import { OsErrors } from "../runtime/errors.ts";
import { thisProcess } from "../runtime/process.ts";
import { type FileHandle, type FileInfo, files } from "../runtime/files.ts";

/** Exit codes, documented in `docs/cli.md` and every command's help. */
export const EXIT = Object.freeze({
  /** Success: intact, no difference. */
  ok: 0,
  /** `diff`: the checkpoints differ beyond the tolerance. */
  differ: 1,
  /** Bad command line. */
  usage: 2,
  /** A file or stream could not be opened, read or written. */
  io: 3,
  /** A checkpoint is corrupt, truncated, not a checkpoint, or over a limit. */
  bad: 4,
  /** A bug in ckpt (reported with a hint to rerun with `--debug`). */
  internal: 70,
  /** Standard output was closed by its reader (as a process killed by SIGPIPE). */
  pipe: 141,
});

/** The standard streams a command runs against; tests and examples pass their own. */
export interface CliIO {
  /** Standard input, opened on first use (so a command that does not read it never locks it). */
  stdin(): ReadableStream<Uint8Array>;
  /** Standard output: data only. */
  stdout: WritableStream<Uint8Array>;
  /** Standard error: one line per error, progress only on a terminal. */
  stderr: WritableStream<Uint8Array>;
  /** Whether standard input is a terminal (a checkpoint is never read from one). */
  stdinIsTerminal: boolean;
  /** Whether standard output is a terminal (binary data is never written to one). */
  stdoutIsTerminal: boolean;
  /** Whether standard error is a terminal: progress is shown only then. */
  stderrIsTerminal: boolean;
}

/** The process's own standard streams. */
export function processIO(): CliIO {
  return {
    stdin: () => thisProcess.stdin.stream(),
    stdout: thisProcess.stdout.stream(),
    stderr: thisProcess.stderr.stream(),
    stdinIsTerminal: thisProcess.stdin.isTerminal(),
    stdoutIsTerminal: thisProcess.stdout.isTerminal(),
    stderrIsTerminal: thisProcess.stderr.isTerminal(),
  };
}

/** A bad command line: exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** A file that cannot be opened, read or written: exit code 3. */
export class FileError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "FileError";
  }
}

/** A checkpoint that is not what it should be, found by the CLI itself: exit code 4. */
export class BadCheckpointError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "BadCheckpointError";
  }
}

const utf8 = new TextEncoder();

const queues = new WeakMap<WritableStream<Uint8Array>, Promise<void>>();

/**
 * Writes text to a stream without keeping it locked. Writes to one stream are queued, so a
 * progress line and an error line never race for the writer.
 */
export function write(stream: WritableStream<Uint8Array>, text: string): Promise<void> {
  const next = (queues.get(stream) ?? Promise.resolve()).catch(() => {}).then(async () => {
    const w = stream.getWriter();
    try {
      await w.write(utf8.encode(text));
    } finally {
      w.releaseLock();
    }
  });
  queues.set(stream, next);
  return next;
}

/**
 * Text from a checkpoint (a tensor name, a metric, a message quoting them) made safe for a
 * terminal: control characters, which could move the cursor or recolour the screen, are shown
 * as `\u{..}` escapes. Newlines and tabs go too, so a table row stays one line.
 */
export function safeText(text: string): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u{${c.charCodeAt(0).toString(16)}}`);
}

/**
 * What an OS error says, without Deno's `: open '/path'` tail (the CLI names the path itself);
 * a directory where a file was expected reads "it is a directory" whichever call found it.
 */
export function osReason(e: unknown): string {
  if (e instanceof OsErrors.IsADirectory) return "it is a directory";
  const message = e instanceof Error ? e.message : String(e);
  return message.replace(/\s*\(os error \d+\)/, "").replace(/:\s*\w+ '.*'$/s, "").trim();
}

/** Errors of the stores: their messages already say what could not be done and name the object. */
const STORE_ERRORS = new Set([
  "ObjectNotFoundError",
  "StoreUnreachableError",
  "S3Error",
  "HttpStatusError",
  "PreconditionFailedError",
]);

/** Whether `e` is a store's error (object missing, store unreachable, request refused). */
export function isStoreError(e: unknown): e is Error {
  return e instanceof Error && STORE_ERRORS.has(e.name);
}

/**
 * The error to report for a failed read of `spec`, wrapped once: the CLI's own errors as they
 * are; a store's error, which names the object already, as a {@linkcode FileError} with its
 * message; an OS error as `Cannot read "SPEC": REASON`.
 */
export function readFailure(spec: string, e: unknown): Error {
  if (e instanceof FileError || e instanceof UsageError || e instanceof BadCheckpointError) return e;
  if (isStoreError(e)) {
    // A local file is named as the command line named it; any other object by its address.
    const local = e.name === "ObjectNotFoundError" && /^file:/.test((e as { url?: string }).url ?? "");
    const message = local ? `Cannot read ${JSON.stringify(spec)}: No such file or directory` : e.message;
    return new FileError(message, { cause: e });
  }
  // A TypeError from the library is a setting or an address it refused (S3 credentials, a
  // malformed address); its message names the address already.
  if (e instanceof TypeError && !isOsError(e)) return new FileError(e.message, { cause: e });
  return new FileError(`Cannot read ${JSON.stringify(spec)}: ${osReason(e)}`, { cause: e });
}

/** Whether an error came from the operating system (file, pipe, permission). */
export function isOsError(e: unknown): boolean {
  return e instanceof OsErrors.NotFound || e instanceof OsErrors.PermissionDenied ||
    e instanceof OsErrors.AlreadyExists || e instanceof OsErrors.IsADirectory ||
    e instanceof OsErrors.NotADirectory || e instanceof OsErrors.BrokenPipe ||
    e instanceof OsErrors.WriteZero || e instanceof OsErrors.UnexpectedEof ||
    e instanceof OsErrors.NotCapable || e instanceof OsErrors.Interrupted ||
    e instanceof OsErrors.FilesystemLoop || e instanceof OsErrors.InvalidData ||
    (e instanceof Error && /\(os error \d+\)/.test(e.message));
}

/** A byte source named on the command line: a path or `-` for standard input. */
export interface Input {
  /** How messages name it: the path, or `stdin`. */
  readonly label: string;
  /** The path, when it is a file. */
  readonly path?: string;
  /** Its size in bytes, when known before reading. */
  readonly size?: number;
  /** The bytes, read on demand. */
  readonly stream: ReadableStream<Uint8Array>;
  /**
   * A local regular file, open at offset 0, for readers that read it directly instead of through
   * `stream` (only one of the two may be used; cancelling `stream` closes it).
   */
  readonly file?: FileHandle;
}

/** File reads of this size; each chunk is a fresh buffer, since decoded tensors may view it. */
const READ_CHUNK = 4 * 2 ** 20;

/** Whether a command-line argument is an object-storage or HTTP address rather than a local path. */
export function isRemote(spec: string): boolean {
  return isUrlAddress(spec);
}

/** An object named by a remote address, opened for reading; failures are a {@linkcode FileError}. */
async function openRemote(spec: string, range?: { offset: number; length: number }): Promise<GetResult> {
  try {
    const { store, key } = resolveObject(spec);
    return await store.get(key, range ? { range } : {});
  } catch (e) {
    throw readFailure(spec, e);
  }
}

/**
 * Opens `spec` (a path, an `s3://`, `http://` or `https://` address, or `-` for standard input).
 * Missing, unreadable and directory paths are a {@linkcode FileError} naming the path; a terminal
 * on standard input is a {@linkcode UsageError}.
 */
export async function openInput(spec: string, io: CliIO): Promise<Input> {
  if (isRemote(spec)) {
    const got = await openRemote(spec);
    return { label: spec, path: spec, size: got.info.size, stream: got.body };
  }
  if (spec === "-") {
    if (io.stdinIsTerminal) {
      throw new UsageError("refusing to read a checkpoint from a terminal: pipe one in, or give a path instead of -");
    }
    return { label: "stdin", stream: io.stdin() };
  }
  let file: FileHandle;
  try {
    file = await files.open(spec, { read: true });
  } catch (e) {
    throw new FileError(`Cannot read ${JSON.stringify(spec)}: ${osReason(e)}`, { cause: e });
  }
  let info: FileInfo;
  try {
    info = await file.stat();
  } catch (e) {
    file.close();
    throw new FileError(`Cannot read ${JSON.stringify(spec)}: ${osReason(e)}`, { cause: e });
  }
  if (info.isDirectory) {
    file.close();
    throw new FileError(`Cannot read ${JSON.stringify(spec)}: it is a directory`);
  }
  let open = true;
  const close = () => {
    if (open) file.close();
    open = false;
  };
  // A regular file's size is known: read what is left, plus one byte that finds the end (or a
  // file that grew) in the same read. A pipe or device given as a path reads in full chunks.
  let left = info.isFile ? info.size : Infinity;
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      const buf = new Uint8Array(Math.min(READ_CHUNK, left + 1));
      let filled = 0;
      try {
        while (filled < buf.byteLength) {
          const n = await file.read(buf.subarray(filled));
          if (n === null) break;
          filled += n;
        }
      } catch (e) {
        close();
        throw new FileError(`Cannot read ${JSON.stringify(spec)}: ${osReason(e)}`, { cause: e });
      }
      left = Math.max(0, left - filled);
      if (filled > 0) c.enqueue(buf.subarray(0, filled));
      if (filled < buf.byteLength) {
        close();
        c.close();
      }
    },
    cancel: close,
  }, { highWaterMark: 0 });
  return info.isFile
    ? { label: spec, path: spec, size: info.size, stream, file }
    : { label: spec, path: spec, size: undefined, stream };
}

/**
 * Reads the first `n` bytes of a file or remote object (fewer when it is shorter), for sniffing
 * before opening it fully.
 */
export async function readHead(path: string, n: number): Promise<Uint8Array> {
  if (isRemote(path)) {
    const got = await openRemote(path, { offset: 0, length: n });
    return new Uint8Array(await new Response(got.body).arrayBuffer());
  }
  const file = await files.open(path, { read: true });
  try {
    const head = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const got = await file.read(head.subarray(filled));
      if (got === null) break;
      filled += got;
    }
    return head.subarray(0, filled);
  } finally {
    file.close();
  }
}

/**
 * Progress on standard error (bytes and rate), shown only when it is a terminal and only for
 * operations that last more than half a second; the line is cleared when done.
 */
export class Progress {
  #stderr: WritableStream<Uint8Array> | undefined;
  #label: string;
  #total: number | undefined;
  #bytes = 0;
  #start = performance.now();
  #last = 0;
  #shown = false;
  #drawing: Promise<void> = Promise.resolve();

  constructor(io: CliIO, label: string, total?: number) {
    this.#stderr = io.stderrIsTerminal ? io.stderr : undefined;
    this.#label = label;
    this.#total = total;
  }

  #draw(text: string): void {
    const stderr = this.#stderr!;
    this.#drawing = this.#drawing.then(() => write(stderr, text)).catch(() => {});
  }

  /** Counts `n` more bytes and redraws at most four times a second. */
  add(n: number): void {
    this.#bytes += n;
    if (!this.#stderr) return;
    const now = performance.now();
    if (now - this.#start < 500 || now - this.#last < 250) return;
    this.#last = now;
    const rate = this.#bytes / ((now - this.#start) / 1000);
    const of = this.#total ? ` / ${humanBytes(this.#total)}` : "";
    this.#draw(`\r\x1b[K${this.#label}: ${humanBytes(this.#bytes)}${of} (${humanBytes(rate)}/s)`);
    this.#shown = true;
  }

  /** Clears the line, if one was drawn, once every draw is out. */
  async done(): Promise<void> {
    if (this.#shown) this.#draw("\r\x1b[K");
    this.#shown = false;
    await this.#drawing;
  }
}

/** A pass-through byte stream that counts bytes into `progress` and, when asked, hashes them. */
export function meter(
  stream: ReadableStream<Uint8Array>,
  progress: Progress,
  options: { hash?: boolean } = {},
): { stream: ReadableStream<Uint8Array>; bytes(): number; sha256(): string | undefined } {
  const hash: Hash | undefined = options.hash ? createHash("sha256") : undefined;
  let bytes = 0;
  let digest: string | undefined;
  const out = stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        bytes += chunk.byteLength;
        hash?.update(chunk);
        progress.add(chunk.byteLength);
        c.enqueue(chunk);
      },
      flush() {
        digest = hash?.digest("hex");
      },
    }),
  );
  return { stream: out, bytes: () => bytes, sha256: () => digest };
}

/**
 * A size as people read it: bytes below 1 KiB, else two decimals in KiB, MiB, GiB, TiB or PiB
 * (units of 1024, named as such, as the train demo and the docs name them).
 */
export function humanBytes(n: number): string {
  if (!Number.isFinite(n)) return `${n} B`;
  if (Math.abs(n) < 1024) return `${Math.round(n)} B`;
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = n / 1024;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(2)} ${units[i]}`;
}

/** A shape as `[2, 3]`. */
export function shapeText(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/**
 * Lays out rows as left-aligned columns (right-aligned where `right[i]`), two spaces apart, each
 * cell passed through {@linkcode safeText}.
 */
export function table(unsafe: readonly (readonly string[])[], right: readonly boolean[] = []): string {
  const rows = unsafe.map((row) => row.map(safeText));
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) =>
    row.map((cell, i) => {
      const last = i === row.length - 1;
      if (right[i]) return cell.padStart(widths[i]!);
      return last ? cell : cell.padEnd(widths[i]!);
    }).join("  ").trimEnd() + "\n"
  ).join("");
}

/** A number for a table: integers as they are, others with up to 6 significant digits. */
export function numberText(v: number | bigint | null | undefined): string {
  if (v === null || v === undefined) return "-";
  if (typeof v === "bigint") return v.toString();
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-4 || a >= 1e15)) return v.toExponential(5).replace(/\.?0+e/, "e");
  return String(Number(v.toPrecision(6)));
}

/** A number for JSON output: finite numbers as numbers; NaN, ±Infinity and -0 as strings (as the JSON codec does); bigints as decimal strings. */
export function jsonNumber(v: number | bigint | null | undefined): number | string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v.toString();
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  if (Object.is(v, -0)) return "-0";
  return v;
}

/** The stack of an error and of each error it was caused by, for --debug. */
export function stackTrace(e: unknown): string {
  const parts: string[] = [];
  for (let c: unknown = e, depth = 0; c instanceof Error && depth < 8; c = c.cause, depth++) {
    parts.push(`${depth === 0 ? "" : "Caused by: "}${c.stack ?? `${c.name}: ${c.message}`}`);
  }
  return parts.length > 0 ? parts.join("\n") + "\n" : "";
}
