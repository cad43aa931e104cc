// Options resolved once: defaults filled in, every value checked, and the retention rules in force.

import type { Codec } from "../format/codec.ts";
import { type CodecName, type Compression, resolveCodec } from "../format/encode.ts";
import { type DecodeLimits, resolveLimits } from "../format/limits.ts";
import { saveCheckpoint } from "../io/save.ts";
import {
  type CheckpointFileWriter,
  type CheckpointManagerOptions,
  DEFAULT_FILENAME,
  DEFAULT_MAX_TO_KEEP,
} from "./options.ts";
import type { ResolveOptions } from "../storage/resolve.ts";
import { checkNames } from "./_option_names.ts";
import { compilePattern, type FilenamePattern } from "./_pattern.ts";
import type { RetentionPolicy } from "./_retention.ts";

export interface Resolved {
  maxToKeep: number;
  keepEvery: number | undefined;
  best: RetentionPolicy["best"];
  /** Which retention options the caller gave; a read-only view takes the others from the index. */
  given: { maxToKeep: boolean; keepEvery: boolean; best: boolean };
  /** The retention rules recorded in the index (read-only views). */
  stored?: RetentionPolicy | undefined;
  codec: CodecName | Codec;
  compression: Compression;
  pattern: FilenamePattern;
  incremental: boolean;
  groups: ReadonlySet<string> | undefined;
  verify: boolean;
  writer: CheckpointFileWriter;
  sync: boolean;
  recycle: boolean;
  readOnly: boolean;
  onWarning: (message: string) => void;
  limits: Required<DecodeLimits>;
  codecs: Codec[];
  storage: ResolveOptions | undefined;
}

export const inProcessWriter: CheckpointFileWriter = {
  save: (path, checkpoint, options) => saveCheckpoint(path, checkpoint, options),
};

function positiveInteger(v: unknown, name: string, allowInfinity = false): void {
  if (allowInfinity && v === Infinity) return;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
    throw new TypeError(
      `Invalid option ${name}: ${String(v)} is not a positive integer${allowInfinity ? " or Infinity" : ""}`,
    );
  }
}

export function resolveOptions(options: CheckpointManagerOptions): Resolved {
  if (typeof options !== "object" || options === null) throw new TypeError("Invalid options: expected an object");
  checkNames(options);
  const maxToKeep = options.maxToKeep ?? DEFAULT_MAX_TO_KEEP;
  positiveInteger(maxToKeep, "maxToKeep", true);
  if (options.keepEvery !== undefined) positiveInteger(options.keepEvery, "keepEvery");
  let best: RetentionPolicy["best"];
  if (options.best !== undefined) {
    const b = options.best;
    if (typeof b !== "object" || b === null || typeof b.metric !== "string" || b.metric === "") {
      throw new TypeError("Invalid option best: expected { metric, mode, keep? } with a metric name");
    }
    if (b.mode !== "min" && b.mode !== "max") {
      throw new TypeError(`Invalid option best.mode: ${JSON.stringify(b.mode)}, expected "min" or "max"`);
    }
    positiveInteger(b.keep ?? 1, "best.keep");
    best = { metric: b.metric, mode: b.mode, keep: b.keep ?? 1 };
  }
  const codec = options.codec ?? "binary";
  const resolvedCodec = resolveCodec(codec);
  const compression = options.compression ?? "none";
  if (compression !== "none" && compression !== "gzip" && compression !== "bytegroup") {
    throw new TypeError(
      `Invalid option compression: ${JSON.stringify(compression)}, expected "none", "gzip" or "bytegroup"`,
    );
  }
  const incremental = options.incremental ?? false;
  if (typeof incremental !== "boolean") throw new TypeError("Invalid option incremental: expected a boolean");
  if (compression === "bytegroup" && (incremental || resolvedCodec.name !== "binary")) {
    throw new TypeError(
      'Invalid options: compression "bytegroup" applies to full checkpoints in the binary codec (not incremental: true, not another codec)',
    );
  }
  if (incremental && options.writer !== undefined) {
    throw new TypeError("Invalid options: writer is not used with incremental: true (the manager writes blobs itself)");
  }
  if (options.writer !== undefined && typeof options.writer?.save !== "function") {
    throw new TypeError("Invalid option writer: expected an object with save(path, checkpoint, options)");
  }
  let groups: Set<string> | undefined;
  if (options.groups !== undefined) {
    if (!Array.isArray(options.groups) || options.groups.some((g) => typeof g !== "string")) {
      throw new TypeError("Invalid option groups: expected an array of group names");
    }
    groups = new Set(options.groups);
  }
  if (options.onWarning !== undefined && typeof options.onWarning !== "function") {
    throw new TypeError("Invalid option onWarning: expected a function");
  }
  return {
    maxToKeep,
    keepEvery: options.keepEvery,
    best,
    given: {
      maxToKeep: options.maxToKeep !== undefined,
      keepEvery: options.keepEvery !== undefined,
      best: options.best !== undefined,
    },
    codec,
    compression,
    pattern: compilePattern(options.filename ?? DEFAULT_FILENAME),
    incremental,
    groups,
    verify: options.verify ?? true,
    writer: options.writer ?? inProcessWriter,
    sync: options.sync ?? true,
    recycle: options.recycle ?? false,
    readOnly: options.readOnly ?? false,
    onWarning: options.onWarning ?? ((m) => console.warn(m)),
    limits: resolveLimits(options.limits),
    codecs: typeof codec === "string" ? [] : [resolvedCodec],
    storage: options.storage,
  };
}

/**
 * The retention rules in force: the options given; for a read-only view, the rules recorded in
 * the index by the writer for each option not given.
 */
export function policyOf(o: Resolved): RetentionPolicy {
  const stored = o.readOnly ? o.stored : undefined;
  return {
    maxToKeep: !o.given.maxToKeep && stored ? stored.maxToKeep : o.maxToKeep,
    keepEvery: !o.given.keepEvery && stored ? stored.keepEvery : o.keepEvery,
    best: !o.given.best && stored ? stored.best : o.best,
  };
}
