/**
 * The planner of a sharded save: who writes what. Each writer's local plan (the tensors, or row
 * slices of tensors, it holds) goes in; one global plan comes out, the same on every writer that
 * computes it from the same input: each row of each tensor written exactly once even when every
 * writer holds it (data-parallel replicas), parts balanced by bytes, and large tensors held by
 * several writers split into row slices across them. The planner touches no storage.
 *
 * @module
 */
import { DTYPES, isDType } from "../format/dtype.ts";
import type { DType } from "../format/types.ts";

/** A tensor (or a row slice of one) that a writer holds, as the planner sees it: no data. */
export interface ShardTensor {
  /** The tensor's name. */
  name: string;
  /** Element type. */
  dtype: DType;
  /** The whole tensor's dimensions (not the slice's). */
  shape: readonly number[];
  /**
   * What it is for.
   *
   * @default {"params"}
   */
  group?: string;
  /**
   * The rows `[start, end)` along the first dimension this writer holds, when it holds only a
   * slice (a model split across processes).
   *
   * @default {undefined} (the whole tensor; `[0, 1]` for a scalar)
   */
  rows?: readonly [number, number];
}

/** Options for {@linkcode planShards}. */
export interface ShardPlanOptions {
  /**
   * A tensor (or a run of rows held by the same writers) of at least this many bytes, held by
   * several writers, is split into row slices across them, one slice per writer, so that one
   * large tensor does not land on a single writer.
   *
   * @default {33554432} (32 MiB, {@linkcode DEFAULT_SPLIT_BYTES})
   */
  splitBytes?: number;
}

/** The default {@linkcode ShardPlanOptions.splitBytes}: 32 MiB. */
export const DEFAULT_SPLIT_BYTES: number = 32 * 2 ** 20;

/** One slice of the global plan: rows `[rows[0], rows[1])` of a tensor, written by `writer`. */
export interface PlannedSlice {
  /** The writer (0-based) that writes it. */
  writer: number;
  /** Its rows along the first dimension (`[0, 1]` for a scalar, `[0, 0]` for a tensor without rows). */
  rows: [number, number];
  /** Its size in bytes. */
  bytes: number;
}

/** One tensor of the global plan. */
export interface PlannedTensor {
  /** Its name. */
  name: string;
  /** Element type. */
  dtype: DType;
  /** The whole tensor's dimensions. */
  shape: number[];
  /** What it is for. */
  group: string;
  /** Its slices in row order, each written by one writer, covering every row once (a tensor without rows: one slice `[0, 0]`). */
  slices: PlannedSlice[];
}

/** Who writes what: the same on every writer computed from the same local plans. */
export interface ShardPlan {
  /** How many writers (and parts) the save has. */
  writers: number;
  /** Every tensor, in the order the writers list them (writer 0's first, then any new ones of writer 1, and so on). */
  tensors: PlannedTensor[];
  /** Bytes of tensor data each writer writes, by writer. */
  bytes: number[];
}

/**
 * The global plan from every writer's local plan (`holdings[w]` is what writer `w` holds).
 * Deterministic: who writes what depends only on the tensors each writer holds, not on the order
 * they are listed in (which only sets the order of the plan's tensors). Each
 * tensor's rows are cut where the holders change; a run of rows is given to one of the writers
 * holding it (preferring the writer of the run before it, so a writer's rows of a tensor stay
 * one slice, then the writer with the fewest bytes so far, then the lowest index), and a run of
 * at least `splitBytes` held by several writers is split into equal row slices among the least
 * loaded of them. Tensors are placed largest first.
 *
 * A tensor described differently by two writers (dtype, shape, group), rows no writer holds, or
 * a plan that would give one writer two separate slices of a tensor (its part holds each tensor
 * once) is a `RangeError` naming the tensor.
 *
 * @example
 * ```ts
 * import { planShards } from "./plan.ts";
 * import assert from "node:assert/strict";
 * // Two data-parallel writers, each with a full replica: each tensor is written once.
 * const replica = [
 *   { name: "a", dtype: "float32" as const, shape: [1000] },
 *   { name: "b", dtype: "float32" as const, shape: [1000] },
 * ];
 * const plan = planShards([replica, replica]);
 * assert.deepEqual(plan.bytes, [4000, 4000]);
 * assert.deepEqual(plan.tensors.map((t) => t.slices.map((s) => s.writer)), [[0], [1]]);
 * ```
 */
