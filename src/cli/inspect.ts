/**
 * `ckpt inspect`: a checkpoint's metadata, its tensor table (with `--stats`, min, max, mean and
 * NaN count per tensor), totals, codec, compression and digest.
 *
 * @module
 */
import { type Compression, DTYPES, type Metadata, readCheckpointIndex, type Tensor } from "../../mod.ts";
import { readSafetensorsHeader } from "../interop/safetensors_read.ts";
import type { Command, Values } from "./_command.ts";
import { type CliIO, EXIT, humanBytes, jsonNumber, numberText, safeText, shapeText, table, write } from "./_io.ts";
import { hasDigests, indexedKind, openCheckpoint, readError } from "./_source.ts";
import { findTfjsArtifacts, readArtifactsChecked } from "./_tfjs.ts";
import { type TensorStats, tensorStats } from "./_stats.ts";

/** One row of the tensor table. */
interface Row {
  name: string;
  group: string;
  dtype: string;
  shape: number[];
  elements: number;
  bytes: number;
  stats?: TensorStats;
}

/** What inspect found, before it is printed. */
interface Report {
  source: string;
  codec: string;
  compression: Compression;
  /** Input bytes. */
  bytes: number;
  /** SHA-256 of the input bytes (what `sha256sum` prints); absent when the data was not read. */
  sha256: string | undefined;
  /**
   * The stream digest the checkpoint stores (binary footer, JSON end line): checked when the
   * data was read, shown as stored when only the index was; absent for codecs that have none.
   */
  streamDigest: string | undefined;
  /** Whether every record digest and the stream digest were checked. */
  verified: boolean;
  /** How the input was read: streamed whole, only its index or header, or TF.js artifacts read whole. */
  read: "stream" | "index" | "header" | "artifacts";
  metadata: Metadata;
  tensors: Row[];
}

function metadataJson(m: Metadata): Record<string, unknown> {
  const out: Record<string, unknown> = { step: m.step };
  if (m.epoch !== undefined) out.epoch = m.epoch;
  if (m.createdAt !== undefined) out.createdAt = m.createdAt;
  if (m.metrics !== undefined) {
    out.metrics = Object.fromEntries(Object.entries(m.metrics).map(([k, v]) => [k, jsonNumber(v)]));
  }
  if (m.custom !== undefined) out.custom = m.custom;
  return out;
}

function totals(rows: Row[]) {
  const groups = new Map<string, { tensors: number; elements: number; bytes: number }>();
  let elements = 0;
  let bytes = 0;
  for (const r of rows) {
    elements += r.elements;
    bytes += r.bytes;
    const g = groups.get(r.group) ?? { tensors: 0, elements: 0, bytes: 0 };
    g.tensors++;
    g.elements += r.elements;
    g.bytes += r.bytes;
    groups.set(r.group, g);
  }
  return { tensors: rows.length, elements, bytes, groups };
}

function asJson(r: Report): string {
  const t = totals(r.tensors);
  return JSON.stringify(
    {
      source: r.source,
      codec: r.codec,
      compression: r.compression,
      bytes: r.bytes,
      sha256: r.sha256 ?? null,
      streamDigest: r.streamDigest ?? null,
      verified: r.verified,
      read: r.read,
      metadata: metadataJson(r.metadata),
      tensors: r.tensors.map((row) => ({
        name: row.name,
        group: row.group,
        dtype: row.dtype,
        shape: row.shape,
        elements: row.elements,
        bytes: row.bytes,
        ...(row.stats
          ? {
            min: jsonNumber(row.stats.min),
            max: jsonNumber(row.stats.max),
            mean: jsonNumber(row.stats.mean),
            nan: row.stats.nan,
          }
          : {}),
      })),
      totals: {
        tensors: t.tensors,
        elements: t.elements,
        bytes: t.bytes,
        human: humanBytes(t.bytes),
        groups: Object.fromEntries(
          [...t.groups].map(([g, v]) => [g, { ...v, human: humanBytes(v.bytes) }]),
        ),
      },
    },
    null,
    2,
  ) + "\n";
}

function verifiedText(r: Report): string {
  if (r.read === "artifacts") {
    return r.verified
      ? `yes: every shard's size and SHA-256 (the "ckpt" record in model.json)`
      : `structure only (TF.js artifacts without a "ckpt" record have no digests)`;
  }
  if (r.verified) return "yes: every tensor digest and the stream digest";
  if (r.read === "index") {
    return "no: index only, not verified (metadata and index digests checked, tensor data not read; use --full or ckpt verify)";
  }
  if (r.read === "header") return `header only (tensor data not read; ${r.codec} has no digests)`;
  return `structure only (${r.codec} has no digests)`;
}

