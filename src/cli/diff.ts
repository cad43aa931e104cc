/**
 * `ckpt diff`: what differs between two checkpoints — tensors only in one, dtype and shape
 * changes, and for common tensors the largest absolute and relative differences — in bounded
 * memory.
 *
 * @module
 */
import { loadCheckpoint, type Tensor } from "../../mod.ts";
import { type Command, numberOption, type Values } from "./_command.ts";
import { type CliIO, EXIT, humanBytes, jsonNumber, numberText, shapeText, table, UsageError, write } from "./_io.ts";
import { EXTRA_CODECS, indexedKind, type OpenCheckpoint, openCheckpoint, readError } from "./_source.ts";
import { findTfjsArtifacts, readArtifacts } from "./_tfjs.ts";
import { openSide } from "../testing/_open.ts";
import {
  type CheckpointDiff,
  DEFAULT_DIFF_BUFFER_BYTES,
  diffCheckpoints,
  type DiffSource,
  type MetadataChange,
  type TensorSummary,
} from "../compare/checkpoint_diff.ts";

/** Default memory for tensors waiting for their partner, in MiB. */
const DEFAULT_BUFFER_MB = DEFAULT_DIFF_BUFFER_BYTES / 2 ** 20;

async function loadOnly(path: string, names: readonly string[]): Promise<Tensor[]> {
  try {
    return (await loadCheckpoint(path, { only: [...names], codecs: EXTRA_CODECS })).tensors;
  } catch (e) {
    throw readError(path, e);
  }
}

/**
 * One side as the comparison engine reads it. Tensors read again by name (pairs whose order
 * differed too much to hold) come by seeking, for an uncompressed binary file, or from one more
 * streaming pass; standard input cannot be read again.
 */
async function side(path: string, open: OpenCheckpoint, io: CliIO): Promise<DiffSource> {
  const seek = path !== "-" && (await indexedKind(path)) === "index";
  return {
    metadata: open.metadata,
    tensors: () => open.tensors(),
    byName: path === "-" ? undefined : async function* (names) {
      if (seek) {
        for (const name of names) yield* await loadOnly(path, [name]);
        return;
      }
      const wanted = new Set(names);
      const again = await openCheckpoint(path, io, { progress: false });
      try {
        for await (const t of again.tensors()) if (wanted.has(t.name)) yield t;
      } finally {
        await again.close();
      }
    },
  };
}

/** The CLI's metadata rows: `step`, `epoch`, `createdAt`, `metric NAME`, `custom NAME`. */
function metadataRows(changes: MetadataChange[]): string[][] {
  const show = (v: unknown) => (v === undefined ? "-" : typeof v === "number" ? numberText(v) : JSON.stringify(v));
  return changes.map(({ field, actual, expected }) => {
    const [kind, key] = field.split(/\.(.*)/s) as [string, string | undefined];
    if (kind === "metrics") return [`metric ${key}`, show(actual), show(expected)];
    if (kind === "custom") return [`custom ${key}`, JSON.stringify(actual) ?? "-", JSON.stringify(expected) ?? "-"];
    return [field, show(actual), show(expected)];
  });
}

