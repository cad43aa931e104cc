/**
 * Writing a sharded checkpoint: each writer writes its part (an ordinary ckpt binary file) under
 * the save attempt's parts directory, durably, then announces it with a done record; one
 * committer waits for every writer's record, checks the parts, and writes the manifest with a
 * create-only put. The checkpoint exists once the manifest does.
 *
 * @module
 */
import type { CheckpointInput, Metadata, TensorInput } from "../format/types.ts";
import { toHex } from "../format/_hash.ts";
import { checkOptionNames, optionNames } from "../format/_options.ts";
import { readBinaryIndex } from "../format/codecs/binary_file.ts";
import { saveCheckpoint } from "../io/save.ts";
import { locate } from "../io/read.ts";
import { openRandomAccess } from "../storage/random_access.ts";
import type { ResolveOptions, StorageAddress, StoreObject } from "../storage/resolve.ts";
import { PreconditionFailedError } from "../storage/types.ts";
import {
  type DoneRecord,
  type DoneSlice,
  memoryCoordinator,
  type ShardCoordinator,
  storeCoordinator,
} from "./_coordinate.ts";
import { partName, ShardConflictError, ShardDeadlineError, ShardWriterError } from "./errors.ts";
import {
  encodeShardManifest,
  isSaveId,
  type ShardManifest,
  type ShardPart,
  type ShardTensorEntry,
} from "./manifest.ts";
import { planShards, type ShardPlan, type ShardTensor } from "./plan.ts";
import { readEach } from "./_slice.ts";
import { decodeFooter, FOOTER_BYTES } from "../format/codecs/_binary_layout.ts";

/** How long a committer waits for the writers' done records by default: 10 minutes. */
export const DEFAULT_SHARD_DEADLINE = 10 * 60 * 1000;

/** How often a committer looks for done records in the store by default, in milliseconds. */
export const DEFAULT_SHARD_POLL = 100;

/** A tensor a writer holds: the whole tensor, or (with `rows`) a row slice of it. */
export interface ShardTensorInput extends TensorInput {
  /**
   * The rows `[start, end)` along the first dimension that `data` holds, when the writer holds
   * only a slice; `shape` is then the whole tensor's and `data` has `end - start` rows.
   *
   * @default {undefined} (the whole tensor)
   */
  rows?: readonly [number, number];
}

/** What one writer of a sharded save holds. */
export interface ShardCheckpointInput {
  /** The checkpoint's metadata (the committer's goes into the manifest). */
  metadata: Metadata;
  /** The tensors (or slices) this writer holds. */
  tensors: Iterable<ShardTensorInput>;
}

/** Options shared by the functions that commit. */
export interface ShardCommitOptions {
  /** The save attempt: the same on every writer of one save, different for every attempt. See `isSaveId`. */
  saveId: string;
  /** How many writers the save has. */
  writers: number;
  /**
   * How long the committer waits for every writer's done record, in milliseconds; then the save
   * fails with a `ShardDeadlineError` naming the writers that did not finish, and nothing is
   * committed.
   *
   * @default {600000} ({@linkcode DEFAULT_SHARD_DEADLINE})
   */
  deadline?: number;
  /**
   * How writers announce their parts.
   *
   * @default {undefined} (through the store: done records beside the parts)
   */
  coordinator?: ShardCoordinator;
  /**
   * How often to look for done records in the store, in milliseconds.
   *
   * @default {100} ({@linkcode DEFAULT_SHARD_POLL})
   */
  poll?: number;
  /** Settings for `s3://` and `http(s)://` stores. */
  storage?: ResolveOptions;
  /** Cancels the save (or the wait); nothing is committed. */
  signal?: AbortSignal;
}

/** Options for {@linkcode saveShard}. */
export interface ShardSaveOptions extends ShardCommitOptions {
  /** This writer's index, 0 to `writers - 1`. */
  writer: number;
  /**
   * The global plan (from `planShards` over every writer's holdings). Required when writers
   * hold different tensors or slices.
   *
   * @default {undefined} (data-parallel: every writer holds what this one holds; planned here)
   */
  plan?: ShardPlan;
  /**
   * For the plan made here: the size from which a tensor is split across writers.
   *
   * @default {33554432} (`DEFAULT_SPLIT_BYTES`)
   */
  splitBytes?: number;
  /**
   * Whether this writer commits once every part is done.
   *
   * @default {writer === 0}
   */
  commit?: boolean;
  /**
   * Make the part (and the manifest) durable before announcing it (`fdatasync` and the
   * directory's `fsync` on a file system).
   *
   * @default {true}
   */
  sync?: boolean;
}

