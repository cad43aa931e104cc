/**
 * A checkpoint diff as text for people: what an assertion failure says. Every section is capped
 * so a failure stays readable however much differs.
 *
 * @module
 */
import type { CheckpointDiff, ComparedTensors, TensorSummary } from "./checkpoint_diff.ts";
import type { ElementValue } from "./tensor_diff.ts";

/** Default number of entries listed per section of a report. */
export const DEFAULT_REPORT_ENTRIES = 10;

/** Options for {@linkcode formatDiff}. */
export interface FormatOptions {
  /**
   * Entries listed per section; the rest are counted.
   *
   * @default {DEFAULT_REPORT_ENTRIES}
   */
  maxEntries?: number;
  /**
   * Whether to report metadata changes.
   *
   * @default {true}
   */
  metadata?: boolean;
}

/** `[2, 3]`. */
export function shapeText(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/** A value as the report shows it: `-0` keeps its sign, 64-bit integers stay exact, bools are `true`/`false`. */
function valueText(v: unknown, dtype?: string): string {
  if (dtype === "bool" && typeof v === "number") return v === 0 ? "false" : "true";
  if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
  if (typeof v === "bigint") return String(v);
  if (v === undefined) return "(absent)";
  const s = JSON.stringify(v);
  return s.length > 80 ? s.slice(0, 77) + "..." : s;
}

/** The multi-dimensional index of flat (row-major) index `i` in `shape`. */
function unravel(i: number, shape: readonly number[]): number[] {
  const out: number[] = new Array(shape.length);
  for (let k = shape.length - 1; k >= 0; k--) {
    const d = shape[k]!;
    out[k] = d === 0 ? 0 : i % d;
    i = d === 0 ? 0 : Math.floor(i / d);
  }
  return out;
}

const plural = (n: number, one: string, many = one + "s") => `${n} ${n === 1 ? one : many}`;
const described = (t: TensorSummary) => `${JSON.stringify(t.name)} ${t.dtype} ${shapeText(t.shape)} ${t.group}`;

function section<T>(title: string, items: readonly T[], line: (t: T) => string, max: number): string {
  if (items.length === 0) return "";
  let out = `${title} (${items.length}):\n`;
  for (const item of items.slice(0, max)) out += `  ${line(item)}\n`;
  if (items.length > max) out += `  ... and ${items.length - max} more\n`;
  return out;
}

function valuesLine(c: ComparedTensors): string {
  const { actual: a, expected: e, difference: d, tolerance } = c;
  const n = a.shape.reduce((x, y) => x * y, 1);
  const dtype = a.dtype === e.dtype ? a.dtype : `${a.dtype}/${e.dtype}`;
  let line = `${JSON.stringify(a.name)} ${dtype} ${shapeText(a.shape)}: ${d.outside} of ${n} elements outside ` +
    `atol ${tolerance.atol} + rtol ${tolerance.rtol} * |expected|; max abs diff ${valueText(d.maxAbs)}, ` +
    `max rel diff ${valueText(d.maxRel)}`;
  if (d.first) {
    const at = (v: ElementValue, dt: string) => valueText(v, dt);
    line += `; first at ${shapeText(unravel(d.first.index, a.shape))}: actual ${at(d.first.actual, a.dtype)}, ` +
      `expected ${at(d.first.expected, e.dtype)}`;
  }
  return line;
}

/**
 * Describes a diff: a one-line summary, then each kind of difference with its entries.
 * Gives `""` when nothing differs.
 *
 * @example
 * ```ts
 * import { formatDiff } from "./format.ts";
 * import assert from "node:assert/strict";
 * const w = { name: "w", dtype: "float32" as const, shape: [2, 2], group: "params", bytes: 16 };
 * const text = formatDiff({
 *   metadata: [], onlyInActual: [], onlyInExpected: [], changed: [], regrouped: [], common: 1,
 *   compared: [{
 *     actual: w, expected: w, tolerance: { atol: 0, rtol: 0 },
 *     difference: { maxAbs: 0.5, maxRel: 0.2, changed: 1, outside: 1, first: { index: 3, actual: 2, expected: 2.5 } },
 *   }],
 * });
 * assert.equal(text, `checkpoints differ: 1 tensor outside tolerance
 * values outside tolerance (1):
 *   "w" float32 [2, 2]: 1 of 4 elements outside atol 0 + rtol 0 * |expected|; max abs diff 0.5, max rel diff 0.2; first at [1, 1]: actual 2, expected 2.5
 * `);
 * ```
 */
export function formatDiff(diff: CheckpointDiff, options: FormatOptions = {}): string {
  const max = options.maxEntries ?? DEFAULT_REPORT_ENTRIES;
  const metadata = options.metadata ?? true ? diff.metadata : [];
  const outside = diff.compared.filter((c) => c.difference.outside > 0);
  const parts = [
    metadata.length && plural(metadata.length, "metadata field"),
    diff.onlyInActual.length && `${plural(diff.onlyInActual.length, "tensor")} only in actual`,
    diff.onlyInExpected.length && `${plural(diff.onlyInExpected.length, "tensor")} only in expected`,
    diff.changed.length && plural(diff.changed.length, "dtype or shape change"),
    diff.regrouped.length && plural(diff.regrouped.length, "group change"),
    outside.length && `${plural(outside.length, "tensor")} outside tolerance`,
  ].filter((p): p is string => typeof p === "string");
  if (parts.length === 0) return "";
  return `checkpoints differ: ${parts.join(", ")}\n` +
    section(
      "metadata",
      metadata,
      (m) => `${m.field}: actual ${valueText(m.actual)}, expected ${valueText(m.expected)}`,
      max,
    ) +
    section("only in actual", diff.onlyInActual, described, max) +
    section("only in expected", diff.onlyInExpected, described, max) +
    section(
      "dtype or shape changed",
      diff.changed,
      (c) =>
        `${JSON.stringify(c.actual.name)}: actual ${c.actual.dtype} ${
          shapeText(c.actual.shape)
        }, expected ${c.expected.dtype} ${shapeText(c.expected.shape)}`,
      max,
    ) +
    section(
      "group changed",
      diff.regrouped,
      (c) => `${JSON.stringify(c.actual.name)}: actual ${c.actual.group}, expected ${c.expected.group}`,
      max,
    ) +
    section("values outside tolerance", outside, valuesLine, max);
}
