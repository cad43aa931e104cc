/**
 * Reading a sharded checkpoint: the manifest first (validated before anything it names is
 * read), then only the records of the slices asked for, by positioned reads from local parts or
 * ranged GETs, each record checked against the digest the manifest pins before its rows are
 * handed out.
 *
 * @module
 */
import type { Checkpoint, Tensor } from "../format/types.ts";
import { DTYPES, typedArrayFrom } from "../format/dtype.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import { checkOptionNames } from "../format/_options.ts";
import { placeInto } from "../format/_read_into.ts";
import type { StorageAddress, StoreObject } from "../storage/resolve.ts";
import { locate, type StorageOptions } from "../io/read.ts";
import { registerShardedLoader } from "../io/_sharded.ts";
import { verifyCheckpoint } from "../io/verify.ts";
import { ObjectNotFoundError } from "../storage/types.ts";
import {
  decodeShardManifest,
  resolveShardLimits,
  SHARD_MAGIC,
  type ShardManifest,
  type ShardManifestLimits,
  type ShardSlice,
  type ShardTensorEntry,
} from "./manifest.ts";
import { readRange, sliceBody } from "./_slice.ts";

/** Options for reading a sharded checkpoint. */
export interface ShardReadOptions extends StorageOptions {
  /**
   * Caps for the manifest.
   *
   * @default {undefined} (`DEFAULT_SHARD_LIMITS`)
   */
  limits?: ShardManifestLimits;
  /**
   * How many slice records to read at once.
   *
   * @default {4}
   */
  concurrency?: number;
}

/** Which part of a sharded checkpoint a reader wants. */
export interface ShardRequest {
  /** Whole tensors, by name. */
  tensors?: readonly string[];
  /**
   * Row ranges `[start, end)` of tensors along their first dimension; each comes back as a
   * tensor of that name whose shape has `end - start` rows.
   */
  rows?: readonly { tensor: string; start: number; end: number }[];
}

/**
 * Reads and validates the manifest at `address`: a `SyntaxError` for malformed bytes or a file
 * that is not a manifest, a `RangeError` past a cap, a `ChecksumMismatchError` when its trailer
 * does not match. `digest` is the sharded checkpoint's digest.
 *
 * @example
 * ```ts
 * import { readShardManifest, saveSharded } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const saved = await saveSharded(`${dir}/a.ckpt`, {
 *   metadata: { step: 1 },
 *   tensors: [{ name: "w", dtype: "uint8", shape: [2], data: new Uint8Array([1, 2]) }],
 * });
 * const { manifest, digest } = await readShardManifest(`${dir}/a.ckpt`);
 * assert.equal(digest, saved.digest);
 * assert.equal(manifest.parts.length, 2);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readShardManifest(
  address: StorageAddress,
  options: ShardReadOptions = {},
): Promise<{ manifest: ShardManifest; digest: string }> {
  checkOptionNames(options, READ_OPTION_NAMES, "Cannot read sharded checkpoint");
  return await manifestAt(locate(address, options), options);
}

const READ_OPTION_NAMES = ["storage", "limits", "concurrency"];

function storage(options: ShardReadOptions): StorageOptions {
  return options.storage ? { storage: options.storage } : {};
}

async function manifestAt(
  at: StoreObject,
  options: ShardReadOptions,
): Promise<{ manifest: ShardManifest; digest: string }> {
  const cap = resolveShardLimits(options.limits ?? {}).maxManifestBytes;
  const got = await at.store.get(at.key);
  if (got.info.size > cap) {
    await got.body.cancel().catch(() => {});
    throw new RangeError(
      `Cannot decode shard manifest ${at.store.url}${at.key}: ${got.info.size} bytes exceed maxManifestBytes (${cap})`,
    );
  }
  const bytes = new Uint8Array(got.length);
  let n = 0;
  for await (const chunk of got.body) {
    if (n + chunk.byteLength > bytes.byteLength) {
      throw new SyntaxError(`Cannot read ${at.store.url}${at.key}: it grew while being read`);
    }
    bytes.set(chunk, n);
    n += chunk.byteLength;
  }
  try {
    return decodeShardManifest(bytes.subarray(0, n), options.limits);
  } catch (e) {
    if (e instanceof ChecksumMismatchError) throw e;
    const E = e instanceof RangeError ? RangeError : e instanceof SyntaxError ? SyntaxError : Error;
    throw new E(`${(e as Error).message} (in ${at.store.url}${at.key})`, { cause: e });
  }
}

/** One piece of output: rows `[from, to)` of a tensor, from whichever slices hold them. */
interface Wanted {
  tensor: ShardTensorEntry;
  from: number;
  to: number;
}