async function run(values: Values, positionals: string[], io: CliIO): Promise<number> {
  const [a, b] = positionals as [string, string];
  if (a === "-" && b === "-") throw new UsageError("only one of A and B can be standard input (-)");
  const atol = numberOption(values, "tolerance", 0);
  const rtol = numberOption(values, "rtol", 0);
  const budget = numberOption(values, "buffer", DEFAULT_BUFFER_MB) * 2 ** 20;
  const options = { atol, rtol, metrics: { atol: 0, rtol: 0 }, bufferBytes: budget };
  // Checkpoints are streamed (closed when done); TF.js artifacts are read whole first.
  const opened: OpenCheckpoint[] = [];
  const open = async (spec: string, progress: boolean): Promise<DiffSource> => {
    const artifacts = await findTfjsArtifacts(spec);
    // Read whole (every shard checked against model.json's "ckpt" record where it has one), as
    // `inspect` and `verify` read them; then a side in memory, as `assertCheckpointEquals` takes one.
    if (artifacts !== undefined) return await openSide(await readArtifacts(artifacts), spec);
    const o = await openCheckpoint(spec, io, progress ? undefined : { progress: false });
    opened.push(o);
    return await side(spec, o, io);
  };
  let diff: CheckpointDiff;
  try {
    // One progress line: A's (B is read in step with it).
    const A = await open(a, true);
    const B = await open(b, false);
    try {
      diff = await diffCheckpoints(A, B, options);
    } catch (e) {
      if (e instanceof RangeError && /tensor order differs too much/.test(e.message)) {
        throw new UsageError(
          `the tensor order differs too much to compare within --buffer ${
            budget / 2 ** 20
          } MiB while one input is standard input: save it to a file first, or raise --buffer`,
        );
      }
      throw e;
    }
  } finally {
    for (const o of opened.reverse()) await o.close();
  }
  const metaRows = metadataRows(diff.metadata);
  const onlyA = diff.onlyInActual;
  const onlyB = diff.onlyInExpected;
  const changed = diff.changed.map((c) => c.actual);
  const descB = new Map(diff.changed.concat(diff.compared).map((c) => [c.actual.name, c.expected]));
  const results = new Map(diff.compared.map((c) => [c.actual.name, c.difference]));
  const compared = diff.compared.map((c) => c.actual);
  const common = { length: diff.common };
  const identical = compared.filter((d) => results.get(d.name)!.changed === 0);
  const outside = compared.filter((d) => results.get(d.name)!.outside > 0);
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
        const e = descB.get(d.name)!;
        return { name: d.name, a: { dtype: d.dtype, shape: d.shape }, b: { dtype: e.dtype, shape: e.shape } };
      }),
      compared: compared.map((d) => {
        const r = results.get(d.name)!;
        return {
          name: d.name,
          dtype: d.dtype,
          ...(descB.get(d.name)!.dtype !== d.dtype ? { dtypeB: descB.get(d.name)!.dtype } : {}),
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
  const list = (title: string, ds: TensorSummary[]) => {
    if (ds.length === 0) return;
    out += `${title} (${ds.length}):\n` +
      table(ds.map((d) => ["  " + d.name, d.group, d.dtype, shapeText(d.shape), humanBytes(d.bytes)]));
  };
  list("only in A", onlyA);
  list("only in B", onlyB);
  if (changed.length > 0) {
    out += `dtype or shape changed (${changed.length}):\n` + table(changed.map((d) => {
      const e = descB.get(d.name)!;
      return ["  " + d.name, `${d.dtype} ${shapeText(d.shape)}`, "->", `${e.dtype} ${shapeText(e.shape)}`];
    }));
  }
  const shown = values.all ? compared : compared.filter((d) => results.get(d.name)!.changed > 0);
  if (shown.length > 0) {
    const rows = [["  name", "dtype", "shape", "changed", "max abs", "max rel", "within"]];
    for (const d of shown) {
      const r = results.get(d.name)!;
      const n = d.shape.reduce((x, y) => x * y, 1);
      rows.push([
        "  " + d.name,
        d.dtype === descB.get(d.name)!.dtype ? d.dtype : `${d.dtype}->${descB.get(d.name)!.dtype}`,
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
tensors that changed are listed (--all lists every one). Either side may be TF.js artifacts
(a model.json or the folder holding it), read whole, every shard checked against model.json's
ckpt record where it has one.

A common tensor differs when an element lies outside |a - b| <= TOLERANCE + RTOL * |b|
(both 0 by default: any change differs). The exit code is 1 when anything differs: a tensor
only in one side, a dtype or shape change, or values outside the tolerance.

Memory stays bounded: A and B are decoded in step, one tensor at a time, and each tensor is
compared as soon as its partner arrives, so checkpoints with the same tensor order hold two
tensors at once. Tensors waiting for a partner are held up to --buffer MiB; beyond that their
data is dropped and those pairs are compared afterwards by name, in batches that fit the
buffer (by seeking, for uncompressed binary files; otherwise by reading the file again). That
second pass needs files: with standard input it fails with a clear message instead.`,
  options: {
    tolerance: { type: "string", short: "t", arg: "ATOL", help: "absolute tolerance (default: 0)" },
    rtol: { type: "string", arg: "RTOL", help: "relative tolerance, times |b| (default: 0)" },
    all: { type: "boolean", short: "a", help: "list every common tensor, identical ones included" },
    buffer: {
      type: "string",
      arg: "MiB",
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
    ["ckpt diff web/mlp step-600.ckpt", "a TF.js export against its checkpoint"],
  ],
  exits: [[1, "the checkpoints differ beyond the tolerance"]],
  run,
};