function asText(r: Report): string {
  const m = r.metadata;
  const head: string[][] = [
    ["source", r.source],
    ["codec", r.codec],
    ["compression", r.compression],
    ["size", `${r.bytes} bytes (${humanBytes(r.bytes)})`],
  ];
  if (r.sha256) head.push(["file sha256", `${r.sha256} (what sha256sum prints)`]);
  if (r.streamDigest) {
    head.push([
      "stream digest",
      `${r.streamDigest} (${r.read === "index" ? "stored in the footer, not checked here" : "verified"})`,
    ]);
  }
  head.push(["verified", verifiedText(r)]);
  head.push(["step", String(m.step)]);
  if (m.epoch !== undefined) head.push(["epoch", String(m.epoch)]);
  if (m.createdAt !== undefined) head.push(["created", m.createdAt]);
  for (const [k, v] of Object.entries(m.metrics ?? {})) head.push([`metric ${k}`, numberText(v)]);
  for (const [k, v] of Object.entries(m.custom ?? {})) head.push([`custom ${k}`, JSON.stringify(v)]);

  const withStats = r.tensors.some((row) => row.stats);
  const header = ["name", "group", "dtype", "shape", "elements", "bytes"];
  if (withStats) header.push("min", "max", "mean", "nan");
  const rows: string[][] = [header];
  for (const row of r.tensors) {
    const cells = [
      row.name,
      row.group,
      row.dtype,
      shapeText(row.shape),
      String(row.elements),
      humanBytes(row.bytes),
    ];
    if (row.stats) {
      cells.push(
        numberText(row.stats.min),
        numberText(row.stats.max),
        numberText(row.stats.mean),
        String(row.stats.nan),
      );
    }
    rows.push(cells);
  }
  const t = totals(r.tensors);
  const groups = [...t.groups].map(([g, v]) =>
    `${safeText(g)}: ${v.tensors} tensor${v.tensors === 1 ? "" : "s"}, ${humanBytes(v.bytes)}`
  );
  const right = [false, false, false, false, true, true, true, true, true, true];
  return table(head) + "\n" + table(rows, right) + "\n" +
    `total: ${t.tensors} tensor${t.tensors === 1 ? "" : "s"}, ${t.elements} elements, ${humanBytes(t.bytes)}` +
    (groups.length ? ` (${groups.join("; ")})` : "") + "\n";
}

async function fromHeader(path: string): Promise<Report> {
  let header;
  try {
    header = await readSafetensorsHeader(path);
  } catch (e) {
    throw readError(path, e);
  }
  return {
    source: path,
    codec: "safetensors",
    compression: "none",
    bytes: header.fileBytes,
    sha256: undefined,
    streamDigest: undefined,
    verified: false,
    read: "header",
    metadata: header.metadata,
    tensors: header.tensors.map((e) => ({
      name: e.name,
      group: e.group,
      dtype: e.dtype,
      shape: e.shape,
      elements: e.byteLength / DTYPES[e.dtype].bytes,
      bytes: e.byteLength,
    })),
  };
}

async function fromIndex(path: string): Promise<Report> {
  let index;
  try {
    index = await readCheckpointIndex(path);
  } catch (e) {
    throw readError(path, e);
  }
  return {
    source: path,
    codec: "binary",
    compression: index.tensors.some((t) => t.encoding) ? "bytegroup" : "none",
    bytes: index.bytes,
    sha256: undefined,
    streamDigest: index.streamSha256,
    verified: false,
    read: "index",
    metadata: index.metadata,
    tensors: index.tensors.map((e) => {
      const elements = e.shape.reduce((a, b) => a * b, 1);
      return {
        name: e.name,
        group: e.group,
        dtype: e.dtype,
        shape: e.shape,
        elements,
        bytes: elements * DTYPES[e.dtype].bytes,
      };
    }),
  };
}

function rowOf(t: Tensor, stats: boolean): Row {
  const row: Row = {
    name: t.name,
    group: t.group,
    dtype: t.dtype,
    shape: [...t.shape],
    elements: t.data.length,
    bytes: t.data.byteLength,
  };
  if (stats) row.stats = tensorStats(t);
  return row;
}

/** TF.js artifacts: `model.json` and every shard read (shards checked where the ckpt record allows). */
async function fromArtifacts(modelJson: string, stats: boolean): Promise<Report> {
  const { checkpoint, bytes, verified } = await readArtifactsChecked(modelJson);
  return {
    source: modelJson,
    codec: "tfjs",
    compression: "none",
    bytes,
    sha256: undefined,
    streamDigest: undefined,
    verified,
    read: "artifacts",
    metadata: checkpoint.metadata,
    tensors: checkpoint.tensors.map((t) => rowOf(t, stats)),
  };
}

