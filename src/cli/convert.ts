/**
 * `ckpt convert`: re-encodes a checkpoint in another codec or compression, streaming one tensor
 * at a time from input to output; TF.js artifacts (`model.json` and shards) in and out.
 *
 * @module
 */
import { dirname } from "node:path";
import {
  type Checkpoint,
  type CheckpointInput,
  ChecksumMismatchError,
  type Codec,
  type CodecName,
  type Compression,
  readCheckpointIndex,
  saveCheckpoint,
} from "../../mod.ts";
import { createSafetensorsCodec, type SafetensorsTensorDescriptor } from "../interop/safetensors.ts";
import { readSafetensorsHeader } from "../interop/safetensors_read.ts";
import { writeTfjsArtifacts } from "../interop/tfjs_artifacts.ts";
import { choiceOption, type Command, type Values } from "./_command.ts";
import { BadCheckpointError, type CliIO, EXIT, FileError, isOsError, isRemote, osReason, UsageError } from "./_io.ts";
import { EXTRA_CODECS, indexedKind, openCheckpoint, readError } from "./_source.ts";
import { checkTfjsTarget, findTfjsArtifacts, readArtifacts } from "./_tfjs.ts";
import { OsErrors } from "../runtime/errors.ts";
import { files } from "../runtime/files.ts";
import { saveSharded } from "../shard/write.ts";
import { locate } from "../io/read.ts";
import { ShardConflictError } from "../shard/errors.ts";

async function checkTarget(path: string): Promise<void> {
  const fail = (why: string): never => {
    throw new FileError(`Cannot write ${JSON.stringify(path)}: ${why}`);
  };
  if (isRemote(path)) {
    // s3:// is written through its store (the upload is atomic); http(s):// is read-only.
    if (!/^s3:/i.test(path)) {
      throw new UsageError(
        `Cannot write ${JSON.stringify(path)}: HTTP addresses are read-only; write to a path or s3://`,
      );
    }
    return;
  }
  try {
    const info = await files.stat(path);
    if (info.isDirectory) fail("it is a directory");
  } catch (e) {
    if (e instanceof FileError) throw e;
    if (!(e instanceof OsErrors.NotFound)) fail(osReason(e));
  }
  const dir = dirname(path);
  try {
    const info = await files.stat(dir);
    if (!info.isDirectory) fail(`${JSON.stringify(dir)} is not a directory`);
  } catch (e) {
    if (e instanceof FileError) throw e;
    fail(e instanceof OsErrors.NotFound ? `directory ${JSON.stringify(dir)} does not exist` : osReason(e));
  }
}

/**
 * Every tensor's name, dtype, shape and group, known before the first byte of a safetensors
 * output is written (its header lists them all): from a binary file's index or a safetensors
 * header without reading data, else from a first verified pass over the file. Standard input
 * cannot be read twice: undefined, and the safetensors encoder then holds every tensor.
 */
async function descriptors(from: string, io: CliIO): Promise<SafetensorsTensorDescriptor[] | undefined> {
  if (from === "-") return undefined;
  const kind = await indexedKind(from);
  try {
    if (kind === "index") return (await readCheckpointIndex(from)).tensors;
    if (kind === "header") return (await readSafetensorsHeader(from)).tensors;
  } catch (e) {
    throw readError(from, e);
  }
  const ckpt = await openCheckpoint(from, io);
  const out: SafetensorsTensorDescriptor[] = [];
  try {
    for await (const t of ckpt.tensors()) {
      out.push({ name: t.name, dtype: t.dtype, shape: [...t.shape], group: t.group });
    }
  } finally {
    await ckpt.close();
  }
  return out;
}

type OutputCodec = CodecName | "safetensors" | "tfjs";

/**
 * Writes the output with `write`, turning its failures into the CLI's errors: the output failing
 * is a {@linkcode FileError} naming it, what the input holds but the output cannot express a
 * {@linkcode BadCheckpointError} naming the input.
 */
