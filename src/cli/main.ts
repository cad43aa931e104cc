/**
 * The `ckpt` command line: inspect, verify, convert, diff and list checkpoints from a shell,
 * with `-` for standard input and output so checkpoints flow through pipes.
 *
 * Run it as `deno task ckpt <command> ...` in the repository, or install it as `ckpt` (see
 * `docs/cli.md`). Data goes to standard output only; each error is one line on standard error
 * with a non-zero exit code (0 ok, 1 checkpoints differ, 2 bad command line, 3 a file cannot be
 * read or written, 4 a checkpoint is corrupt or not a checkpoint).
 *
 * @example
 * ```ts
 * import { main } from "./main.ts";
 * import { saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const path = await Deno.makeTempFile({ suffix: ".ckpt" });
 * await saveCheckpoint(path, {
 *   metadata: { step: 3 },
 *   tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
 * });
 * let out = "";
 * const stdout = new WritableStream<Uint8Array>({ write: (c) => { out += new TextDecoder().decode(c); } });
 * const code = await main(["verify", path], { stdout });
 * assert.equal(code, 0);
 * assert.match(out, /^ok /);
 * await Deno.remove(path);
 * ```
 *
 * @module
 */
import { parseArgs } from "node:util";
import { type Command, commandHelp, parseArgsMessage, parseCommand } from "./_command.ts";
import {
  BadCheckpointError,
  type CliIO,
  EXIT,
  FileError,
  isOsError,
  osReason,
  processIO,
  safeText,
  stackTrace,
  UsageError,
  write,
} from "./_io.ts";
import { ChecksumMismatchError } from "../../mod.ts";
import "../interop/read_codecs.ts"; // every command recognises safetensors
import { convertCommand } from "./convert.ts";
import { diffCommand } from "./diff.ts";
import { inspectCommand } from "./inspect.ts";
import { lsCommand } from "./ls.ts";
import { verifyCommand } from "./verify.ts";
import { OsErrors } from "../runtime/errors.ts";
import { thisProcess } from "../runtime/process.ts";

export type { CliIO } from "./_io.ts";

/**
 * The version `ckpt --version` prints.
 *
 * @example
 * ```ts
 * import { VERSION } from "./main.ts";
 * import assert from "node:assert/strict";
 * assert.match(VERSION, /^\d+\.\d+\.\d+$/);
 * ```
 */
export const VERSION = "0.1.0";

const COMMANDS: readonly Command[] = [inspectCommand, verifyCommand, convertCommand, diffCommand, lsCommand];

function topHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    "Usage: ckpt <command> [options] [arguments]",
    "",
    "Streaming checkpoints for TensorFlow.js training: look inside, verify, convert and compare",
    "them (ckpt binary or JSON, gzip or not, and .safetensors; recognised from the bytes). A FILE",
    "argument may be - for standard input; an OUT argument may be - for standard output.",
    "",
    "Commands:",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    "",
    "Options:",
    "  -h, --help     show this help (ckpt <command> --help for a command's)",
    "      --version  print the version",
    "      --debug    show a stack trace with any error",
    "",
    "Examples:",
    "  ckpt inspect model.ckpt",
    "  ckpt verify checkpoints/*.ckpt",
    "  ckpt convert - - --codec json < model.ckpt | jq -c 'select(.tensor)'",
    "  ckpt diff before.ckpt after.ckpt --tolerance 1e-6",
    "  ckpt ls runs/mnist",
    "",
    "Exit codes:",
    "    0  success",
    "    1  diff: the checkpoints differ beyond the tolerance",
    "    2  bad command line",
    "    3  a file or stream cannot be read or written",
    "    4  a checkpoint is corrupt, truncated, not a checkpoint, or over a limit",
    "",
  ].join("\n");
}

/** The exit code for an error a command raised. */
function exitCodeOf(e: unknown): number {
  if (e instanceof UsageError) return EXIT.usage;
  if (e instanceof OsErrors.BrokenPipe) return EXIT.pipe;
  if (e instanceof FileError) return e.cause instanceof OsErrors.BrokenPipe ? EXIT.pipe : EXIT.io;
  if (isOsError(e)) return EXIT.io;
  if (
    e instanceof BadCheckpointError || e instanceof ChecksumMismatchError || e instanceof SyntaxError ||
    e instanceof RangeError
  ) {
    return EXIT.bad;
  }
  return EXIT.internal;
}

