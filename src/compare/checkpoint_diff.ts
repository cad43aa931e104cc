/**
 * What differs between two checkpoints: metadata, tensors only on one side, dtype, shape and
 * group changes, and per common tensor the element differences against a tolerance. Both sides
 * are read in step, one tensor at a time, so memory stays bounded: the `ckpt diff` command and
 * the `./testing` assertions both stand on it.
 *
 * @module
 */
import { checkDiffOptions } from "./_option_names.ts";
import type { DType, Metadata, Tensor } from "../format/types.ts";
import { compareTensors, type EqualityOptions, type TensorDifference, type Tolerance } from "./tensor_diff.ts";

/** Default memory for tensors waiting for their partner: 256 MiB. */
export const DEFAULT_DIFF_BUFFER_BYTES = 256 * 2 ** 20;

/** One side of a comparison, opened for reading. */
export interface DiffSource {
  /** The decoded metadata. */
  readonly metadata: Metadata;
  /** The tensors in stored order, each verified before it is handed out. */
  tensors(): AsyncIterator<Tensor>;
  /**
   * The named tensors again, in any order, one at a time (by seeking, or by reading the source
   * again). Absent for a source that can be read only once, such as a pipe.
   */
  byName?(names: readonly string[]): AsyncIterable<Tensor>;
  /**
   * Whether a tensor from {@linkcode DiffSource.tensors} stays valid only until the next one is
   * requested (a decoder that reuses one buffer). The engine then copies what it must hold.
   */
  readonly transient?: boolean;
}

/** A tolerance for the tensors whose names match `pattern` (a name, or a glob where `*` matches anything, or a RegExp). */
export interface NameTolerance extends Tolerance {
  /** Which tensors. */
  pattern: string | RegExp;
}

/** Options for {@linkcode diffCheckpoints}. */
export interface DiffOptions extends EqualityOptions {
  /** Tolerances by dtype (of the expected tensor); they override `atol`/`rtol`. */
  dtypes?: Partial<Record<DType, Tolerance>>;
  /** Tolerances by tensor name; the first match wins and overrides `dtypes`. */
  names?: readonly NameTolerance[];
  /**
   * Tolerance for metrics. `step`, `epoch`, `createdAt` and `custom` always compare exactly.
   *
   * @default {the `atol` and `rtol` options}
   */
  metrics?: Tolerance;
  /**
   * Metadata fields not to compare: `"step"`, `"epoch"`, `"createdAt"`, `"metrics"`, `"custom"`,
   * or one entry such as `"metrics.loss"` or `"custom.lr"`.
   *
   * @default {[]}
   */
  ignoreMetadata?: readonly string[];
  /**
   * Bytes of tensors held while they wait for their partner; beyond that, pairs are compared
   * afterwards through {@linkcode DiffSource.byName}, in batches of this size.
   *
   * @default {DEFAULT_DIFF_BUFFER_BYTES}
   */
  bufferBytes?: number;
}

/** A tensor without its data. */
export interface TensorSummary {
  /** Its name. */
  name: string;
  /** Its dtype. */
  dtype: DType;
  /** Its shape. */
  shape: number[];
  /** Its group. */
  group: string;
  /** Bytes of data. */
  bytes: number;
}

/** A metadata field whose values differ. */
export interface MetadataChange {
  /** `step`, `epoch`, `createdAt`, `metrics.NAME` or `custom.NAME`. */
  field: string;
  /** The value on the actual side (`undefined` when absent). */
  actual: unknown;
  /** The value on the expected side (`undefined` when absent). */
  expected: unknown;
}

/** Two tensors of the same name, compared element by element. */
export interface ComparedTensors {
  /** The actual side. */
  actual: TensorSummary;
  /** The expected side. */
  expected: TensorSummary;
  /** The tolerance that applied. */
  tolerance: Required<Tolerance>;
  /** How the elements differ. */
  difference: TensorDifference;
}

