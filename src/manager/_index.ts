// The index of committed checkpoints, `index.json`: ordered by step, replaced atomically after
// every change by a conditional write (on a file system: temporary file, fsync, rename, fsync of
// the directory). A checkpoint is committed exactly when it is listed here.

import { metadataFromJson, metadataToJson } from "../format/metadata.ts";
import type { Metadata } from "../format/types.ts";
import type { ObjectInfo, PutMode } from "../storage/types.ts";
import type { Location } from "./_location.ts";
import type { RetentionPolicy } from "./_retention.ts";
import type { CheckpointEntry } from "./entry.ts";

/** The index file's name inside a checkpoint directory. */
export const INDEX_FILE = "index.json";
const FORMAT = "ckpt-manager-index";
const VERSION = 1;
/** An index larger than this is refused rather than parsed. */
const MAX_INDEX_BYTES = 256 * 2 ** 20;

/**
 * One committed checkpoint as the index records it: the public entry, with the file name inside
 * the directory instead of a path, and for an incremental checkpoint its blobs (key to bytes).
 */
export type StoredEntry = Omit<CheckpointEntry, "path"> & {
  /** File name inside the directory: the checkpoint file, or the manifest of an incremental one. */
  file: string;
  /** Incremental only: blob key to bytes on disk. */
  blobs?: Map<string, number>;
};

/** A blob key: the SHA-256 of a tensor's bytes, with `.gz` when the blob is gzip-compressed. */
export const BLOB_KEY = /^[0-9a-f]{64}(\.gz)?$/;

function fail(path: string, why: string): never {
  throw new SyntaxError(`Cannot read checkpoint index ${path}: ${why}`);
}

function entryFromJson(v: unknown, i: number, path: string): StoredEntry {
  const at = `entry ${i}`;
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(path, `${at} is not an object`);
  const o = v as Record<string, unknown>;
  const int = (k: string): number => {
    const x = o[k];
    if (typeof x !== "number" || !Number.isSafeInteger(x) || x < 0) {
      fail(path, `${at}: ${k} is not a non-negative integer`);
    }
    return x as number;
  };
  const str = (k: string, re?: RegExp): string => {
    const x = o[k];
    if (typeof x !== "string" || (re && !re.test(x))) fail(path, `${at}: ${k} is missing or malformed`);
    return x as string;
  };
  const step = int("step");
  const file = str("file", /^[^/\\\0.][^/\\\0]*$/);
  const kind = str("kind", /^(full|incremental|sharded)$/) as StoredEntry["kind"];
  let metadata: Metadata;
  try {
    metadata = metadataFromJson(o.metadata, `of ${at}`);
  } catch (e) {
    fail(path, (e as Error).message.replace(/^Cannot decode checkpoint: /, ""));
  }
  if (metadata!.step !== step) fail(path, `${at}: metadata step ${metadata!.step} differs from step ${step}`);
  const entry: StoredEntry = {
    step,
    file,
    kind,
    bytes: int("bytes"),
    bytesWritten: int("bytesWritten"),
    sha256: str("sha256", /^[0-9a-f]{64}$/),
    savedAt: str("savedAt"),
    metadata: metadata!,
    tensorCount: int("tensorCount"),
  };
  if (kind === "incremental") {
    const b = o.blobs;
    if (typeof b !== "object" || b === null || Array.isArray(b)) fail(path, `${at}: blobs is not an object`);
    const blobs = new Map<string, number>();
    for (const [key, size] of Object.entries(b as object)) {
      if (!BLOB_KEY.test(key)) fail(path, `${at}: blob key ${JSON.stringify(key)} is malformed`);
      if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
        fail(path, `${at}: blob ${key} has no valid size`);
      }
      blobs.set(key, size);
    }
    entry.blobs = blobs;
  }
  return entry;
}

/** What an index file holds. */
export interface IndexContents {
  /** Committed checkpoints, ordered by step. */
  entries: StoredEntry[];
  /** The retention rules of the manager that wrote it, so a read-only view can show what is kept and why. */
  retention: RetentionPolicy | undefined;
}