export function planShards(
  holdings: readonly (readonly ShardTensor[])[],
  options: ShardPlanOptions = {},
): ShardPlan {
  if (!Array.isArray(holdings) || holdings.length === 0) {
    throw new TypeError("Cannot plan sharded save: holdings must be a non-empty array, one entry per writer");
  }
  for (const k of Object.keys(options)) {
    if (k !== "splitBytes") {
      throw new TypeError(`Cannot plan sharded save: unknown option ${JSON.stringify(k)} (known options: splitBytes)`);
    }
  }
  const splitBytes = options.splitBytes ?? DEFAULT_SPLIT_BYTES;
  if (!Number.isSafeInteger(splitBytes) || splitBytes <= 0) {
    throw new RangeError(`Cannot plan sharded save: splitBytes must be a positive integer, got ${splitBytes}`);
  }
  const tensors = collect(holdings);
  const load = holdings.map(() => 0);
  const order = [...tensors.values()].sort((a, b) => b.bytes - a.bytes || compare(a.tensor.name, b.tensor.name));
  for (const t of order) placeTensor(t, load, splitBytes);
  return {
    writers: holdings.length,
    tensors: [...tensors.values()].map((t) => t.tensor),
    bytes: load,
  };
}

/**
 * The slices `writer` writes, in the plan's order.
 *
 * @example
 * ```ts
 * import { planShards, slicesOf } from "./plan.ts";
 * import assert from "node:assert/strict";
 * const t = [{ name: "w", dtype: "uint8" as const, shape: [8] }];
 * const plan = planShards([t, t], { splitBytes: 4 });
 * assert.deepEqual(slicesOf(plan, 1).map((s) => [s.name, s.rows]), [["w", [4, 8]]]);
 * ```
 */
export function slicesOf(plan: ShardPlan, writer: number): { name: string; rows: [number, number] }[] {
  if (!Number.isSafeInteger(writer) || writer < 0 || writer >= plan.writers) {
    throw new RangeError(`Invalid writer ${writer}: expected 0 to ${plan.writers - 1}`);
  }
  const out: { name: string; rows: [number, number] }[] = [];
  for (const t of plan.tensors) {
    for (const s of t.slices) if (s.writer === writer) out.push({ name: t.name, rows: s.rows });
  }
  return out;
}

/** Code-unit order, the same in every runtime and locale. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

interface Gathered {
  tensor: PlannedTensor;
  rowBytes: number;
  bytes: number;
  /** Per writer, the row ranges it holds. */
  held: [number, number, number][];
}

function rowsOf(shape: readonly number[]): number {
  return shape.length === 0 ? 1 : shape[0]!;
}

function collect(holdings: readonly (readonly ShardTensor[])[]): Map<string, Gathered> {
  const tensors = new Map<string, Gathered>();
  holdings.forEach((list, writer) => {
    if (!Array.isArray(list)) throw new TypeError(`Cannot plan sharded save: holdings[${writer}] is not an array`);
    const seen = new Set<string>();
    for (const t of list as readonly ShardTensor[]) {
      const where = `tensor ${JSON.stringify(t?.name)} of writer ${writer}`;
      if (typeof t?.name !== "string" || t.name === "") {
        throw new TypeError(`Cannot plan sharded save: ${where} has no name`);
      }
      if (seen.has(t.name)) throw new RangeError(`Cannot plan sharded save: ${where} is listed twice`);
      seen.add(t.name);
      if (!isDType(t.dtype)) throw new TypeError(`Cannot plan sharded save: ${where} has an unknown dtype`);
      const shape: readonly number[] = t.shape;
      if (!Array.isArray(shape) || shape.some((d) => !Number.isSafeInteger(d) || d < 0)) {
        throw new TypeError(`Cannot plan sharded save: ${where} has an invalid shape`);
      }
      const group = t.group ?? "params";
      const rows = rowsOf(t.shape);
      const [start, end] = t.rows ?? [0, rows];
      if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end > rows || start > end) {
        throw new RangeError(`Cannot plan sharded save: ${where} holds rows [${start}, ${end}) outside [0, ${rows})`);
      }
      let g = tensors.get(t.name);
      if (!g) {
        const rowBytes = shape.slice(1).reduce((a, d) => a * d, DTYPES[t.dtype].bytes);
        g = {
          tensor: { name: t.name, dtype: t.dtype, shape: [...t.shape], group, slices: [] },
          rowBytes,
          bytes: rowBytes * rows,
          held: [],
        };
        tensors.set(t.name, g);
      } else if (
        g.tensor.dtype !== t.dtype || g.tensor.group !== group || g.tensor.shape.join() !== t.shape.join()
      ) {
        throw new RangeError(
          `Cannot plan sharded save: ${where} is ${t.dtype} [${t.shape}] in ${group}, but another writer has it as ` +
            `${g.tensor.dtype} [${g.tensor.shape}] in ${g.tensor.group}`,
        );
      }
      g.held.push([writer, start, end]);
    }
  });
  return tensors;
}