/** What {@linkcode saveShard} did. */
export interface ShardSaveResult {
  /** This writer's part. */
  part: ShardPart;
  /** When this writer committed: the manifest's digest, the sharded checkpoint's digest. */
  digest?: string;
  /** When this writer committed: the manifest written. */
  manifest?: ShardManifest;
}

/**
 * Writes one writer's part of a sharded checkpoint at `address` (a path, a `file:` or `s3://`
 * URL, `{ store, key }`), then its done record; the committer (writer 0 unless `commit` says
 * otherwise) then waits for every writer and commits the manifest at `address`. The part goes to
 * `<address>.parts/<saveId>/part-0000i-of-0000n.ckpt`. A losing committer of a race gets a
 * `ShardConflictError`, a committer whose writers did not all finish a `ShardDeadlineError`;
 * neither commits anything.
 *
 * @example
 * ```ts
 * import { saveShard } from "./write.ts";
 * import { loadCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const tensors = [
 *   { name: "a", dtype: "float32" as const, shape: [2], data: new Float32Array([1, 2]) },
 *   { name: "b", dtype: "float32" as const, shape: [1], data: new Float32Array([3]) },
 * ];
 * // Two data-parallel writers, each with a full replica (run here side by side).
 * const saves = [0, 1].map((writer) =>
 *   saveShard(`${dir}/step-1.ckpt`, { metadata: { step: 1 }, tensors }, { writer, writers: 2, saveId: "s1" })
 * );
 * const [first] = await Promise.all(saves);
 * assert.match(first!.digest!, /^[0-9a-f]{64}$/);
 * const back = await loadCheckpoint(`${dir}/step-1.ckpt`);
 * assert.deepEqual(back.tensors.map((t) => [t.name, [...t.data]]), [["a", [1, 2]], ["b", [3]]]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function saveShard(
  address: StorageAddress,
  checkpoint: ShardCheckpointInput,
  options: ShardSaveOptions,
): Promise<ShardSaveResult> {
  checkOptionNames(options, SAVE_SHARD_OPTION_NAMES, "Cannot save shard");
  const { writers, saveId } = checkCommon(options, "Cannot save shard");
  const writer = options.writer;
  if (!Number.isSafeInteger(writer) || writer < 0 || writer >= writers) {
    throw new RangeError(`Cannot save shard: writer must be an integer from 0 to ${writers - 1}, got ${writer}`);
  }
  const at = locate(address, options, "save sharded checkpoint to");
  const url = at.store.url + at.key;
  const held = [...checkpoint.tensors];
  const plan = options.plan ?? ownPlan(held, writers, options.splitBytes, url);
  if (plan.writers !== writers) {
    throw new RangeError(`Cannot save shard to ${url}: the plan is for ${plan.writers} writers, not ${writers}`);
  }
  const prefix = partsPrefix(at.key, saveId);
  const name = partName(writer, writers);
  const coordinator = options.coordinator ?? storeCoordinator(at.store, prefix, options.poll ?? DEFAULT_SHARD_POLL);
  let part: ShardPart;
  try {
    const tensors = sliceTensors(held, plan, writer, url);
    const metadata = partMetadata(checkpoint.metadata, saveId, writer, writers, tensors);
    const saved = await saveCheckpoint({ store: at.store, key: prefix + name }, {
      metadata,
      tensors: tensors.map((t) => t.tensor),
    }, {
      sync: options.sync ?? true,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    part = { name, bytes: saved.bytes, digest: saved.digest };
    const slices = await readBackSlices(at, prefix + name, tensors, options.signal);
    await coordinator.publish({ saveId, writer, writers, part, metadata: checkpoint.metadata, slices });
  } catch (e) {
    // Tell the committer at once, so it fails now rather than at its deadline (best effort: the
    // store may be what failed).
    const error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    const failed = { name, bytes: 0, digest: "0".repeat(64) };
    await coordinator.publish({
      saveId,
      writer,
      writers,
      part: failed,
      metadata: checkpoint.metadata,
      slices: [],
      error,
    })
      .catch(() => {});
    throw e;
  }
  if (!(options.commit ?? writer === 0)) return { part };
  const { digest, manifest } = await commit(at, { ...options, coordinator, metadata: checkpoint.metadata });
  return { part, digest, manifest };
}

/** Every option {@linkcode saveShard} takes. */
const SAVE_SHARD_OPTION_NAMES = optionNames<ShardSaveOptions>()([
  "writer",
  "writers",
  "saveId",
  "plan",
  "splitBytes",
  "commit",
  "sync",
  "deadline",
  "coordinator",
  "poll",
  "storage",
  "signal",
]);

