// How a command is declared, how its arguments are parsed (node:util parseArgs) and how its
// help is written. Every command gets --help and --debug.

import { parseArgs } from "node:util";
import { type CliIO, UsageError } from "./_io.ts";

/** One option of a command. */
export interface OptionSpec {
  /** `boolean` for a flag, `string` for an option with a value. */
  type: "boolean" | "string";
  /** One-letter alias. */
  short?: string;
  /** Placeholder for the value in the help, such as `N`. */
  arg?: string;
  /** One line for the help. */
  help: string;
}

/** Parsed option values. */
export type Values = Record<string, string | boolean | undefined>;

/** A command: its help text and what it does. */
export interface Command {
  name: string;
  /** One line for `ckpt --help`. */
  summary: string;
  /** Argument synopsis after the command name, such as `[options] FILE|-`. */
  synopsis: string;
  /** Paragraphs explaining what the command does (memory use, output). */
  description: string;
  options: Record<string, OptionSpec>;
  /** How many positional arguments it takes. */
  positionals: { min: number; max: number };
  /** Example command lines with a comment each. */
  examples: readonly (readonly [string, string])[];
  /** Exit codes this command uses, beyond the common ones. */
  exits: readonly (readonly [number, string])[];
  /** Runs the command; resolves to the exit code. */
  run(values: Values, positionals: string[], io: CliIO): Promise<number>;
}

const COMMON: Record<string, OptionSpec> = {
  help: { type: "boolean", short: "h", help: "show this help" },
  debug: { type: "boolean", help: "show a stack trace with any error" },
};

/** Parses a command's arguments; a bad command line is a {@linkcode UsageError}. */
export function parseCommand(command: Command, args: string[]): { values: Values; positionals: string[] } {
  const options = Object.fromEntries(
    Object.entries({ ...command.options, ...COMMON }).map((
      [k, o],
    ) => [k, o.short ? { type: o.type, short: o.short } : { type: o.type }]),
  );
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(parseArgsMessage(e));
  }
  const values = parsed.values as Values;
  if (values.help) return { values, positionals: parsed.positionals };
  const n = parsed.positionals.length;
  const { min, max } = command.positionals;
  if (n < min) {
    throw new UsageError(`missing argument: expected ${command.synopsis.replace(/\[options\]\s*/, "")}`);
  }
  if (n > max) throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[max])}`);
  return { values, positionals: parsed.positionals };
}

/** node:util's message, first sentence only and without its trailing period. */
export function parseArgsMessage(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const first = message.split(/\.\s|\n/)[0]!.replace(/\.$/, "");
  return first.charAt(0).toLowerCase() + first.slice(1);
}

/** The full help of a command. */
export function commandHelp(command: Command): string {
  const opts = { ...command.options, ...COMMON };
  const rows = Object.entries(opts).map(([k, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : "    "}--${k}${o.type === "string" ? ` ${o.arg ?? "VALUE"}` : ""}`;
    return [flag, o.help] as const;
  });
  const width = Math.max(...rows.map(([f]) => f.length));
  const exits = [
    [0, "success"],
    ...command.exits,
    [2, "bad command line"],
    [3, "a file or stream cannot be read or written"],
    [4, "a checkpoint is corrupt, truncated, not a checkpoint, or over a limit"],
  ] as const;
  const exampleWidth = Math.max(...command.examples.map(([c]) => c.length));
  return [
    `Usage: ckpt ${command.name} ${command.synopsis}`,
    "",
    command.description.trim(),
    "",
    "Options:",
    ...rows.map(([f, h]) => `  ${f.padEnd(width)}  ${h}`),
    "",
    "Examples:",
    ...command.examples.map(([c, why]) => `  ${c.padEnd(exampleWidth)}  # ${why}`),
    "",
    "Exit codes:",
    ...exits.map(([code, why]) => `  ${String(code).padStart(3)}  ${why}`),
    "",
  ].join("\n");
}

/** A string option as a number, or a usage error naming the option. */
export function numberOption(values: Values, name: string, fallback: number): number {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const v = Number(raw);
  if (typeof raw !== "string" || raw.trim() === "" || !Number.isFinite(v) || v < 0) {
    throw new UsageError(`--${name} must be a non-negative number, got ${JSON.stringify(raw)}`);
  }
  return v;
}

/** A string option constrained to a set of values, or a usage error naming the choices. */
export function choiceOption<T extends string>(values: Values, name: string, choices: readonly T[], fallback: T): T {
  const raw = values[name];
  if (raw === undefined) return fallback;
  if (typeof raw !== "string" || !(choices as readonly string[]).includes(raw)) {
    const list = choices.length > 1 ? `${choices.slice(0, -1).join(", ")} or ${choices.at(-1)}` : choices[0];
    throw new UsageError(`--${name} must be ${list}, got ${JSON.stringify(raw)}`);
  }
  return raw as T;
}