async function writeOutput(to: string, label: string, name: OutputCodec, write: () => Promise<unknown>): Promise<void> {
  try {
    await write();
  } catch (e) {
    // What the input holds but the output codec cannot express (metadata safetensors refuses,
    // dtypes TF.js has no weight type for, values that do not fit int32).
    if (
      (e instanceof TypeError && /^(Invalid|Cannot encode|Cannot convert tensor)/.test(e.message)) ||
      (e instanceof RangeError && /^Cannot convert tensor/.test(e.message))
    ) {
      const message = e.message.replace("pass narrow: true", "use --narrow");
      throw new BadCheckpointError(`${label} cannot be written as ${name}: ${message}`, { cause: e });
    }
    // Read errors arrive already named by the input; what is left is the output failing.
    const named = e instanceof FileError || e instanceof BadCheckpointError || e instanceof UsageError;
    if (isOsError(e) || (isRemote(to) && !named && !(e instanceof TypeError))) {
      const why = isOsError(e) ? osReason(e) : (e as Error).message ?? String(e);
      throw new FileError(`Cannot write ${to === "-" ? "standard output" : JSON.stringify(to)}: ${why}`, {
        cause: e,
      });
    }
    throw e;
  }
}

function descriptorsOf(ckpt: Checkpoint): SafetensorsTensorDescriptor[] {
  return ckpt.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: [...t.shape], group: t.group }));
}

/**
 * Writes TF.js artifacts into `to`. A binary checkpoint at an address is handed over as such, so
 * that its index tells the number of shards before the first is written (on `s3://`, where
 * shards cannot be renamed, that keeps TF.js's names); anything else streams through the
 * checkpoint reader.
 */
async function toTfjs(from: string, to: string, artifacts: string | undefined, narrow: boolean, io: CliIO) {
  await checkTfjsTarget(to);
  if (artifacts !== undefined) {
    const ckpt = await readArtifacts(artifacts);
    await writeOutput(to, artifacts, "tfjs", () => writeTfjsArtifacts(to, ckpt, { narrow }));
    return;
  }
  if (isRemote(to) && from !== "-" && await indexedKind(from) === "index") {
    await writeOutput(to, from, "tfjs", async () => {
      try {
        await writeTfjsArtifacts(to, from, { narrow, codecs: EXTRA_CODECS });
      } catch (e) {
        // The input's own faults, named by it; the output's are left to writeOutput.
        const input = e instanceof SyntaxError || e instanceof ChecksumMismatchError ||
          (e instanceof RangeError && !/^Cannot convert tensor/.test(e.message));
        throw input ? readError(from, e) : e;
      }
    });
    return;
  }
  const ckpt = await openCheckpoint(from, io);
  try {
    const checkpoint: CheckpointInput = { metadata: ckpt.metadata, tensors: ckpt.tensors() };
    await writeOutput(to, ckpt.label, "tfjs", () => writeTfjsArtifacts(to, checkpoint, { narrow }));
  } finally {
    await ckpt.close();
  }
}

/** The number of parts `--shards` asks for, checked against the other options. */
function shardCount(values: Values, name: OutputCodec, compression: Compression, to: string): number {
  const n = Number(values.shards);
  if (!Number.isSafeInteger(n) || n < 1 || n > 10_000) {
    throw new UsageError(
      `--shards must be a whole number of parts from 1 to 10000, got ${JSON.stringify(values.shards)}`,
    );
  }
  if (name !== "binary" || compression !== "none") {
    throw new UsageError("--shards writes uncompressed binary parts: drop --codec, --gzip and --bytegroup");
  }
  if (to === "-") throw new UsageError("--shards writes a manifest and its parts: give OUT as a path or s3://, not -");
  return n;
}

/**
 * Writes IN as a sharded checkpoint at OUT: `parts` parts, each written concurrently, then the
 * manifest (create-only: an existing OUT is refused, never replaced). The tensors are held in
 * memory while the parts are planned and written.
 */