/** Cuts the tensor's rows where its holders change, then gives each run to a writer. */
function placeTensor(g: Gathered, load: number[], splitBytes: number): void {
  const rows = rowsOf(g.tensor.shape);
  if (rows === 0) {
    // An empty tensor still has a record (its name, dtype and shape), in one part.
    const writer = Math.min(...g.held.map(([w]) => w));
    g.tensor.slices = [{ writer, rows: [0, 0], bytes: 0 }];
    return;
  }
  const cuts = new Set<number>([0, rows]);
  for (const [, s, e] of g.held) cuts.add(s).add(e);
  const points = [...cuts].sort((a, b) => a - b);
  const slices: PlannedSlice[] = [];
  const has = new Set<number>();
  for (let i = 0; i + 1 < points.length; i++) {
    const start = points[i]!, end = points[i + 1]!;
    const holders = g.held.filter(([, s, e]) => s <= start && end <= e).map(([w]) => w);
    if (holders.length === 0) {
      throw new RangeError(
        `Cannot plan sharded save: no writer holds rows [${start}, ${end}) of tensor ${JSON.stringify(g.tensor.name)}`,
      );
    }
    const last = slices.at(-1);
    const bytes = (end - start) * g.rowBytes;
    const byLoad = (ws: number[]) => [...ws].sort((a, b) => load[a]! - load[b]! || a - b);
    if (bytes >= splitBytes && holders.length > 1) {
      const free = byLoad(holders.filter((w) => !has.has(w) || w === last?.writer));
      const k = Math.min(free.length, end - start);
      for (let j = 0; j < k; j++) {
        const s = start + Math.floor(((end - start) * j) / k), e = start + Math.floor(((end - start) * (j + 1)) / k);
        add(slices, has, load, free[j]!, s, e, g);
      }
      continue;
    }
    const writer = last && holders.includes(last.writer) ? last.writer : byLoad(holders.filter((w) => !has.has(w)))[0];
    if (writer === undefined) {
      throw new RangeError(
        `Cannot plan sharded save: tensor ${
          JSON.stringify(g.tensor.name)
        } would need two separate slices in one part ` +
          `(rows [${start}, ${end}) are held only by writers that already write other rows of it)`,
      );
    }
    add(slices, has, load, writer, start, end, g);
  }
  g.tensor.slices = slices;
}

function add(
  slices: PlannedSlice[],
  has: Set<number>,
  load: number[],
  writer: number,
  s: number,
  e: number,
  g: Gathered,
) {
  const bytes = (e - s) * g.rowBytes;
  load[writer]! += bytes;
  const last = slices.at(-1);
  if (last && last.writer === writer && last.rows[1] === s) {
    last.rows[1] = e;
    last.bytes += bytes;
    return;
  }
  if (has.has(writer)) {
    throw new RangeError(
      `Cannot plan sharded save: tensor ${
        JSON.stringify(g.tensor.name)
      } would need two separate slices in part ${writer}`,
    );
  }
  has.add(writer);
  slices.push({ writer, rows: [s, e], bytes });
}
