// Option objects are checked by name, at every depth, so that a misspelt or misplaced option
// (`{ codec }` on a load, `{ compresion }` on a save, `storage.s3.endpiont`) is a TypeError
// naming its path and the names allowed there, rather than silently ignored.

/**
 * Throws a `TypeError` naming the first key of `options` not in `known`, by its path from the
 * options object the caller passed (`path` is the prefix, such as `"storage.s3."`); `hints` may
 * give a reason for a name that is known elsewhere (such as `codec` on a load).
 */
export function checkOptionNames(
  options: unknown,
  known: readonly string[],
  context: string,
  hints: Readonly<Record<string, string>> = {},
  path = "",
): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new TypeError(`${context}: ${path === "" ? "options" : `option ${path.slice(0, -1)}`} must be an object`);
  }
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const at = path === "" ? "" : ` at ${path.slice(0, -1)}`;
    const hint = Object.hasOwn(hints, name) ? `: ${hints[name]}` : ` (known options${at}: ${known.join(", ")})`;
    throw new TypeError(`${context}: unknown option ${JSON.stringify(path + name)}${hint}`);
  }
}

/** The option names of the decode caps, for lists of known option names. */
export const LIMIT_OPTION_NAMES = [
  "maxTensorBytes",
  "maxHeaderBytes",
  "maxRank",
  "maxTensors",
  "maxLineBytes",
  "maxDecodedBytes",
  "maxCompressionRatio",
] as const;

/**
 * The option names of `T`, as a list the compiler holds complete: a field of `T` missing from
 * the list is a type error naming it, so a new option cannot be forgotten by the name check.
 * Call it as `optionNames<SaveOptions>()(["codec", ...])`.
 */
export function optionNames<T>(): <const N extends readonly (keyof T & string)[]>(
  names: N & ([Exclude<keyof T, N[number]>] extends [never] ? unknown : { missing: Exclude<keyof T, N[number]> }),
) => N {
  return (names) => names;
}
