/**
 * `ckpt diff`: what differs between two checkpoints — tensors only in one, dtype and shape
 * changes, and for common tensors the largest absolute and relative differences — in bounded
 * memory.
 *
 * @module
 */
import { loadCheckpoint, type Metadata, type Tensor } from "../../mod.ts";
import { type Command, numberOption, type Values } from "./_command.ts";
import { type CliIO, EXIT, humanBytes, jsonNumber, numberText, shapeText, table, UsageError, write } from "./_io.ts";
import { EXTRA_CODECS, indexedKind, openCheckpoint, readError } from "./_source.ts";
import { compareTensors, type Difference } from "./_stats.ts";

/** A tensor without its data. */
interface Desc {
  name: string;
  dtype: string;
  shape: number[];
  group: string;
  bytes: number;
}

const describe = (t: Tensor): Desc => ({
  name: t.name,
  dtype: t.dtype,
  shape: [...t.shape],
  group: t.group,
  bytes: t.data.byteLength,
});

/** Default memory for tensors waiting for their partner: 256 MB. */
const DEFAULT_BUFFER_MB = 256;

/** Pairs up the tensors of two checkpoints and compares them, holding at most `budget` bytes. */
class Matcher {
  readonly descA = new Map<string, Desc>();
  readonly descB = new Map<string, Desc>();
  readonly results = new Map<string, Difference>();
  /** Names whose two tensors could not both be held: compared afterwards by name. */
  readonly deferred: string[] = [];
  #waitA = new Map<string, Tensor>();
  #waitB = new Map<string, Tensor>();
  #dropped = new Set<string>();
  #held = 0;
  #budget: number;
  #tolerance: { atol: number; rtol: number };

  constructor(budget: number, tolerance: { atol: number; rtol: number }) {
    this.#budget = budget;
    this.#tolerance = tolerance;
  }

