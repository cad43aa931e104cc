/**
 * `ckpt ls`: a checkpoint manager directory's checkpoints, with step, time, size, metrics,
 * digest, status, and which ones retention keeps (as best, among the newest, every K steps).
 * The status says what was checked: `header ok` (sizes, header and index, no tensor data read)
 * or, with `--verify`, `verified` (every tensor read and its digests checked).
 *
 * @module
 */
import { join } from "node:path";
import { CheckpointManager, type CheckpointManagerOptions, type ListedCheckpoint } from "../manager/mod.ts";
import { isDamage, isNotFound } from "../manager/_errors.ts";
import { INDEX_FILE } from "../manager/_index.ts";
import { resolveDirectory } from "../storage/resolve.ts";
import type { ObjectStore } from "../storage/types.ts";
import { type Command, numberOption, type Values } from "./_command.ts";
import {
  BadCheckpointError,
  type CliIO,
  EXIT,
  FileError,
  humanBytes,
  isOsError,
  isRemote,
  jsonNumber,
  numberText,
  osReason,
  safeText,
  table,
  UsageError,
  write,
} from "./_io.ts";
import { OsErrors } from "../runtime/errors.ts";
import { type FileInfo, files } from "../runtime/files.ts";

/** `METRIC[:min|max]` as the manager's best policy. */
function bestOption(values: Values): { metric: string; mode: "min" | "max"; keep: number } | undefined {
  const raw = values.best;
  const keep = numberOption(values, "keep-best", 1);
  if (!Number.isSafeInteger(keep) || keep < 1) throw new UsageError("--keep-best must be a positive integer");
  if (raw === undefined) {
    if (values["keep-best"] !== undefined) throw new UsageError("--keep-best needs --best METRIC[:min|max]");
    return undefined;
  }
  const text = String(raw);
  const colon = text.lastIndexOf(":");
  const suffix = colon >= 0 ? text.slice(colon + 1) : "";
  const explicit = suffix === "min" || suffix === "max";
  const metric = explicit ? text.slice(0, colon) : text;
  const mode: "min" | "max" = explicit ? suffix : "min";
  if (metric === "") {
    throw new UsageError(`--best must be METRIC or METRIC:min or METRIC:max, got ${JSON.stringify(raw)}`);
  }
  return { metric, mode, keep };
}

function integerOption(values: Values, name: string): number | undefined {
  if (values[name] === undefined) return undefined;
  const v = numberOption(values, name, 0);
  if (!Number.isSafeInteger(v) || v < 1) throw new UsageError(`--${name} must be a positive integer`);
  return v;
}

async function listDir(dir: string, values: Values, warnings: string[]): Promise<Listed[]> {
  const maxToKeep = integerOption(values, "max-to-keep");
  const keepEvery = integerOption(values, "keep-every");
  const best = bestOption(values);
  const rules = {
    ...(maxToKeep !== undefined ? { maxToKeep } : {}),
    ...(keepEvery !== undefined ? { keepEvery } : {}),
    ...(best ? { best } : {}),
  };
  let target: string | ObjectStore = dir;
  if (isRemote(dir)) {
    // An object-storage or HTTP directory: the index must be there (a read-only view needs it).
    try {
      target = resolveDirectory(dir);
      if ((await target.head(INDEX_FILE)) === undefined) {
        throw new FileError(
          `Cannot list ${JSON.stringify(dir)}: not a checkpoint manager directory (no ${INDEX_FILE})`,
        );
      }
    } catch (e) {
      if (e instanceof FileError) throw e;
      throw new FileError(`Cannot list ${JSON.stringify(dir)}: ${(e as Error).message ?? String(e)}`, { cause: e });
    }
    return await listManager(dir, target, rules, warnings, values.verify === true);
  }
  let info: FileInfo;
  try {
    info = await files.stat(dir);
  } catch (e) {
    throw new FileError(`Cannot read ${JSON.stringify(dir)}: ${osReason(e)}`, { cause: e });
  }
  if (!info.isDirectory) throw new FileError(`Cannot list ${JSON.stringify(dir)}: it is not a directory`);
  try {
    await files.stat(join(dir, INDEX_FILE));
  } catch (e) {
    if (e instanceof OsErrors.NotFound) {
      throw new FileError(
        `Cannot list ${JSON.stringify(dir)}: not a checkpoint manager directory (no ${INDEX_FILE})`,
      );
    }
    throw new FileError(`Cannot read ${JSON.stringify(join(dir, INDEX_FILE))}: ${osReason(e)}`, { cause: e });
  }
  return await listManager(dir, target, rules, warnings, values.verify === true);
}

/** A listed checkpoint, whether its tensor data was read and checked, and (with --mirror) its tier. */
type Listed = ListedCheckpoint & { verified: boolean; tier?: "local" | "mirror" };