/** Everything {@linkcode diffCheckpoints} found. */
export interface CheckpointDiff {
  /** Metadata fields that differ. */
  metadata: MetadataChange[];
  /** Tensors only on the actual side, in its order. */
  onlyInActual: TensorSummary[];
  /** Tensors only on the expected side, in its order. */
  onlyInExpected: TensorSummary[];
  /** Tensors on both sides whose dtype or shape differ. */
  changed: { actual: TensorSummary; expected: TensorSummary }[];
  /** Tensors on both sides whose group differs. */
  regrouped: { actual: TensorSummary; expected: TensorSummary }[];
  /** Tensors on both sides of the same shape, compared (in the actual side's order). */
  compared: ComparedTensors[];
  /** How many names are on both sides. */
  common: number;
}

/**
 * Whether a diff holds a difference that counts: a tensor on one side only, a dtype, shape or
 * group change, values outside the tolerance, or (with `metadata`) a metadata change.
 *
 * @example
 * ```ts
 * import { differs } from "./checkpoint_diff.ts";
 * import assert from "node:assert/strict";
 * const empty = { metadata: [], onlyInActual: [], onlyInExpected: [], changed: [], regrouped: [], compared: [], common: 0 };
 * assert.equal(differs(empty), false);
 * assert.equal(differs({ ...empty, metadata: [{ field: "step", actual: 1, expected: 2 }] }, { metadata: true }), true);
 * ```
 */
export function differs(diff: CheckpointDiff, options: { metadata?: boolean } = {}): boolean {
  return diff.onlyInActual.length + diff.onlyInExpected.length + diff.changed.length + diff.regrouped.length > 0 ||
    diff.compared.some((c) => c.difference.outside > 0) ||
    (options.metadata === true && diff.metadata.length > 0);
}

function globToRegExp(glob: string): RegExp {
  const body = glob.split("*").map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*");
  return new RegExp(`^${body}$`, "s");
}

/** Resolves the tolerance for one tensor: name pattern, then dtype, then the defaults. */
function toleranceResolver(options: DiffOptions): (name: string, dtype: DType) => Required<Tolerance> {
  const base = { atol: options.atol ?? 0, rtol: options.rtol ?? 0 };
  const names = (options.names ?? []).map((n) => ({
    re: typeof n.pattern === "string" ? globToRegExp(n.pattern) : n.pattern,
    tol: n,
  }));
  for (const [k, v] of Object.entries({ base, ...options.dtypes })) checkTolerance(v, k);
  for (const n of options.names ?? []) checkTolerance(n, String(n.pattern));
  return (name, dtype) => {
    const byName = names.find((n) => n.re.test(name))?.tol;
    const byDtype = options.dtypes?.[dtype];
    const pick = byName ?? byDtype;
    return pick ? { atol: pick.atol ?? base.atol, rtol: pick.rtol ?? base.rtol } : base;
  };
}

function checkTolerance(t: Tolerance | undefined, where: string): void {
  for (const key of ["atol", "rtol"] as const) {
    const v = t?.[key];
    if (v !== undefined && !(typeof v === "number" && v >= 0)) {
      throw new TypeError(`Cannot compare checkpoints: ${key} for ${where} must be a number >= 0, got ${String(v)}`);
    }
  }
}

const summary = (t: Tensor): TensorSummary => ({
  name: t.name,
  dtype: t.dtype,
  shape: [...t.shape],
  group: t.group,
  bytes: t.data.byteLength,
});

const sameShape = (a: TensorSummary, b: TensorSummary) =>
  a.shape.length === b.shape.length && a.shape.every((d, i) => d === b.shape[i]);

/** Pairs up the tensors of two checkpoints and compares them, holding at most `budget` bytes. */
class Matcher {
  readonly a = new Map<string, TensorSummary>();
  readonly b = new Map<string, TensorSummary>();
  readonly results = new Map<string, ComparedTensors>();
  /** Names whose two tensors could not both be held: compared afterwards by name. */
  readonly deferred: string[] = [];
  #waitA = new Map<string, Tensor>();
  #waitB = new Map<string, Tensor>();
  #held = 0;
  #budget: number;
  #options: DiffOptions;
  #tolerance: (name: string, dtype: DType) => Required<Tolerance>;