/**
 * Reads only what `request` asks for from the sharded checkpoint at `address`: for each tensor
 * or row range, the records of the slices that hold it, each verified against the manifest's
 * digest before use. A row range inside one slice still reads (and hashes) that slice's whole
 * record, which its digest covers; only the rows asked for are returned. Tensors come in the
 * manifest's order, then row ranges in the order asked. An unknown tensor or a range outside the
 * tensor is a `RangeError`.
 *
 * @example
 * ```ts
 * import { readShards, saveSharded } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await saveSharded(`${dir}/a.ckpt`, {
 *   metadata: { step: 1 },
 *   tensors: [{ name: "w", dtype: "uint8", shape: [4, 2], data: new Uint8Array([0, 1, 2, 3, 4, 5, 6, 7]) }],
 * }, { writers: 2, splitBytes: 1 });
 * const part = await readShards(`${dir}/a.ckpt`, { rows: [{ tensor: "w", start: 1, end: 3 }] });
 * assert.deepEqual(part.tensors[0]!.shape, [2, 2]);
 * assert.deepEqual([...part.tensors[0]!.data], [2, 3, 4, 5]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readShards(
  address: StorageAddress,
  request: ShardRequest,
  options: ShardReadOptions = {},
): Promise<Checkpoint> {
  checkOptionNames(options, READ_OPTION_NAMES, "Cannot read sharded checkpoint");
  const at = locate(address, options);
  const { manifest } = await manifestAt(at, options);
  return { metadata: manifest.metadata, tensors: await readWanted(at, manifest, wantedOf(manifest, request), options) };
}

function wantedOf(manifest: ShardManifest, request: ShardRequest): Wanted[] {
  if (typeof request !== "object" || request === null) {
    throw new TypeError("Cannot read sharded checkpoint: request must be an object");
  }
  checkOptionNames(request, ["tensors", "rows"], "Cannot read sharded checkpoint", {}, "request.");
  const byName = new Map(manifest.tensors.map((t) => [t.name, t]));
  const find = (name: unknown): ShardTensorEntry => {
    const t = typeof name === "string" ? byName.get(name) : undefined;
    if (!t) throw new RangeError(`Cannot read sharded checkpoint: no tensor named ${JSON.stringify(name)}`);
    return t;
  };
  const names = new Set(request.tensors ?? []);
  for (const n of names) find(n);
  const out: Wanted[] = manifest.tensors.filter((t) => names.has(t.name)).map((t) => ({
    tensor: t,
    from: 0,
    to: t.shape.length === 0 ? 1 : t.shape[0]!,
  }));
  for (const r of request.rows ?? []) {
    const t = find(r?.tensor);
    const rows = t.shape.length === 0 ? 1 : t.shape[0]!;
    if (t.shape.length === 0) {
      throw new RangeError(`Cannot read rows of tensor ${JSON.stringify(t.name)}: it is a scalar`);
    }
    if (
      !Number.isSafeInteger(r.start) || !Number.isSafeInteger(r.end) || r.start < 0 || r.end > rows || r.start > r.end
    ) {
      throw new RangeError(
        `Cannot read rows [${r.start}, ${r.end}) of tensor ${JSON.stringify(t.name)}: it has rows [0, ${rows})`,
      );
    }
    out.push({ tensor: t, from: r.start, to: r.end });
  }
  return out;
}

/** Reads the slices each wanted piece needs (each record once), verified, and assembles the tensors. */
async function readWanted(
  at: StoreObject,
  manifest: ShardManifest,
  wanted: readonly Wanted[],
  options: ShardReadOptions,
): Promise<Tensor[]> {
  const concurrency = options.concurrency ?? 4;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`Cannot read sharded checkpoint: concurrency must be a positive integer, got ${concurrency}`);
  }
  const prefix = `${at.key}.parts/${manifest.saveId}/`;
  const outputs = wanted.map((w) => {
    const rowBytes = w.tensor.shape.slice(1).reduce((a, d) => a * d, DTYPES[w.tensor.dtype].bytes);
    const shape = w.tensor.shape.length === 0 ? [] : [w.to - w.from, ...w.tensor.shape.slice(1)];
    return { w, rowBytes, shape, bytes: undefined as Uint8Array | undefined };
  });
  // Every (piece, slice) overlap; a slice needed by several pieces is read once.
  const jobs = new Map<ShardSlice, { tensor: ShardTensorEntry; uses: (typeof outputs[number])[] }>();
  for (const o of outputs) {
    for (const s of o.w.tensor.slices) {
      if (s.rows[1] <= o.w.from || s.rows[0] >= o.w.to) continue;
      const job = jobs.get(s) ?? { tensor: o.w.tensor, uses: [] };
      job.uses.push(o);
      jobs.set(s, job);
    }
  }
  const queue = [...jobs];
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const [slice, { tensor, uses }] = next;
      const part = manifest.parts[slice.part]!;
      const url = at.store.url + prefix + part.name;
      const record = await readRange(at.store, prefix + part.name, slice.offset, slice.length);
      const body = await sliceBody(record, tensor, slice, url);
      for (const o of uses) place(o, slice, body);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, worker));
  return outputs.map(({ w, shape, bytes }) => ({
    name: w.tensor.name,
    dtype: w.tensor.dtype,
    shape,
    group: w.tensor.group,
    data: typedArrayFrom(w.tensor.dtype, bytes ?? new Uint8Array(0)),
  }));
}