function messageOf(e: unknown, code: number, command: string | undefined): string {
  const raw = e instanceof Error ? e.message : String(e);
  let message = safeText(raw.replace(/\s*\n\s*/g, " ").trim());
  if (code === EXIT.io && !(e instanceof FileError)) message = osReason(e);
  if (code === EXIT.usage) message += ` (see ckpt${command ? ` ${command}` : ""} --help)`;
  if (code === EXIT.internal) message = `internal error: ${message} (rerun with --debug for a stack trace)`;
  return message;
}

/**
 * Runs the command line `args` (without the program name) and resolves to the exit code. Errors
 * are reported on `io.stderr` as one line, `ckpt <command>: <what went wrong>`, with a stack trace
 * only under `--debug`. Standard streams default to the process's own.
 *
 * @example
 * ```ts
 * import { main } from "./main.ts";
 * import assert from "node:assert/strict";
 * let err = "";
 * const stderr = new WritableStream<Uint8Array>({ write: (c) => { err += new TextDecoder().decode(c); } });
 * assert.equal(await main(["verify", "/no/such/file.ckpt"], { stderr }), 3);
 * assert.match(err, /^ckpt verify: Cannot read "\/no\/such\/file.ckpt": No such file or directory\n$/);
 * ```
 */
export async function main(args: readonly string[], io: Partial<CliIO> = {}): Promise<number> {
  const std: CliIO = { ...processIO(), ...io };
  if (io.stdout && io.stdoutIsTerminal === undefined) std.stdoutIsTerminal = false;
  if (io.stderr && io.stderrIsTerminal === undefined) std.stderrIsTerminal = false;
  if (io.stdin && io.stdinIsTerminal === undefined) std.stdinIsTerminal = false;
  let command: Command | undefined;
  let debug = args.includes("--debug");
  try {
    const { tokens } = parseArgs({ args: [...args], strict: false, allowPositionals: true, tokens: true });
    const at = tokens.find((t) => t.kind === "positional")?.index ?? args.length;
    let global;
    try {
      global = parseArgs({
        args: args.slice(0, at),
        strict: true,
        allowPositionals: false,
        options: { help: { type: "boolean", short: "h" }, version: { type: "boolean" }, debug: { type: "boolean" } },
      }).values;
    } catch (e) {
      throw new UsageError(parseArgsMessage(e));
    }
    debug ||= global.debug === true;
    if (global.version) {
      await write(std.stdout, `ckpt ${VERSION}\n`);
      return EXIT.ok;
    }
    let name = args[at];
    let rest = args.slice(at + 1);
    if (name === "help") {
      if (rest.length === 0) name = undefined;
      else [name, rest] = [rest[0], ["--help"]];
    }
    if (name === undefined) {
      await write(global.help ? std.stdout : std.stderr, topHelp());
      return global.help ? EXIT.ok : EXIT.usage;
    }
    command = COMMANDS.find((c) => c.name === name);
    if (!command) {
      throw new UsageError(`unknown command ${JSON.stringify(name)}: use ${COMMANDS.map((c) => c.name).join(", ")}`);
    }
    if (global.help) rest = ["--help"];
    const { values, positionals } = parseCommand(command, rest);
    if (values.help) {
      await write(std.stdout, commandHelp(command));
      return EXIT.ok;
    }
    return await command.run(values, positionals, std);
  } catch (e) {
    const code = exitCodeOf(e);
    if (code === EXIT.pipe) return code;
    const line = `ckpt${command ? ` ${command.name}` : ""}: ${messageOf(e, code, command?.name)}\n`;
    const trace = debug ? stackTrace(e) : "";
    try {
      await write(std.stderr, line + trace);
    } catch { /* nowhere left to report */ }
    return code;
  }
}

if (import.meta.main) thisProcess.exit(await main(thisProcess.args));