async function toSharded(from: string, to: string, artifacts: string | undefined, parts: number, io: CliIO) {
  await checkTarget(to);
  const exists = (at: { store: { head(key: string): Promise<unknown> }; key: string }) => at.store.head(at.key);
  if (await exists(locate(to)).catch(() => undefined)) {
    throw new FileError(`Cannot write ${JSON.stringify(to)}: a checkpoint is already there (remove it first)`);
  }
  let checkpoint: Checkpoint;
  if (artifacts !== undefined) checkpoint = await readArtifacts(artifacts);
  else {
    const ckpt = await openCheckpoint(from, io);
    try {
      const tensors = [];
      for await (const t of ckpt.tensors()) tensors.push({ ...t, data: t.data.slice() });
      checkpoint = { metadata: ckpt.metadata, tensors };
    } finally {
      await ckpt.close();
    }
  }
  await writeOutput(to, artifacts ?? from, "binary", async () => {
    try {
      await saveSharded(to, checkpoint, { writers: parts });
    } catch (e) {
      if (e instanceof ShardConflictError) {
        throw new FileError(`Cannot write ${JSON.stringify(to)}: a checkpoint is already there (remove it first)`, {
          cause: e,
        });
      }
      throw e;
    }
  });
}

async function run(values: Values, positionals: string[], io: CliIO): Promise<number> {
  const [from, to] = positionals as [string, string];
  const name = choiceOption<OutputCodec>(values, "codec", ["binary", "json", "safetensors", "tfjs"], "binary");
  if (values.gzip && values.bytegroup) throw new UsageError("--gzip and --bytegroup cannot be combined: choose one");
  if (values.bytegroup && name !== "binary") throw new UsageError("--bytegroup needs the binary codec");
  if (values.narrow && name !== "tfjs") throw new UsageError("--narrow applies to --codec tfjs only");
  const compression: Compression = values.gzip ? "gzip" : values.bytegroup ? "bytegroup" : "none";
  if (name === "tfjs" && compression !== "none") {
    throw new UsageError("--codec tfjs writes plain model.json and shards: drop --gzip");
  }
  if (name === "tfjs" && to === "-") {
    throw new UsageError("--codec tfjs writes a directory (model.json and shards): give OUT as a directory, not -");
  }
  if (to === "-" && io.stdoutIsTerminal && (name !== "json" || compression === "gzip")) {
    throw new UsageError("refusing to write binary data to a terminal: redirect standard output, or use --codec json");
  }
  const artifacts = await findTfjsArtifacts(from);
  if (values.shards !== undefined) {
    await toSharded(from, to, artifacts, shardCount(values, name, compression, to), io);
    return EXIT.ok;
  }
  if (name === "tfjs") {
    await toTfjs(from, to, artifacts, values.narrow === true, io);
    return EXIT.ok;
  }
  if (to !== "-") await checkTarget(to);
  const target = to === "-" ? io.stdout : to;
  if (artifacts !== undefined) {
    // TF.js artifacts in: read whole (model.json and its shards, every digest checked), then encoded.
    const ckpt = await readArtifacts(artifacts);
    const codec: CodecName | Codec = name === "safetensors"
      ? createSafetensorsCodec({ tensors: descriptorsOf(ckpt) })
      : name;
    await writeOutput(to, artifacts, name, () => saveCheckpoint(target, ckpt, { codec, compression }));
    return EXIT.ok;
  }
  const codec: CodecName | Codec = name === "safetensors"
    ? createSafetensorsCodec({ tensors: await descriptors(from, io) })
    : name;
  const ckpt = await openCheckpoint(from, io);
  try {
    const checkpoint = { metadata: ckpt.metadata, tensors: ckpt.tensors() };
    await writeOutput(to, ckpt.label, name, () => saveCheckpoint(target, checkpoint, { codec, compression }));
  } finally {
    await ckpt.close();
  }
  return EXIT.ok;
}