/**
 * Lists a manager directory, read-only, with retention rules given on the command line; with
 * `verify`, loads each checkpoint that lists as sound (one at a time, every digest checked) and
 * marks it verified or damaged.
 */
async function listManager(
  dir: string,
  target: string | ObjectStore,
  rules: CheckpointManagerOptions,
  warnings: string[],
  verify: boolean,
): Promise<Listed[]> {
  let manager: CheckpointManager;
  try {
    manager = await CheckpointManager.open(target, {
      readOnly: true,
      onWarning: (m) => warnings.push(m),
      ...rules,
    });
  } catch (e) {
    if (isOsError(e)) throw new FileError(`Cannot list ${JSON.stringify(dir)}: ${osReason(e)}`, { cause: e });
    if (e instanceof SyntaxError || e instanceof RangeError) {
      throw new BadCheckpointError(e.message);
    }
    throw e;
  }
  try {
    const listed: Listed[] = (await manager.list()).map((e) => ({ ...e, verified: false }));
    if (verify) {
      for (const e of listed) {
        if (e.status !== "ok") continue;
        try {
          await manager.load(e.step);
          e.verified = true;
        } catch (err) {
          if (!isDamage(err)) throw err;
          e.status = isNotFound(err) ? "missing" : "damaged";
          e.problem = (err as Error).message;
        }
      }
    }
    return listed;
  } finally {
    await manager.close();
  }
}

/** The status word of the text table: what was checked, or what is wrong. */
function statusText(e: Listed): string {
  if (e.status !== "ok") return e.status;
  return e.verified ? "verified" : "header ok";
}

const MEANINGS: readonly (readonly [string, string])[] = [
  ["header ok", "files present, sizes, headers and indexes check out; tensor data not read (--verify reads it)"],
  ["verified", "every tensor read and its digests checked"],
  ["damaged", "see standard error"],
  ["missing", "see standard error"],
];

/** A line saying what each status word the table shows means. */
function legend(entries: readonly Listed[]): string {
  const shown = new Set(entries.map(statusText));
  return `status: ${MEANINGS.filter(([word]) => shown.has(word)).map(([w, m]) => `${w}: ${m}`).join("; ")}\n`;
}

function metricsText(e: ListedCheckpoint): string {
  return Object.entries(e.metadata.metrics ?? {}).map(([k, v]) => `${k}=${numberText(v)}`).join(" ");
}

function asJson(entries: Listed[]): string {
  return JSON.stringify(
    entries.map((e) => ({
      step: e.step,
      epoch: e.metadata.epoch ?? null,
      savedAt: e.savedAt,
      path: e.path,
      kind: e.kind,
      bytes: e.bytes,
      bytesWritten: e.bytesWritten,
      sha256: e.sha256,
      tensors: e.tensorCount,
      metrics: Object.fromEntries(Object.entries(e.metadata.metrics ?? {}).map(([k, v]) => [k, jsonNumber(v)])),
      best: e.best,
      bestRank: e.bestRank ?? null,
      keptBy: e.keptBy,
      status: e.status,
      checked: e.verified ? "data" : "header",
      problem: e.problem ?? null,
      ...(e.tier === undefined ? {} : { tier: e.tier }),
    })),
    null,
    2,
  ) + "\n";
}

function asText(entries: Listed[], showBest: boolean): string {
  if (entries.length === 0) return "no checkpoints\n";
  const tiers = entries.some((e) => e.tier !== undefined);
  const header = ["step", ...(tiers ? ["tier"] : []), "saved", "size", "kind", "tensors", "metrics"];
  if (showBest) header.push("best");
  header.push("kept", "status", "digest");
  const rows = [header];
  for (const e of entries) {
    const row = [
      String(e.step),
      ...(tiers ? [e.tier ?? ""] : []),
      e.savedAt.replace(/\.\d+Z$/, "Z"),
      humanBytes(e.bytes),
      e.kind,
      String(e.tensorCount),
      metricsText(e) || "-",
    ];
    if (showBest) row.push(e.best ? `#${e.bestRank}` : "-");
    row.push(
      e.keptBy.length ? e.keptBy.join(",") : "no (retention would delete it)",
      statusText(e),
      e.sha256.slice(0, 12),
    );
    rows.push(row);
  }
  const total = entries.reduce((s, e) => s + e.bytes, 0);
  return table(rows, tiers ? [true, false, false, true, false, true] : [true, false, true, false, true]) +
    `${entries.length} checkpoint${entries.length === 1 ? "" : "s"}, ${humanBytes(total)}\n` + legend(entries);
}

