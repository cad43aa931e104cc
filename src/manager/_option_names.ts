// The names of the manager's options, checked at every depth (`best.metirc`, `limits.…`,
// `storage.s3.…`), and the metric `best()` ranks by. `optionNames` fails the type check when
// CheckpointManagerOptions gains an option the list lacks, so a new option is never refused.
import { checkOptionNames, LIMIT_OPTION_NAMES, optionNames } from "../format/_options.ts";
import { checkStorageOptions } from "../storage/_storage_options.ts";
import type { BestBy, BestPolicy, CheckpointManagerOptions } from "./options.ts";
import type { DecodeLimits } from "../format/limits.ts";
import type { RetentionPolicy } from "./_retention.ts";

/** Every option {@linkcode CheckpointManagerOptions} has; any other name, at any depth, is a `TypeError`. */
const MANAGER_OPTION_NAMES = optionNames<CheckpointManagerOptions>()([
  "maxToKeep",
  "keepEvery",
  "best",
  "codec",
  "compression",
  "filename",
  "incremental",
  "groups",
  "verify",
  "writer",
  "sync",
  "recycle",
  "readOnly",
  "onWarning",
  "storage",
  "limits",
]);
const BEST_OPTION_NAMES = optionNames<BestPolicy>()(["metric", "mode", "keep"]);
const LIMIT_NAMES = optionNames<DecodeLimits>()([...LIMIT_OPTION_NAMES]);
const CONTEXT = "Cannot open checkpoint manager";

/** Checks the names of the manager's options and of the objects inside them. */
export function checkNames(options: CheckpointManagerOptions): void {
  checkOptionNames(options, MANAGER_OPTION_NAMES, CONTEXT, {
    ...Object.fromEntries(LIMIT_OPTION_NAMES.map((n) => [n, `caps go under limits: { ${n} }`])),
  });
  if (typeof options.best === "object" && options.best !== null) {
    checkOptionNames(options.best, BEST_OPTION_NAMES, CONTEXT, {}, "best.");
  }
  if (options.limits !== undefined) checkOptionNames(options.limits, LIMIT_NAMES, CONTEXT, {}, "limits.");
  checkStorageOptions(options.storage, CONTEXT);
}

/**
 * The metric `best()` ranks by: `by` when given (checked by name and value), else the manager's
 * own `best` retention rule; a `TypeError` naming both ways when there is neither.
 */
export function resolveBestBy(by: BestBy | undefined, configured: RetentionPolicy["best"]): BestBy {
  const context = "Cannot find the best checkpoint";
  if (by === undefined) {
    if (configured) return { metric: configured.metric, mode: configured.mode };
    throw new TypeError(
      `${context}: no metric to rank by; pass { metric, mode } or open the manager with best: { metric, mode }`,
    );
  }
  checkOptionNames(by, BEST_OPTION_NAMES.filter((n) => n !== "keep"), context);
  if (typeof by.metric !== "string" || by.metric === "") throw new TypeError(`${context}: metric must be a name`);
  if (by.mode !== "min" && by.mode !== "max") {
    throw new TypeError(`${context}: mode must be "min" or "max", got ${JSON.stringify(by.mode)}`);
  }
  return { metric: by.metric, mode: by.mode };
}
