// The comparison's options, checked by name at every depth: a misspelt tolerance
// (`{ dtypes: { float16: { atoll: 1e-3 } } }`, `names: [{ patern: "head/*" }]`) is a TypeError
// naming its path, never a comparison silently stricter or looser than asked for.
import { checkOptionNames, LIMIT_OPTION_NAMES, optionNames } from "../format/_options.ts";
import type { DecodeOptions } from "../format/decode.ts";
import { DTYPES } from "../format/dtype.ts";
import type { DiffOptions, NameTolerance } from "./checkpoint_diff.ts";
import type { Tolerance } from "./tensor_diff.ts";

const TOLERANCE_NAMES = optionNames<Tolerance>()(["atol", "rtol"]);
const NAME_TOLERANCE_NAMES = optionNames<NameTolerance>()(["pattern", "atol", "rtol"]);
/** Every option {@linkcode diffCheckpoints} takes. */
export const DIFF_OPTION_NAMES = optionNames<DiffOptions>()([
  "atol",
  "rtol",
  "equalNaN",
  "signedZero",
  "dtypes",
  "names",
  "metrics",
  "ignoreMetadata",
  "bufferBytes",
]);
const DECODE_OPTION_NAMES = optionNames<DecodeOptions>()([
  "codecs",
  "reuseBuffers",
  "parallelHash",
  ...LIMIT_OPTION_NAMES,
]);

/**
 * Checks a comparison's options by name at every depth. `extra` are the names the caller adds
 * (an assertion's `message`, a snapshot's `dir`); `decode`, when among them, is checked too.
 */
export function checkDiffOptions(options: unknown, context: string, extra: readonly string[] = []): void {
  checkOptionNames(options, [...DIFF_OPTION_NAMES, ...extra], context);
  const o = options as DiffOptions & { decode?: unknown };
  if (o.dtypes !== undefined) {
    checkOptionNames(o.dtypes, Object.keys(DTYPES), context, {}, "dtypes.");
    for (const [dtype, t] of Object.entries(o.dtypes)) {
      if (t !== undefined) checkOptionNames(t, TOLERANCE_NAMES, context, {}, `dtypes.${dtype}.`);
    }
  }
  if (Array.isArray(o.names)) {
    o.names.forEach((n, i) => checkOptionNames(n, NAME_TOLERANCE_NAMES, context, {}, `names[${i}].`));
  }
  if (o.metrics !== undefined) checkOptionNames(o.metrics, TOLERANCE_NAMES, context, {}, "metrics.");
  if (extra.includes("decode") && o.decode !== undefined) {
    checkOptionNames(o.decode, DECODE_OPTION_NAMES, context, {}, "decode.");
  }
}