/** Copies the overlap of a slice's rows with a piece into the piece's buffer (or adopts the slice's body whole). */
function place(
  o: { w: Wanted; rowBytes: number; bytes: Uint8Array | undefined },
  slice: ShardSlice,
  body: Uint8Array,
): void {
  const from = Math.max(o.w.from, slice.rows[0]), to = Math.min(o.w.to, slice.rows[1]);
  if (from === o.w.from && to === o.w.to && slice.rows[0] === from && slice.rows[1] === to && !o.bytes) {
    o.bytes = body; // one slice is the whole piece: no copy
    return;
  }
  o.bytes ??= new Uint8Array((o.w.to - o.w.from) * o.rowBytes);
  o.bytes.set(
    body.subarray((from - slice.rows[0]) * o.rowBytes, (to - slice.rows[0]) * o.rowBytes),
    (from - o.w.from) * o.rowBytes,
  );
}

/** What {@linkcode verifyShards} checked. */
export interface ShardVerifyResult {
  /** The manifest. */
  manifest: ShardManifest;
  /** The manifest's digest: the sharded checkpoint's digest. */
  digest: string;
  /** Bytes of parts read and verified. */
  bytes: number;
}

/**
 * Verifies the sharded checkpoint at `address` without keeping any tensor: the manifest, then
 * each part read whole and verified as `verifyCheckpoint` does (every record digest, and its
 * stream digest against the one the manifest pins), which proves every slice the manifest names.
 * Memory stays that of verifying one part. A damaged part is a `ChecksumMismatchError` naming it,
 * a missing one the store's not-found error.
 *
 * @example
 * ```ts
 * import { saveSharded, verifyShards } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const saved = await saveSharded(`${dir}/a.ckpt`, {
 *   metadata: { step: 1 },
 *   tensors: [{ name: "w", dtype: "uint8", shape: [2], data: new Uint8Array([1, 2]) }],
 * });
 * assert.equal((await verifyShards(`${dir}/a.ckpt`)).digest, saved.digest);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function verifyShards(
  address: StorageAddress,
  options: ShardReadOptions = {},
): Promise<ShardVerifyResult> {
  checkOptionNames(options, READ_OPTION_NAMES, "Cannot verify sharded checkpoint");
  const at = locate(address, options);
  const { manifest, digest } = await manifestAt(at, options);
  const prefix = `${at.key}.parts/${manifest.saveId}/`;
  let bytes = 0;
  const where = `${at.store.url}${at.key}`;
  for (const [i, part] of manifest.parts.entries()) {
    const key = prefix + part.name;
    const info = await at.store.head(key);
    if (!info) throw new ObjectNotFoundError(at.store.url + key);
    if (info.size !== part.bytes) {
      throw new SyntaxError(
        `Cannot verify sharded checkpoint ${where}: part ${part.name} has ${info.size} bytes, the manifest says ${part.bytes}`,
      );
    }
    const result = await verifyCheckpoint({ store: at.store, key }, { sha256: part.digest, ...storage(options) });
    // The part holds what the manifest says it holds: each slice, by name and shape.
    const held = new Map(result.tensors.map((t) => [t.name, t.shape.join()]));
    for (const t of manifest.tensors) {
      for (const sl of t.slices) {
        if (sl.part !== i) continue;
        const shape = t.shape.length === 0 ? "" : [sl.rows[1] - sl.rows[0], ...t.shape.slice(1)].join();
        if (held.get(t.name) !== shape) {
          throw new SyntaxError(
            `Cannot verify sharded checkpoint ${where}: part ${part.name} lacks rows [${sl.rows}] of tensor ${
              JSON.stringify(t.name)
            }`,
          );
        }
      }
    }
    bytes += info.size;
  }
  return { manifest, digest, bytes };
}

/**
 * Reader `reader`'s share (0-based) of `readers`: whole tensors, balanced by bytes, the same on
 * every reader (a checkpoint written by N writers loads on any M readers). Pass it to
 * {@linkcode readShards}.
 *
 * @example
 * ```ts
 * import { shareOf } from "./read.ts";
 * import assert from "node:assert/strict";
 * const t = (name: string, n: number) => ({ name, dtype: "uint8" as const, shape: [n], group: "params",
 *   slices: [{ part: 0, rows: [0, n] as [number, number], offset: 64, length: 8, digest: "0".repeat(64) }] });
 * const manifest = { version: 1 as const, saveId: "s", commit: "0".repeat(32), metadata: { step: 0 },
 *   parts: [{ name: "part-00001-of-00001.ckpt", bytes: 4096, digest: "0".repeat(64) }],
 *   tensors: [t("a", 30), t("b", 20), t("c", 10)] };
 * assert.deepEqual(shareOf(manifest, 0, 2).tensors, ["a"]);
 * assert.deepEqual(shareOf(manifest, 1, 2).tensors, ["b", "c"]);
 * ```
 */
