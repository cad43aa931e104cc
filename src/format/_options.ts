// Option objects are checked by name, so that a misspelt or misplaced option (`{ codec }` on a
// load, `{ compresion }` on a save) is a TypeError rather than silently ignored.

/**
 * Throws a `TypeError` naming the first key of `options` not in `known`; `hints` may give a
 * reason for a name that is known elsewhere (such as `codec` on a load).
 */
export function checkOptionNames(
  options: unknown,
  known: readonly string[],
  context: string,
  hints: Readonly<Record<string, string>> = {},
): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new TypeError(`${context}: options must be an object`);
  }
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const hint = Object.hasOwn(hints, name) ? `: ${hints[name]}` : ` (known options: ${known.join(", ")})`;
    throw new TypeError(`${context}: unknown option ${JSON.stringify(name)}${hint}`);
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