/** Every option {@linkcode commitShards} takes. */
const COMMIT_OPTION_NAMES = optionNames<ShardCommitOptions & { metadata?: Metadata }>()([
  "saveId",
  "writers",
  "deadline",
  "coordinator",
  "poll",
  "storage",
  "signal",
  "metadata",
]);

/** The most writers (parts) a save may have; part names have five digits. */
const MAX_WRITERS = 10_000;

function checkCommon(
  options: ShardCommitOptions,
  context: string,
): { writers: number; saveId: string } {
  const { writers, saveId } = options;
  if (!Number.isSafeInteger(writers) || writers < 1 || writers > MAX_WRITERS) {
    throw new RangeError(`${context}: writers must be an integer from 1 to ${MAX_WRITERS}, got ${writers}`);
  }
  if (!isSaveId(saveId)) {
    throw new TypeError(
      `${context}: saveId ${JSON.stringify(saveId)} must be 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit`,
    );
  }
  const deadline = options.deadline ?? DEFAULT_SHARD_DEADLINE;
  if (!Number.isSafeInteger(deadline) || deadline <= 0) {
    throw new RangeError(`${context}: deadline must be a positive number of milliseconds, got ${deadline}`);
  }
  const poll = options.poll ?? DEFAULT_SHARD_POLL;
  if (!Number.isSafeInteger(poll) || poll <= 0) {
    throw new RangeError(`${context}: poll must be a positive number of milliseconds, got ${poll}`);
  }
  return { writers, saveId };
}

/** The directory (prefix) of a save attempt's parts and done records, for the manifest at `key`. */
export function partsPrefix(key: string, saveId: string): string {
  return `${key}.parts/${saveId}/`;
}

/** The plan of a data-parallel save: every writer holds what this one holds. */
function ownPlan(held: readonly ShardTensorInput[], writers: number, splitBytes: number | undefined, url: string) {
  const sliced = held.find((t) => t.rows !== undefined);
  if (sliced) {
    throw new TypeError(
      `Cannot save shard to ${url}: tensor ${JSON.stringify(sliced.name)} is a slice (rows), so every writer's ` +
        "holdings differ: pass plan (planShards over every writer's holdings)",
    );
  }
  const mine: ShardTensor[] = held.map(spec);
  return planShards(Array.from({ length: writers }, () => mine), splitBytes === undefined ? {} : { splitBytes });
}

function spec(t: ShardTensorInput): ShardTensor {
  return {
    name: t.name,
    dtype: t.dtype,
    shape: t.shape,
    group: t.group ?? "params",
    ...(t.rows ? { rows: t.rows } : {}),
  };
}

interface PartTensor {
  /** The tensor's position in the plan. */
  index: number;
  tensor: TensorInput;
  /** The whole tensor's shape. */
  shape: number[];
  rows: [number, number];
}