function retentionFromJson(v: unknown, path: string): RetentionPolicy | undefined {
  if (v === undefined) return undefined;
  const bad = (): never => fail(path, "retention is malformed");
  if (typeof v !== "object" || v === null) bad();
  const o = v as Record<string, unknown>;
  const positive = (x: unknown) => typeof x === "number" && Number.isSafeInteger(x) && x > 0;
  const maxToKeep = o.maxToKeep === null ? Infinity : o.maxToKeep;
  if (!positive(maxToKeep) && maxToKeep !== Infinity) bad();
  if (o.keepEvery !== null && !positive(o.keepEvery)) bad();
  let best: RetentionPolicy["best"];
  if (o.best !== null) {
    const b = o.best as Record<string, unknown> | undefined;
    if (
      typeof b !== "object" || b === null || typeof b.metric !== "string" || (b.mode !== "min" && b.mode !== "max") ||
      !positive(b.keep)
    ) bad();
    best = { metric: b!.metric as string, mode: b!.mode as "min" | "max", keep: b!.keep as number };
  }
  // Absent from indexes written before it existed.
  const interval = o.keepTimeInterval ?? null;
  if (interval !== null && !(typeof interval === "number" && interval > 0 && Number.isFinite(interval))) bad();
  return {
    maxToKeep: maxToKeep as number,
    keepEvery: (o.keepEvery ?? undefined) as number | undefined,
    keepTimeInterval: (interval ?? undefined) as number | undefined,
    best,
  };
}

/** The index as read, and the version of the object it was read from (for the next conditional write). */
export interface ReadIndex {
  /** Its contents, or `undefined` when it is damaged (only when `tolerant`) or absent. */
  contents: IndexContents | undefined;
  /** The index object's version, or `undefined` when there is none. */
  version: string | undefined;
}

/**
 * The index's entries ordered by step and its retention rules (`contents` undefined when there
 * is no index), with the version of the object read. A malformed index is a `SyntaxError`.
 */
export async function readIndex(loc: Location): Promise<ReadIndex> {
  const got = await loc.read(INDEX_FILE, MAX_INDEX_BYTES, "checkpoint index");
  if (got === undefined) return { contents: undefined, version: undefined };
  return { contents: parseIndex(got.bytes, loc.name(INDEX_FILE)), version: got.info.version };
}

/** An index's contents from its bytes; `path` names it in errors. */
export function parseIndex(bytes: Uint8Array, path: string): IndexContents {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    fail(path, `not valid UTF-8 JSON (${(e as Error).message})`);
  }
  if (typeof v !== "object" || v === null) fail(path, "not a JSON object");
  const o = v as Record<string, unknown>;
  if (o.format !== FORMAT) fail(path, `format is ${JSON.stringify(o.format)}, expected ${JSON.stringify(FORMAT)}`);
  if (o.version !== VERSION) {
    fail(path, `version ${JSON.stringify(o.version)} is not supported (this reader knows ${VERSION})`);
  }
  if (!Array.isArray(o.checkpoints)) fail(path, "checkpoints is not an array");
  const entries = (o.checkpoints as unknown[]).map((e, i) => entryFromJson(e, i, path));
  for (let i = 1; i < entries.length; i++) {
    if (entries[i]!.step <= entries[i - 1]!.step) fail(path, `entry ${i} is not in increasing step order`);
  }
  const files = new Set<string>();
  for (const e of entries) {
    if (files.has(e.file)) fail(path, `file ${e.file} is listed twice`);
    files.add(e.file);
  }
  return { entries, retention: retentionFromJson(o.retention, path) };
}

/** The JSON form of an entry (metadata in its canonical form). */
function entryToJson(e: StoredEntry): Record<string, unknown> {
  const out: Record<string, unknown> = {
    step: e.step,
    file: e.file,
    kind: e.kind,
    bytes: e.bytes,
    bytesWritten: e.bytesWritten,
    sha256: e.sha256,
    savedAt: e.savedAt,
    tensorCount: e.tensorCount,
    metadata: JSON.parse(metadataToJson(e.metadata)),
  };
  if (e.blobs) out.blobs = Object.fromEntries(e.blobs);
  return out;
}

/**
 * Replaces the index atomically with these entries (already ordered by step) and retention rules,
 * if `mode` holds (`"create"` when there was none, `{ ifMatch }` with the version last read or
 * written); a failed condition is the store's `PreconditionFailedError`. `writer` names the
 * manager that wrote it, so that a manager opening the directory changes the index's bytes (and
 * so its version, even where the version is a content hash) and a stale writer's next commit
 * fails.
 */
export async function writeIndex(
  loc: Location,
  entries: readonly StoredEntry[],
  policy: RetentionPolicy,
  mode: PutMode,
  writer?: string,
): Promise<ObjectInfo> {
  const retention = {
    maxToKeep: policy.maxToKeep === Infinity ? null : policy.maxToKeep,
    keepEvery: policy.keepEvery ?? null,
    ...(policy.keepTimeInterval === undefined ? {} : { keepTimeInterval: policy.keepTimeInterval }),
    best: policy.best ?? null,
  };
  const index: Record<string, unknown> = { format: FORMAT, version: VERSION };
  if (writer !== undefined) index.writer = writer;
  index.retention = retention;
  index.checkpoints = entries.map(entryToJson);
  const bytes = new TextEncoder().encode(JSON.stringify(index, null, 1) + "\n");
  return await loc.store.put(INDEX_FILE, bytes, { mode });
}