/**
 * The `convert` command, as `ckpt convert` runs it.
 *
 * @example
 * ```ts
 * import { convertCommand } from "./convert.ts";
 * import { main } from "./main.ts";
 * import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await saveCheckpoint(`${dir}/a.ckpt`, {
 *   metadata: { step: 2 },
 *   tensors: [{ name: "w", dtype: "float64", shape: [1], data: new Float64Array([0.1]) }],
 * });
 * assert.equal(await main([convertCommand.name, `${dir}/a.ckpt`, `${dir}/a.jsonl.gz`, "--codec", "json", "--gzip"]), 0);
 * const back = await loadCheckpoint(`${dir}/a.jsonl.gz`);
 * assert.deepEqual(back.tensors[0]!.data, new Float64Array([0.1]));
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export const convertCommand: Command = {
  name: "convert",
  summary: "re-encode a checkpoint (binary, JSON, safetensors or TF.js artifacts, gzip or not), file or pipe",
  synopsis: "[options] IN|- OUT|-",
  description: `
Decodes IN record by record (verifying each tensor's digest) and encodes it again with the
chosen codec and compression, one tensor at a time: memory stays constant whatever the size, so
it works between pipes. The codec and compression of IN are recognised from its bytes; IN may
also be a .safetensors file (which holds no digests: its structure is checked).

A safetensors output starts with a header listing every tensor, so the tensors must be known
first: from a binary file's index or a safetensors header (no data read), or from a first pass
over a JSON or gzip file (read twice). From standard input in such a format they cannot be, and
the whole checkpoint is then held in memory until it can be written.

OUT is written atomically (a temporary file beside it, fsync, rename), so a failed conversion
leaves any existing OUT untouched; an existing OUT is replaced. With OUT as -, the bytes go to
standard output; if IN turns out to be damaged midway, the output stops early and is itself a
truncated checkpoint that no reader accepts, and ckpt exits with code 4. Binary output is never
written to a terminal.

TF.js artifacts: IN may be a model.json, or a directory holding one (a local directory, an
s3:// prefix, an https:// folder); its shards are read beside it, every shard digest checked.
With --codec tfjs, OUT is a directory (made if missing; a local path or s3://) that receives
model.json and weight shards; dtypes TF.js cannot hold are refused unless --narrow. Locally the
shards are renamed into place and model.json replaced last; on s3:// an existing model.json is
deleted first and written last, so a failed conversion leaves no model.json, never an old one
beside new shards.

Sharded checkpoints: IN may be a shard manifest (its tensors are read slice by slice, each
checked against the manifest's digests); with --shards N, OUT becomes a sharded checkpoint: N
uncompressed binary parts under OUT.parts/, written concurrently, then the manifest at OUT,
created only if OUT does not exist (an existing OUT is refused, not replaced). The tensors are
held in memory while the parts are written.`,
  options: {
    codec: {
      type: "string",
      short: "c",
      arg: "binary|json|safetensors|tfjs",
      help: "codec of the output (default: binary); tfjs writes model.json and shards into OUT",
    },
    gzip: {
      type: "boolean",
      short: "z",
      help: "gzip the output: compresses every byte, so it wins on small checkpoints where record framing dominates",
    },
    bytegroup: {
      type: "boolean",
      short: "b",
      help: "binary output with float tensors stored as byte planes, random access kept: on large float weights " +
        "smaller than gzip and about 10x faster to write; on small ones (kilobytes a tensor) gzip is smaller",
    },
    shards: {
      type: "string",
      arg: "N",
      help: "write OUT as a sharded checkpoint: a manifest at OUT and N binary parts beside it (OUT.parts/)",
    },
    narrow: {
      type: "boolean",
      help: "with --codec tfjs: float64 to float32 (rounding), int64, uint64 and uint32 to int32 (checked)",
    },
  },
  positionals: { min: 2, max: 2 },
  examples: [
    ["ckpt convert model.ckpt model.jsonl --codec json", "binary to JSON Lines"],
    ["ckpt convert model.ckpt model.ckpt.gz --gzip", "compress"],
    ["ckpt convert model.ckpt small.ckpt --bytegroup", "compress float tensors by byte plane"],
    ["ckpt convert - - --codec json < model.ckpt | jq -c 'select(.tensor)'", "stream to jq"],
    ["ssh host cat model.ckpt.gz | ckpt convert - model.ckpt", "from a pipe to a file"],
    ["ckpt convert model.ckpt model.safetensors -c safetensors", "for Python tools"],
    ["ckpt convert model.ckpt s3://bucket/web/model --codec tfjs", "TF.js artifacts for tf.loadLayersModel"],
    ["ckpt convert https://host/web/model/model.json model.ckpt", "TF.js artifacts back to a checkpoint"],
    ["ckpt convert model.ckpt sharded.ckpt --shards 4", "one file to a sharded checkpoint of 4 parts"],
    ["ckpt convert sharded.ckpt model.ckpt", "a sharded checkpoint (its manifest) to one file"],
  ],
  exits: [],
  run,
};