/** The slices `writer` writes, cut from the tensors it holds, in the plan's order. */
function sliceTensors(held: readonly ShardTensorInput[], plan: ShardPlan, writer: number, url: string): PartTensor[] {
  const byName = new Map(held.map((t) => [t.name, t]));
  const out: PartTensor[] = [];
  for (const [index, p] of plan.tensors.entries()) {
    for (const s of p.slices) {
      if (s.writer !== writer) continue;
      const t = byName.get(p.name);
      const [start, end] = s.rows;
      const rows = p.shape.length === 0 ? 1 : p.shape[0]!;
      const [from, to] = t?.rows ?? [0, rows];
      if (!t || start < from || end > to) {
        throw new RangeError(
          `Cannot save shard to ${url}: the plan gives writer ${writer} rows [${start}, ${end}) of tensor ${
            JSON.stringify(p.name)
          }, which it does not hold`,
        );
      }
      if (t.dtype !== p.dtype || t.shape.join() !== p.shape.join() || (t.group ?? "params") !== p.group) {
        throw new RangeError(`Cannot save shard to ${url}: tensor ${JSON.stringify(p.name)} differs from the plan's`);
      }
      const rowElements = p.shape.slice(1).reduce((a, d) => a * d, 1);
      const expected = (to - from) * rowElements;
      if (t.data.length !== expected) {
        throw new RangeError(
          `Cannot save shard to ${url}: tensor ${
            JSON.stringify(p.name)
          } holds ${t.data.length} elements, its rows [${from}, ${to}) need ${expected}`,
        );
      }
      const data = start === from && end === to
        ? t.data
        : t.data.subarray((start - from) * rowElements, (end - from) * rowElements);
      const shape = p.shape.length === 0 ? [] : [end - start, ...p.shape.slice(1)];
      out.push({
        index,
        tensor: { name: p.name, dtype: p.dtype, shape, group: p.group, data },
        shape: p.shape,
        rows: [start, end],
      });
    }
  }
  return out;
}

/** The part's metadata: the checkpoint's, with `custom.ckptShard` saying where its slices belong. */
function partMetadata(
  metadata: Metadata,
  saveId: string,
  part: number,
  parts: number,
  tensors: PartTensor[],
): Metadata {
  const ckptShard = {
    saveId,
    part,
    parts,
    slices: tensors.map((t) => [t.tensor.name, t.rows[0], t.rows[1], t.shape.length === 0 ? 1 : t.shape[0]!]),
  };
  return { ...metadata, custom: { ...metadata.custom, ckptShard } };
}

/** Each slice's record offset, length and record digest, read back from the part as stored. */
async function readBackSlices(
  at: StoreObject,
  key: string,
  tensors: PartTensor[],
  signal: AbortSignal | undefined,
): Promise<DoneSlice[]> {
  const reader = await openRandomAccess(at.store, key, signal ? { signal } : {});
  const index = await readBinaryIndex(reader);
  const entries = new Map(index.tensors.map((e) => [e.name, e]));
  const out: DoneSlice[] = tensors.map((t) => {
    const e = entries.get(t.tensor.name);
    if (!e) {
      throw new Error(`Cannot save shard: ${reader.url} lacks tensor ${JSON.stringify(t.tensor.name)} just written`);
    }
    return {
      index: t.index,
      name: t.tensor.name,
      dtype: t.tensor.dtype,
      shape: t.shape,
      group: t.tensor.group ?? "params",
      rows: t.rows,
      offset: e.offset,
      length: e.length,
      digest: "",
    };
  });
  // Each record's digest is its last 32 bytes: positioned reads of one open file where the part
  // is local (the index read above left them in the page cache), ranged reads otherwise.
  const at32 = out.map((s) => s.offset + s.length - 32);
  const digests = await readEach(at.store, key, at32, 32, reader);
  out.forEach((s, i) => s.digest = toHex(digests[i]!));
  return out;
}