  constructor(options: DiffOptions) {
    this.#budget = options.bufferBytes ?? DEFAULT_DIFF_BUFFER_BYTES;
    this.#options = options;
    this.#tolerance = toleranceResolver(options);
  }

  compare(a: Tensor, b: Tensor): void {
    const [sa, sb] = [this.a.get(a.name)!, this.b.get(b.name)!];
    if (!sameShape(sa, sb)) return;
    const tolerance = this.#tolerance(b.name, b.dtype);
    const difference = compareTensors(a, b, { ...this.#options, ...tolerance });
    this.results.set(a.name, { actual: sa, expected: sb, tolerance, difference });
  }

  /** Whether two tensors arriving together can be compared at once, holding neither. */
  fresh(a: Tensor, b: Tensor): boolean {
    return a.name === b.name && !this.a.has(a.name) && !this.b.has(b.name);
  }

  pair(a: Tensor, b: Tensor): void {
    this.a.set(a.name, summary(a));
    this.b.set(b.name, summary(b));
    this.compare(a, b);
  }

  add(t: Tensor, side: "a" | "b", transient = false): void {
    const [mine, theirs, wait, other] = side === "a"
      ? [this.a, this.b, this.#waitA, this.#waitB]
      : [this.b, this.a, this.#waitB, this.#waitA];
    if (mine.has(t.name)) throw new SyntaxError(`Cannot compare checkpoints: tensor "${t.name}" appears twice`);
    mine.set(t.name, summary(t));
    if (theirs.has(t.name)) {
      const partner = other.get(t.name);
      if (partner) {
        other.delete(t.name);
        this.#held -= partner.data.byteLength;
        if (side === "a") this.compare(t, partner);
        else this.compare(partner, t);
      } else {
        this.deferred.push(t.name);
      }
      return;
    }
    wait.set(t.name, transient ? { ...t, data: t.data.slice() } : t);
    this.#held += t.data.byteLength;
    while (this.#held > this.#budget) this.#evict();
  }

  /** Drops the data of the oldest waiting tensor; if its partner shows up, the pair is deferred. */
  #evict(): void {
    const from = this.#waitA.size >= this.#waitB.size ? this.#waitA : this.#waitB;
    const oldest = from.keys().next().value as string;
    this.#held -= from.get(oldest)!.data.byteLength;
    from.delete(oldest);
  }

  /** Compares the deferred pairs by name, in batches of the actual side's tensors that fit the budget. */
  async compareDeferred(a: DiffSource, b: DiffSource): Promise<void> {
    const names = this.deferred.filter((n) => sameShape(this.a.get(n)!, this.b.get(n)!));
    if (names.length === 0) return;
    if (!a.byName || !b.byName) {
      throw new RangeError(
        `Cannot compare checkpoints: the tensor order differs too much to compare ${names.length} tensors within ${this.#budget} bytes of buffer, and one side can be read only once: save it to a file first, or raise the buffer`,
      );
    }
    const batches: string[][] = [];
    let batch: string[] = [];
    let size = 0;
    for (const name of names) {
      const bytes = this.a.get(name)!.bytes;
      if (batch.length > 0 && size + bytes > this.#budget) {
        batches.push(batch);
        batch = [];
        size = 0;
      }
      batch.push(name);
      size += bytes;
    }
    if (batch.length > 0) batches.push(batch);
    for (const names of batches) {
      const fromA = new Map<string, Tensor>();
      for await (const t of a.byName(names)) fromA.set(t.name, t);
      for await (const t of b.byName(names)) {
        const partner = fromA.get(t.name);
        if (partner) {
          this.compare(partner, t);
          fromA.delete(t.name);
        }
      }
    }
  }
}

function metadataChanges(a: Metadata, b: Metadata, options: DiffOptions): MetadataChange[] {
  const ignore = new Set(options.ignoreMetadata ?? []);
  const rows: MetadataChange[] = [];
  for (const key of ["step", "epoch", "createdAt"] as const) {
    if (!ignore.has(key) && a[key] !== b[key]) rows.push({ field: key, actual: a[key], expected: b[key] });
  }
  const { atol, rtol } = { atol: options.atol ?? 0, rtol: options.rtol ?? 0, ...options.metrics };
  if (!ignore.has("metrics")) {
    for (const k of new Set([...Object.keys(a.metrics ?? {}), ...Object.keys(b.metrics ?? {})])) {
      const x = a.metrics?.[k];
      const y = b.metrics?.[k];
      if (ignore.has(`metrics.${k}`) || Object.is(x, y)) continue;
      const close = x !== undefined && y !== undefined && Number.isFinite(x - y) &&
        Math.abs(x - y) <= atol + rtol * Math.abs(y);
      if (!close) rows.push({ field: `metrics.${k}`, actual: x, expected: y });
    }
  }
  if (!ignore.has("custom")) {
    for (const k of new Set([...Object.keys(a.custom ?? {}), ...Object.keys(b.custom ?? {})])) {
      const x = a.custom?.[k];
      const y = b.custom?.[k];
      if (!ignore.has(`custom.${k}`) && JSON.stringify(x) !== JSON.stringify(y)) {
        rows.push({ field: `custom.${k}`, actual: x, expected: y });
      }
    }
  }
  return rows;
}

/**
 * Compares two checkpoints tensor by tensor in bounded memory. Both sides are read in step, and
 * each tensor is compared as soon as its partner arrives; tensors waiting for a partner are held
 * up to `bufferBytes`, beyond which pairs are compared afterwards by name.
 *
 * @example
 * ```ts
 * import { diffCheckpoints, type DiffSource } from "./checkpoint_diff.ts";
 * import type { Tensor } from "../format/types.ts";
 * import assert from "node:assert/strict";
 * async function* one(v: number): AsyncGenerator<Tensor> {
 *   yield { name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, v]), group: "params" };
 * }
 * const side = (v: number): DiffSource => ({ metadata: { step: 1 }, tensors: () => one(v) });
 * const diff = await diffCheckpoints(side(2), side(2.5), { atol: 0.1 });
 * assert.equal(diff.compared[0]!.difference.outside, 1);
 * assert.deepEqual(diff.compared[0]!.difference.first, { index: 1, actual: 2, expected: 2.5 });
 * ```
 */
export async function diffCheckpoints(
  actual: DiffSource,
  expected: DiffSource,
  options: DiffOptions = {},
): Promise<CheckpointDiff> {
  checkDiffOptions(options, "Cannot compare checkpoints");
  const m = new Matcher(options);
  const metadata = metadataChanges(actual.metadata, expected.metadata, options);
  const ta = actual.tensors();
  const tb = expected.tensors();
  let doneA = false;
  let doneB = false;
  while (!doneA || !doneB) {
    const ra = doneA ? undefined : await ta.next();
    const rb = doneB ? undefined : await tb.next();
    if (ra?.done) doneA = true;
    if (rb?.done) doneB = true;
    const x = ra && !ra.done ? ra.value : undefined;
    const y = rb && !rb.done ? rb.value : undefined;
    // Same order on both sides (the usual case): compare at once, holding (and copying) nothing.
    if (x && y && m.fresh(x, y)) {
      m.pair(x, y);
      continue;
    }
    if (x) m.add(x, "a", actual.transient);
    if (y) m.add(y, "b", expected.transient);
  }
  await m.compareDeferred(actual, expected);
  const common = [...m.a.values()].filter((d) => m.b.has(d.name));
  return {
    metadata,
    onlyInActual: [...m.a.values()].filter((d) => !m.b.has(d.name)),
    onlyInExpected: [...m.b.values()].filter((d) => !m.a.has(d.name)),
    changed: common.filter((d) => {
      const e = m.b.get(d.name)!;
      return d.dtype !== e.dtype || !sameShape(d, e);
    }).map((d) => ({ actual: d, expected: m.b.get(d.name)! })),
    regrouped: common.filter((d) => d.group !== m.b.get(d.name)!.group).map((d) => ({
      actual: d,
      expected: m.b.get(d.name)!,
    })),
    compared: common.flatMap((d) => m.results.get(d.name) ?? []),
    common: common.length,
  };
}