export function shareOf(manifest: ShardManifest, reader: number, readers: number): ShardRequest {
  if (!Number.isSafeInteger(readers) || readers < 1) {
    throw new RangeError(`Invalid readers ${readers}: expected a positive integer`);
  }
  if (!Number.isSafeInteger(reader) || reader < 0 || reader >= readers) {
    throw new RangeError(`Invalid reader ${reader}: expected 0 to ${readers - 1}`);
  }
  const size = (t: ShardTensorEntry) => t.shape.reduce((a, d) => a * d, DTYPES[t.dtype].bytes);
  const order = [...manifest.tensors].sort((a, b) =>
    size(b) - size(a) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  );
  const load = Array.from({ length: readers }, () => 0);
  const mine = new Set<string>();
  for (const t of order) {
    let best = 0;
    for (let r = 1; r < readers; r++) if (load[r]! < load[best]!) best = r;
    load[best]! += size(t);
    if (best === reader) mine.add(t.name);
  }
  return { tensors: manifest.tensors.filter((t) => mine.has(t.name)).map((t) => t.name) };
}

/** `loadCheckpoint` on a manifest: the whole checkpoint (or `only` some tensors), every slice verified. */
async function loadSharded(at: StoreObject, options: Record<string, unknown>): Promise<Checkpoint> {
  const { manifest, digest } = await manifestAt(at, {
    ...(options.storage ? { storage: options.storage as StorageOptions["storage"] } : {}),
  });
  const expected = options.sha256 as string | undefined;
  if (expected !== undefined && expected.toLowerCase() !== digest) {
    throw new ChecksumMismatchError("sharded checkpoint manifest", expected.toLowerCase(), digest);
  }
  const only = options.only as readonly string[] | undefined;
  const tensors = await readWanted(
    at,
    manifest,
    wantedOf(manifest, { tensors: only ?? manifest.tensors.map((t) => t.name) }),
    {},
  );
  return { metadata: manifest.metadata, tensors: placeInto(tensors, options.into as Parameters<typeof placeInto>[1]) };
}

registerShardedLoader(SHARD_MAGIC, loadSharded);