/**
 * Commits a sharded save from outside its writers: waits for every writer's done record, checks
 * each part's size against its record and that the slices cover every tensor once, then writes
 * the manifest at `address` with a create-only put. `metadata` defaults to writer 0's.
 *
 * @example
 * ```ts
 * import { commitShards } from "./write.ts";
 * import { ShardDeadlineError } from "./errors.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await assert.rejects(
 *   commitShards(`${dir}/a.ckpt`, { saveId: "s1", writers: 2, deadline: 50 }),
 *   ShardDeadlineError,
 * );
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function commitShards(
  address: StorageAddress,
  options: ShardCommitOptions & { metadata?: Metadata },
): Promise<{ digest: string; manifest: ShardManifest }> {
  checkOptionNames(options, COMMIT_OPTION_NAMES, "Cannot commit sharded checkpoint");
  checkCommon(options, "Cannot commit sharded checkpoint");
  const at = locate(address, options, "commit sharded checkpoint to");
  const coordinator = options.coordinator ??
    storeCoordinator(at.store, partsPrefix(at.key, options.saveId), options.poll ?? DEFAULT_SHARD_POLL);
  return commit(at, { ...options, coordinator });
}

/** Waits for every done record, checks the parts, writes the manifest create-only. */
async function commit(
  at: StoreObject,
  options: ShardCommitOptions & { metadata?: Metadata; coordinator: ShardCoordinator },
): Promise<{ digest: string; manifest: ShardManifest }> {
  const { saveId, writers, coordinator, signal } = options;
  const url = at.store.url + at.key;
  const deadline = options.deadline ?? DEFAULT_SHARD_DEADLINE;
  let records: DoneRecord[];
  try {
    records = await coordinator.collect(saveId, writers, { deadline, ...(signal ? { signal } : {}) });
  } catch (e) {
    if (e instanceof ShardDeadlineError) throw new ShardDeadlineError(url, e.missing, writers, deadline);
    if (e instanceof ShardWriterError) {
      throw new ShardWriterError(e.writer, `Cannot commit sharded checkpoint ${url}: ${e.message}`);
    }
    throw e;
  }
  const prefix = partsPrefix(at.key, saveId);
  await Promise.all(records.map(async (r, w) => {
    const name = partName(w, writers);
    if (r.part.name !== name) {
      throw new SyntaxError(
        `Cannot commit sharded checkpoint ${url}: writer ${w}'s done record names part ${JSON.stringify(r.part.name)}`,
      );
    }
    const info = await at.store.head(prefix + name);
    if (!info || info.size !== r.part.bytes) {
      throw new Error(
        `Cannot commit sharded checkpoint ${url}: part ${prefix + name} is ${
          info ? `${info.size} bytes` : "missing"
        } in the store, its done record says ${r.part.bytes} bytes; nothing was committed`,
      );
    }
    // The footer holds the part's stream digest: one small read shows the part is the one recorded.
    const [footer] = await readEach(at.store, prefix + name, [info.size - FOOTER_BYTES], FOOTER_BYTES);
    const stored = toHex(decodeFooter(footer!, info.size - FOOTER_BYTES).digest);
    if (stored !== r.part.digest) {
      throw new Error(
        `Cannot commit sharded checkpoint ${url}: part ${prefix + name} holds stream digest ${stored}, its done ` +
          `record says ${r.part.digest}; nothing was committed`,
      );
    }
  }));
  const manifest: ShardManifest = {
    version: 1,
    saveId,
    commit: toHex(crypto.getRandomValues(new Uint8Array(16))),
    metadata: options.metadata ?? records[0]!.metadata,
    parts: records.map((r) => ({ name: r.part.name, bytes: r.part.bytes, digest: r.part.digest })),
    tensors: gatherTensors(records, url),
  };
  let encoded: { bytes: Uint8Array; digest: string };
  try {
    encoded = encodeShardManifest(manifest);
  } catch (e) {
    throw new SyntaxError(
      `Cannot commit sharded checkpoint ${url}: the parts do not make a valid manifest: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  signal?.throwIfAborted();
  try {
    await at.store.put(at.key, encoded.bytes, { mode: "create", ...(signal ? { signal } : {}) });
  } catch (e) {
    if (e instanceof PreconditionFailedError) throw new ShardConflictError(url, saveId, { cause: e });
    throw e;
  }
  return { digest: encoded.digest, manifest };
}

/** The manifest's tensors from every writer's slices: in the plan's order, slices in row order. */
function gatherTensors(records: readonly DoneRecord[], url: string): ShardTensorEntry[] {
  const tensors = new Map<string, ShardTensorEntry>();
  const order = new Map<string, number>();
  records.forEach((r, part) => {
    for (const s of r.slices) {
      let t = tensors.get(s.name);
      if (!t) {
        tensors.set(s.name, t = { name: s.name, dtype: s.dtype, shape: s.shape, group: s.group, slices: [] });
        order.set(s.name, s.index);
      } else if (t.dtype !== s.dtype || t.shape.join() !== s.shape.join() || t.group !== s.group) {
        throw new RangeError(
          `Cannot commit sharded checkpoint ${url}: writers disagree on tensor ${JSON.stringify(s.name)}`,
        );
      }
      t.slices.push({ part, rows: s.rows, offset: s.offset, length: s.length, digest: s.digest });
    }
  });
  const out = [...tensors.values()].sort((a, b) => order.get(a.name)! - order.get(b.name)!);
  for (const t of out) t.slices.sort((a, b) => a.rows[0] - b.rows[0]);
  return out;
}

/** Options for {@linkcode saveSharded}. */
export interface SaveShardedOptions {
  /**
   * How many parts (writers, run concurrently in this thread) to split the checkpoint into.
   *
   * @default {2}
   */
  writers?: number;
  /**
   * The save attempt's id.
   *
   * @default {undefined} (a random one)
   */
  saveId?: string;
  /**
   * The size from which a tensor is split across writers.
   *
   * @default {33554432} (`DEFAULT_SPLIT_BYTES`)
   */
  splitBytes?: number;
  /**
   * Make the parts and the manifest durable.
   *
   * @default {true}
   */
  sync?: boolean;
  /** Settings for `s3://` and `http(s)://` stores. */
  storage?: ResolveOptions;
  /** Cancels the save; nothing is committed. */
  signal?: AbortSignal;
}

/**
 * Saves a whole checkpoint as a sharded one from this thread: `writers` parts written
 * concurrently, coordinated in memory, then committed.
 *
 * @example
 * ```ts
 * import { saveSharded } from "./write.ts";
 * import { loadCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const { manifest } = await saveSharded(`${dir}/a.ckpt`, {
 *   metadata: { step: 3 },
 *   tensors: [{ name: "w", dtype: "uint8", shape: [4], data: new Uint8Array([1, 2, 3, 4]) }],
 * }, { writers: 2, splitBytes: 2 });
 * assert.equal(manifest.tensors[0]!.slices.length, 2);
 * assert.deepEqual([...(await loadCheckpoint(`${dir}/a.ckpt`)).tensors[0]!.data], [1, 2, 3, 4]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function saveSharded(
  address: StorageAddress,
  checkpoint: CheckpointInput & { tensors: readonly TensorInput[] },
  options: SaveShardedOptions = {},
): Promise<{ digest: string; manifest: ShardManifest }> {
  checkOptionNames(options, SAVE_SHARDED_OPTION_NAMES, "Cannot save sharded checkpoint");
  const writers = options.writers ?? 2;
  const saveId = options.saveId ?? `s-${toHex(crypto.getRandomValues(new Uint8Array(8)))}`;
  const tensors = [...checkpoint.tensors];
  const plan = planShards(
    Array.from({ length: writers }, () => tensors.map(spec)),
    options.splitBytes === undefined ? {} : { splitBytes: options.splitBytes },
  );
  const coordinator = memoryCoordinator();
  const abort = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, abort.signal]) : abort.signal;
  let first: unknown;
  const saves = Array.from(
    { length: writers },
    (_, writer) =>
      saveShard(address, { metadata: checkpoint.metadata, tensors }, {
        writer,
        writers,
        saveId,
        plan,
        coordinator,
        signal,
        ...(options.sync === undefined ? {} : { sync: options.sync }),
        ...(options.storage ? { storage: options.storage } : {}),
      }).catch((e) => {
        // One writer failing fails the save: stop the others and the committer's wait.
        first ??= e;
        abort.abort(e);
        throw e;
      }),
  );
  const results = await Promise.allSettled(saves);
  if (first !== undefined) throw first;
  const committed = results[0]!;
  if (committed.status === "rejected") throw committed.reason;
  return { digest: committed.value.digest!, manifest: committed.value.manifest! };
}

/** Every option {@linkcode saveSharded} takes. */
const SAVE_SHARDED_OPTION_NAMES = optionNames<SaveShardedOptions>()([
  "writers",
  "saveId",
  "splitBytes",
  "sync",
  "storage",
  "signal",
]);