  compare(a: Tensor, b: Tensor): void {
    if (a.shape.join() !== b.shape.join()) return;
    this.results.set(a.name, compareTensors(a, b, this.#tolerance));
  }

  add(t: Tensor, side: "a" | "b"): void {
    const [mine, theirs, wait, other] = side === "a"
      ? [this.descA, this.descB, this.#waitA, this.#waitB]
      : [this.descB, this.descA, this.#waitB, this.#waitA];
    mine.set(t.name, describe(t));
    if (theirs.has(t.name)) {
      const partner = other.get(t.name);
      if (partner) {
        other.delete(t.name);
        this.#held -= partner.data.byteLength;
        if (side === "a") this.compare(t, partner);
        else this.compare(partner, t);
      } else {
        this.#dropped.delete(t.name);
        this.deferred.push(t.name);
      }
      return;
    }
    wait.set(t.name, t);
    this.#held += t.data.byteLength;
    while (this.#held > this.#budget) this.#evict();
  }

  /** Drops the data of the oldest waiting tensor; if its partner shows up, the pair is deferred. */
  #evict(): void {
    const from = this.#waitA.size >= this.#waitB.size ? this.#waitA : this.#waitB;
    const oldest = from.keys().next().value as string;
    this.#held -= from.get(oldest)!.data.byteLength;
    from.delete(oldest);
    this.#dropped.add(oldest);
  }
}

async function loadOnly(path: string, names: string[]): Promise<Map<string, Tensor>> {
  try {
    const { tensors } = await loadCheckpoint(path, { only: names, codecs: EXTRA_CODECS });
    return new Map(tensors.map((t) => [t.name, t]));
  } catch (e) {
    throw readError(path, e);
  }
}

/**
 * Compares the deferred pairs by name, in batches of A's tensors that fit the budget: each batch
 * is loaded from A (by seeking, for an uncompressed binary file), then B's partners are read one
 * at a time (by seeking) or in one streaming pass over B.
 */
async function compareDeferred(m: Matcher, a: string, b: string, budget: number, io: CliIO): Promise<void> {
  const batches: string[][] = [];
  let batch: string[] = [];
  let size = 0;
  const same = (name: string) => {
    const [x, y] = [m.descA.get(name)!, m.descB.get(name)!];
    return x.shape.join() === y.shape.join();
  };
  for (const name of m.deferred.filter(same)) {
    const bytes = m.descA.get(name)!.bytes;
    if (batch.length > 0 && size + bytes > budget) {
      batches.push(batch);
      batch = [];
      size = 0;
    }
    batch.push(name);
    size += bytes;
  }
  if (batch.length > 0) batches.push(batch);
  const seekB = (await indexedKind(b)) === "index";
  for (const names of batches) {
    const fromA = await loadOnly(a, names);
    if (seekB) {
      for (const name of names) {
        const t = (await loadOnly(b, [name])).get(name)!;
        m.compare(fromA.get(name)!, t);
      }
      continue;
    }
    const B = await openCheckpoint(b, io);
    try {
      for await (const t of B.tensors()) {
        const partner = fromA.get(t.name);
        if (partner) m.compare(partner, t);
      }
    } finally {
      await B.close();
    }
  }
}

function metadataChanges(a: Metadata, b: Metadata): string[][] {
  const rows: string[][] = [];
  const show = (v: unknown) => (v === undefined ? "-" : typeof v === "number" ? numberText(v) : JSON.stringify(v));
  for (const key of ["step", "epoch", "createdAt"] as const) {
    if (a[key] !== b[key]) rows.push([key, show(a[key]), show(b[key])]);
  }
  const metrics = new Set([...Object.keys(a.metrics ?? {}), ...Object.keys(b.metrics ?? {})]);
  for (const k of metrics) {
    const x = a.metrics?.[k];
    const y = b.metrics?.[k];
    if (!Object.is(x, y)) rows.push([`metric ${k}`, show(x), show(y)]);
  }
  const custom = new Set([...Object.keys(a.custom ?? {}), ...Object.keys(b.custom ?? {})]);
  for (const k of custom) {
    const x = JSON.stringify(a.custom?.[k]);
    const y = JSON.stringify(b.custom?.[k]);
    if (x !== y) rows.push([`custom ${k}`, x ?? "-", y ?? "-"]);
  }
  return rows;
}

async function run(values: Values, positionals: string[], io: CliIO): Promise<number> {
  const [a, b] = positionals as [string, string];
  if (a === "-" && b === "-") throw new UsageError("only one of A and B can be standard input (-)");
  const atol = numberOption(values, "tolerance", 0);
  const rtol = numberOption(values, "rtol", 0);
  const budget = numberOption(values, "buffer", DEFAULT_BUFFER_MB) * 2 ** 20;
  const m = new Matcher(budget, { atol, rtol });

  const A = await openCheckpoint(a, io);
  let metaRows: string[][];
  try {
    // One progress line: A's (B is read in step with it).
    const B = await openCheckpoint(b, io, { progress: false });
    try {
      metaRows = metadataChanges(A.metadata, B.metadata);
      const ta = A.tensors();
      const tb = B.tensors();
      let doneA = false;
      let doneB = false;
      while (!doneA || !doneB) {
        if (!doneA) {
          const r = await ta.next();
          if (r.done) doneA = true;
          else m.add(r.value, "a");
        }
        if (!doneB) {
          const r = await tb.next();
          if (r.done) doneB = true;
          else m.add(r.value, "b");
        }
      }
    } finally {
      await B.close();
    }
  } finally {
    await A.close();
  }
  if (m.deferred.length > 0) {
    if (a === "-" || b === "-") {
      throw new UsageError(
        `the tensor order differs too much to compare ${m.deferred.length} tensors within --buffer ${
          budget / 2 ** 20
        } MB while one input is standard input: save it to a file first, or raise --buffer`,
      );
    }
    await compareDeferred(m, a, b, budget, io);
  }

  const onlyA = [...m.descA.values()].filter((d) => !m.descB.has(d.name));
  const onlyB = [...m.descB.values()].filter((d) => !m.descA.has(d.name));
  const common = [...m.descA.values()].filter((d) => m.descB.has(d.name));
  const changed = common.filter((d) => {
    const e = m.descB.get(d.name)!;
    return d.dtype !== e.dtype || d.shape.join() !== e.shape.join();
  });
  const compared = common.filter((d) => m.results.has(d.name));
  const identical = compared.filter((d) => m.results.get(d.name)!.changed === 0);
  const outside = compared.filter((d) => m.results.get(d.name)!.outside > 0);
  const differ = onlyA.length + onlyB.length + changed.length + outside.length > 0;

  if (values.json) {
    const doc = {
      a: a === "-" ? "stdin" : a,
      b: b === "-" ? "stdin" : b,
      tolerance: { atol, rtol },
      differ,
      metadata: metaRows.map(([field, x, y]) => ({ field, a: x, b: y })),
      onlyInA: onlyA,
      onlyInB: onlyB,
      changed: changed.map((d) => {
        const e = m.descB.get(d.name)!;
        return { name: d.name, a: { dtype: d.dtype, shape: d.shape }, b: { dtype: e.dtype, shape: e.shape } };
      }),
      compared: compared.map((d) => {
        const r = m.results.get(d.name)!;
        return {
          name: d.name,
          dtype: d.dtype,
          ...(m.descB.get(d.name)!.dtype !== d.dtype ? { dtypeB: m.descB.get(d.name)!.dtype } : {}),
          shape: d.shape,
          elements: d.shape.reduce((x, y) => x * y, 1),
          changed: r.changed,
          outside: r.outside,
          maxAbs: jsonNumber(r.maxAbs),
          maxRel: jsonNumber(r.maxRel),
        };
      }),
      summary: {
        common: common.length,
        identical: identical.length,
        withinTolerance: compared.length - identical.length - outside.length,
        outsideTolerance: outside.length,
        changedDtypeOrShape: changed.length,
        onlyInA: onlyA.length,
        onlyInB: onlyB.length,
      },
    };
    await write(io.stdout, JSON.stringify(doc, null, 2) + "\n");
    return differ ? EXIT.differ : EXIT.ok;
  }

  let out = "";
  if (metaRows.length > 0) {
    out += "metadata:\n" + table([["field", "A", "B"], ...metaRows].map((r) => ["  " + r[0], r[1]!, r[2]!]));
  }
  const list = (title: string, ds: Desc[]) => {
    if (ds.length === 0) return;
    out += `${title} (${ds.length}):\n` +
      table(ds.map((d) => ["  " + d.name, d.group, d.dtype, shapeText(d.shape), humanBytes(d.bytes)]));
  };
  list("only in A", onlyA);
  list("only in B", onlyB);
  if (changed.length > 0) {
    out += `dtype or shape changed (${changed.length}):\n` + table(changed.map((d) => {
      const e = m.descB.get(d.name)!;
      return ["  " + d.name, `${d.dtype} ${shapeText(d.shape)}`, "->", `${e.dtype} ${shapeText(e.shape)}`];
    }));
  }
  const shown = values.all ? compared : compared.filter((d) => m.results.get(d.name)!.changed > 0);
  if (shown.length > 0) {
    const rows = [["  name", "dtype", "shape", "changed", "max abs", "max rel", "within"]];
    for (const d of shown) {
      const r = m.results.get(d.name)!;
      const n = d.shape.reduce((x, y) => x * y, 1);
      rows.push([
        "  " + d.name,
        d.dtype === m.descB.get(d.name)!.dtype ? d.dtype : `${d.dtype}->${m.descB.get(d.name)!.dtype}`,
        shapeText(d.shape),
        `${r.changed}/${n}`,
        numberText(r.maxAbs),
        numberText(r.maxRel),
        r.outside > 0 ? `no (${r.outside} outside)` : "yes",
      ]);
    }
    out += `values (tolerance |a - b| <= ${atol} + ${rtol} * |b|):\n` +
      table(rows, [false, false, false, true, true, true, false]);
  }
  out += `${common.length} common tensors: ${identical.length} identical, ${
    compared.length - identical.length - outside.length
  } within tolerance, ${outside.length} outside; ${changed.length} changed dtype or shape; ${onlyA.length} only in A, ${onlyB.length} only in B\n`;
  await write(io.stdout, out);
  return differ ? EXIT.differ : EXIT.ok;
}

/**
 * The `diff` command, as `ckpt diff` runs it.
 *
 * @example
 * ```ts
 * import { diffCommand } from "./diff.ts";
 * import { main } from "./main.ts";
 * import { saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * for (const [name, v] of [["a", 1], ["b", 1.5]] as const) {
 *   await saveCheckpoint(`${dir}/${name}.ckpt`, {
 *     metadata: { step: 1 },
 *     tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([v]) }],
 *   });
 * }
 * let out = "";
 * const stdout = new WritableStream<Uint8Array>({ write: (c) => void (out += new TextDecoder().decode(c)) });
 * assert.equal(await main([diffCommand.name, "--json", `${dir}/a.ckpt`, `${dir}/b.ckpt`], { stdout }), 1);
 * assert.equal(JSON.parse(out).compared[0].maxAbs, 0.5);
 * assert.equal(await main([diffCommand.name, "-t", "0.5", `${dir}/a.ckpt`, `${dir}/b.ckpt`], { stdout: new WritableStream() }), 0);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export const diffCommand: Command = {
  name: "diff",
  summary: "compare two checkpoints tensor by tensor",
  synopsis: "[options] A|- B|-",
  description: `
Lists tensors only in A, only in B, tensors whose dtype or shape changed, and for every common
tensor how many elements changed and the largest absolute difference |a - b| and relative
difference |a - b| / max(|a|, |b|). NaN equals NaN; NaN against a number (or Infinity against
-Infinity) is an infinite difference, outside any tolerance. Metadata changes (step, epoch,
metrics, custom) are listed too but do not count as a difference. Tensors of the same shape
but different dtypes (float32 against float16, say) are compared as numbers too, and listed as
a dtype change. By default only common
tensors that changed are listed (--all lists every one).

A common tensor differs when an element lies outside |a - b| <= TOLERANCE + RTOL * |b|
(both 0 by default: any change differs). The exit code is 1 when anything differs: a tensor
only in one side, a dtype or shape change, or values outside the tolerance.

Memory stays bounded: A and B are decoded in step, one tensor at a time, and each tensor is
compared as soon as its partner arrives, so checkpoints with the same tensor order hold two
tensors at once. Tensors waiting for a partner are held up to --buffer MB; beyond that their
data is dropped and those pairs are compared afterwards by name, in batches that fit the
buffer (by seeking, for uncompressed binary files; otherwise by reading the file again). That
second pass needs files: with standard input it fails with a clear message instead.`,
  options: {
    tolerance: { type: "string", short: "t", arg: "ATOL", help: "absolute tolerance (default: 0)" },
    rtol: { type: "string", arg: "RTOL", help: "relative tolerance, times |b| (default: 0)" },
    all: { type: "boolean", short: "a", help: "list every common tensor, identical ones included" },
    buffer: {
      type: "string",
      arg: "MB",
      help: `memory for tensors waiting for a partner (default: ${DEFAULT_BUFFER_MB})`,
    },
    json: { type: "boolean", help: "print one JSON document instead of text" },
  },
  positionals: { min: 2, max: 2 },
  examples: [
    ["ckpt diff step-100.ckpt step-200.ckpt", "what training changed"],
    ["ckpt diff a.ckpt b.ckpt.gz --tolerance 1e-6", "equal up to 1e-6?"],
    ["ckpt diff --rtol 1e-3 fp32.ckpt fp16.ckpt", "values across dtypes, relative tolerance"],
    ["ckpt convert old.jsonl - | ckpt diff - new.ckpt", "one side from a pipe"],
  ],
  exits: [[1, "the checkpoints differ beyond the tolerance"]],
  run,
};