async function run(values: Values, positionals: string[], io: CliIO): Promise<number> {
  const dir = positionals[0]!;
  const warnings: string[] = [];
  let entries: Listed[] = await listDir(dir, values, warnings);
  if (values.mirror !== undefined) {
    // Both tiers of a MirroredManager: the local directory and its mirror, by step.
    const mirror = await listDir(String(values.mirror), values, warnings);
    entries = [
      ...entries.map((e) => ({ ...e, tier: "local" as const })),
      ...mirror.map((e) => ({ ...e, tier: "mirror" as const })),
    ].sort((a, b) => a.step - b.step || a.tier.localeCompare(b.tier));
  }
  const showBest = values.best !== undefined || entries.some((e) => e.best);
  await write(io.stdout, values.json ? asJson(entries) : asText(entries, showBest));
  // What the manager said about the directory itself (a damaged index it rebuilt a view of, files
  // it would not adopt); a damaged checkpoint's own line follows below.
  for (const w of warnings.filter((w) => !/^Checkpoint step \d+ /.test(w))) {
    await write(io.stderr, `ckpt ls: warning: ${safeText(w.replace(/\s*\n\s*/g, " "))}\n`);
  }
  const bad = entries.filter((e) => e.status !== "ok");
  for (const e of bad) {
    const problem = safeText((e.problem ?? "").replace(/\s*\n\s*/g, " "));
    await write(io.stderr, `ckpt ls: step ${e.step} is ${e.status}: ${problem}\n`);
  }
  return bad.length > 0 ? EXIT.bad : EXIT.ok;
}

/**
 * The `ls` command, as `ckpt ls` runs it.
 *
 * @example
 * ```ts
 * import { lsCommand } from "./ls.ts";
 * import { main } from "./main.ts";
 * import { CheckpointManager } from "../manager/mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const manager = await CheckpointManager.open(dir);
 * await manager.save({ metadata: { step: 10, metrics: { loss: 0.5 } }, tensors: [] });
 * await manager.close();
 * let out = "";
 * const stdout = new WritableStream<Uint8Array>({ write: (c) => void (out += new TextDecoder().decode(c)) });
 * assert.equal(await main([lsCommand.name, "--json", dir], { stdout }), 0);
 * assert.deepEqual(JSON.parse(out).map((e: { step: number }) => e.step), [10]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export const lsCommand: Command = {
  name: "ls",
  summary: "list a checkpoint manager directory: steps, times, sizes, metrics, best",
  synopsis: "[options] DIR",
  description: `
Lists the checkpoints a CheckpointManager committed in DIR, ordered by step: when each was
saved, its size on disk, full or incremental, tensor count, metrics, why retention keeps it
(recent, every, best), its status and the start of its digest (which ckpt verify --sha256
takes; --json gives it whole).

The directory is opened read-only (no lock is taken; a training process may keep writing). By
default no tensor data is read: each file's size, header and index (or manifest) is checked, and
the status says so ("header ok"; "checked": "header" in --json). --verify also reads every
checkpoint, one at a time, and checks every tensor's digest (and a file's recorded SHA-256):
"verified" ("checked": "data"), or "damaged" with the reason. A checkpoint whose file is
missing or damaged is listed with its status and reported on standard error, and the exit code
is then 4. A damaged index.json is
not an error: ls warns and lists what a writing manager would rebuild it from (the checkpoint
files that verify), which is what that manager would resume from; nothing is rewritten.

The retention rules (max-to-keep, keep-every, best) are the ones the writing manager recorded in
the directory's index.json; --best, --keep-best, --max-to-keep and --keep-every override them, to
see what other rules would keep.

With --mirror ADDR, the mirror of a MirroredManager is listed too, each row saying its tier
(local or mirror).`,
  options: {
    best: {
      type: "string",
      arg: "METRIC[:min|max]",
      help: "mark the best checkpoints by this metric (min by default)",
    },
    "keep-best": { type: "string", arg: "K", help: "how many best checkpoints are kept (default: 1)" },
    "max-to-keep": { type: "string", arg: "N", help: "the manager's maxToKeep (default: 5)" },
    "keep-every": { type: "string", arg: "K", help: "the manager's keepEvery" },
    json: { type: "boolean", help: "print one JSON array instead of text" },
    verify: {
      type: "boolean",
      help: "read every checkpoint and check every digest (status verified or damaged), not only headers",
    },
    mirror: {
      type: "string",
      arg: "ADDR",
      help: "also list the mirror of a MirroredManager (s3://bucket/prefix, a directory), with a tier column",
    },
  },
  positionals: { min: 1, max: 1 },
  examples: [
    ["ckpt ls runs/mnist", "steps, times, sizes, metrics"],
    ["ckpt ls --verify runs/mnist", "and read every checkpoint, checking every digest"],
    ["ckpt ls runs/mnist --best val_loss:min --keep-best 3", "which are kept as best"],
    ["ckpt ls --json runs/mnist | jq '.[-1].path'", "the latest checkpoint's file"],
    ["ckpt ls runs/mnist --mirror s3://ckpt/mnist", "both tiers of a MirroredManager"],
  ],
  exits: [],
  run,
};