async function fromStream(spec: string, io: CliIO, stats: boolean): Promise<Report> {
  const ckpt = await openCheckpoint(spec, io, { hash: true, reuseBuffers: true });
  const tensors: Row[] = [];
  try {
    for await (const t of ckpt.tensors()) tensors.push(rowOf(t, stats));
  } finally {
    await ckpt.close();
  }
  return {
    source: ckpt.label,
    codec: ckpt.codec,
    compression: ckpt.compression,
    bytes: ckpt.bytes(),
    sha256: ckpt.sha256(),
    streamDigest: await ckpt.digest(),
    verified: hasDigests(ckpt.codec),
    read: "stream",
    metadata: ckpt.metadata,
    tensors,
  };
}

async function run(values: Values, positionals: string[], io: CliIO): Promise<number> {
  const spec = positionals[0]!;
  const stats = values.stats === true;
  const artifacts = await findTfjsArtifacts(spec);
  const quick = artifacts === undefined && spec !== "-" && !stats && values.full !== true
    ? await indexedKind(spec)
    : undefined;
  const report = artifacts !== undefined
    ? await fromArtifacts(artifacts, stats)
    : quick === "index"
    ? await fromIndex(spec)
    : quick === "header"
    ? await fromHeader(spec)
    : await fromStream(spec, io, stats);
  await write(io.stdout, values.json ? asJson(report) : asText(report));
  return EXIT.ok;
}

/**
 * The `inspect` command, as `ckpt inspect` runs it.
 *
 * @example
 * ```ts
 * import { inspectCommand } from "./inspect.ts";
 * import { main } from "./main.ts";
 * import { saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile();
 * await saveCheckpoint(path, {
 *   metadata: { step: 7 },
 *   tensors: [{ name: "w", dtype: "int32", shape: [3], data: new Int32Array([1, 2, 3]) }],
 * });
 * let out = "";
 * const stdout = new WritableStream<Uint8Array>({ write: (c) => void (out += new TextDecoder().decode(c)) });
 * assert.equal(await main([inspectCommand.name, "--json", "--stats", path], { stdout }), 0);
 * assert.equal(JSON.parse(out).tensors[0].max, 3);
 * await Deno.remove(path);
 * ```
 */
export const inspectCommand: Command = {
  name: "inspect",
  summary: "show metadata, tensors, totals, codec, compression and digest",
  synopsis: "[options] FILE|-",
  description: `
Prints a checkpoint's metadata, then a table of its tensors (name, group, dtype, shape,
elements, bytes), totals per group with human sizes, the codec, the compression and the digest.

An uncompressed binary file is read through its trailing index (a .safetensors file through
its header): the metadata and the tensor table come without reading tensor data, at any file
size. The tensor data is then neither read nor verified ("index only, not verified"), and the
SHA-256 of the file is not computed; the stream digest stored in the footer is shown, which
ckpt verify --sha256 checks. Any other input (gzip, JSON, standard input), and any input with
--stats or --full, is streamed: records are decoded and verified one at a time in constant
memory, and both digests are shown: the file's SHA-256 (what sha256sum prints) and the
verified stream digest. Safetensors files hold no digests: their structure is checked,
nothing more.

The digests: each record (tensor, metadata, index) carries a SHA-256 of its bytes, checked
before the tensor is handed out. The stream digest covers every other byte and every record
digest, so a fully verified read that matches it proves the whole checkpoint; saveCheckpoint
returns it as "digest" and a CheckpointManager lists it. The file's SHA-256 is what sha256sum
and sidecar files use.

--stats adds min, max and mean (NaN ignored) and the number of NaN elements per tensor.
--json prints one JSON document instead of the text (NaN and Infinity as strings, 64-bit
integers as decimal strings).`,
  options: {
    stats: { type: "boolean", short: "s", help: "add min, max, mean and NaN count per tensor (reads all data)" },
    full: { type: "boolean", help: "read and verify all data even when the index would do" },
    json: { type: "boolean", help: "print one JSON document instead of text" },
  },
  positionals: { min: 1, max: 1 },
  examples: [
    ["ckpt inspect model.ckpt", "metadata and tensor table"],
    ["ckpt inspect --stats model.ckpt.gz", "with min/max/mean/NaN per tensor"],
    ["ckpt inspect --json model.ckpt | jq '.totals'", "machine-readable"],
    ["curl -s https://host/model.ckpt | ckpt inspect -", "from standard input"],
  ],
  exits: [],
  run,
};
