// The interop functions' options, checked by name (and `storage` at every depth), each list held
// complete by the compiler: a misspelt option is a TypeError naming it, never ignored.
import { checkOptionNames, LIMIT_OPTION_NAMES, optionNames } from "../format/_options.ts";
import { checkStorageOptions } from "../storage/_storage_options.ts";
import { SAVE_OPTION_NAMES } from "../io/save.ts";
import type { CkptHandlerOptions } from "./io_handler.ts";
import type { ReadSafetensorsOptions } from "./safetensors_read.ts";
import type { SidecarOptions } from "./sidecar.ts";
import type { ReadTfjsOptions, WriteTfjsOptions } from "./tfjs_artifacts.ts";

const DECODE = ["codecs", "reuseBuffers", "parallelHash", ...LIMIT_OPTION_NAMES] as const;

const NAMES = {
  writeTfjs: optionNames<WriteTfjsOptions>()(["narrow", ...DECODE, "storage", "shardBytes", "sync"]),
  readTfjs: optionNames<ReadTfjsOptions>()([...DECODE, "storage", "allowOutsideShards"]),
  handler: optionNames<CkptHandlerOptions>()([
    ...SAVE_OPTION_NAMES,
    ...DECODE,
    "narrow",
    "metadata",
    "verify",
    "sidecar",
  ]),
  safetensors: optionNames<ReadSafetensorsOptions>()([...LIMIT_OPTION_NAMES, "storage"]),
  sidecar: optionNames<SidecarOptions>()(["storage", "sync"]),
};

/** Checks the options of one of the interop functions by name, `storage` at every depth. */
export function checkInteropOptions(kind: keyof typeof NAMES, options: unknown, context: string): void {
  checkOptionNames(options, NAMES[kind], context);
  checkStorageOptions((options as { storage?: unknown }).storage, context);
}
