/**
 * `ckpt verify`: reads checkpoints through, checking every tensor digest and the whole-stream
 * digest, in constant memory.
 *
 * @module
 */
import type { Command, Values } from "./_command.ts";
import { basename } from "node:path";
import { readSha256Sidecar } from "../interop/sidecar.ts";
import { ObjectNotFoundError } from "../storage/types.ts";
import {
  BadCheckpointError,
  type CliIO,
  EXIT,
  FileError,
  humanBytes,
  readFailure,
  safeText,
  stackTrace,
  UsageError,
  write,
} from "./_io.ts";
import { hasDigests, openCheckpoint } from "./_source.ts";
import { findTfjsArtifacts, readArtifactsChecked } from "./_tfjs.ts";
import { OsErrors } from "../runtime/errors.ts";

/** What verifying one input found. */
interface Outcome {
  source: string;
  ok: boolean;
  codec?: string;
  compression?: string;
  step?: number;
  tensors?: number;
  bytes?: number;
  /**
   * SHA-256 of the file's bytes (what sha256sum prints): computed when `--sha256` or a sidecar
   * asks for it.
   */
  sha256?: string;
  /** The stream digest the checkpoint stores, verified; absent for codecs that have none. */
  streamDigest?: string;
  /**
   * What was checked and matched: "record digests" and "stream digest" (ckpt's codecs), the
   * `.sha256` sidecar by name, "--sha256"; empty when only the structure could be checked.
   */
  checked?: string[];
  error?: string;
}

/**
 * The digest a `FILE.sha256` sidecar gives for FILE (beside it on its store: a local directory,
 * `s3://`, `https://`), or undefined when there is no sidecar.
 */
async function sidecarDigest(path: string): Promise<string | undefined> {
  try {
    return await readSha256Sidecar(path);
  } catch (e) {
    if (e instanceof OsErrors.NotFound || e instanceof ObjectNotFoundError) return undefined;
    if (e instanceof SyntaxError || e instanceof RangeError) throw new BadCheckpointError(e.message);
    throw readFailure(`${path}.sha256`, e);
  }
}

/** TF.js artifacts (a `model.json`, or a directory holding one): read whole, every shard checked. */
async function verifyArtifacts(spec: string, modelJson: string, expected: string | undefined): Promise<Outcome> {
  if (expected !== undefined) {
    throw new UsageError(`--sha256 checks a checkpoint file; ${JSON.stringify(spec)} is TF.js artifacts`);
  }
  const { checkpoint, bytes, verified } = await readArtifactsChecked(modelJson);
  const checked = verified ? ["shard digests"] : [];
  return {
    source: modelJson,
    ok: true,
    codec: "tfjs",
    compression: "none",
    step: checkpoint.metadata.step,
    tensors: checkpoint.tensors.length,
    bytes,
    checked,
  };
}

async function verifyOne(spec: string, io: CliIO, expected: string | undefined): Promise<Outcome> {
  const modelJson = await findTfjsArtifacts(spec);
  if (modelJson !== undefined) return await verifyArtifacts(spec, modelJson, expected);
  // The file's own SHA-256 is a second pass over every byte: computed only when something is
  // there to compare it with (the record and stream digests already cover every byte).
  const sidecar = spec === "-" ? undefined : await sidecarDigest(spec);
  const hash = expected !== undefined || sidecar !== undefined;
  const ckpt = await openCheckpoint(spec, io, { hash, reuseBuffers: true, bodies: "hash" });
  let tensors = 0;
  try {
    for await (const _ of ckpt.tensors()) tensors++;
  } finally {
    await ckpt.close();
  }
  const sha256 = ckpt.sha256();
  const streamDigest = await ckpt.digest();
  const checked: string[] = [];
  // ckpt's codecs end with a digest over the stream, which the decoder has checked by now.
  if (hasDigests(ckpt.codec)) checked.push("record digests", "stream digest");
  if (expected !== undefined) {
    // Either digest pins every byte of a fully verified checkpoint: accept the one given.
    if (sha256 !== expected && streamDigest !== expected) {
      const stream = streamDigest === undefined ? "" : ` (stream digest ${streamDigest})`;
      throw new BadCheckpointError(`${ckpt.label}: file sha256 is ${sha256}${stream}, expected ${expected}`);
    }
    checked.push("--sha256");
  }
  if (sidecar !== undefined) {
    if (sidecar !== sha256) {
      throw new BadCheckpointError(`${ckpt.label}: file sha256 is ${sha256}, but ${ckpt.label}.sha256 says ${sidecar}`);
    }
    checked.push(`${basename(ckpt.path!)}.sha256`);
  }
  return {
    source: ckpt.label,
    ok: true,
    codec: ckpt.codec,
    compression: ckpt.compression,
    step: ckpt.metadata.step,
    tensors,
    bytes: ckpt.bytes(),
    ...(sha256 === undefined ? {} : { sha256 }),
    ...(streamDigest === undefined ? {} : { streamDigest }),
    checked,
  };
}

function okLine(o: Outcome, expected: string | undefined): string {
  const codec = `${o.codec}${o.compression === "gzip" ? "+gzip" : ""}`;
  const tensors = `${o.tensors} tensor${o.tensors === 1 ? "" : "s"}`;
  const matches = (hex: string) => (hex === expected ? " (matches --sha256)" : "");
  const sidecar = o.checked!.filter((c) => c.endsWith(".sha256"));
  const digests = o.sha256 === undefined ? [] : [`sha256 ${o.sha256}${matches(o.sha256)}`];
  if (o.streamDigest !== undefined) digests.push(`stream digest ${o.streamDigest}${matches(o.streamDigest)}`);
  const note = o.checked!.length === 0
    ? ` (${
      o.codec === "tfjs" ? "TF.js artifacts without a ckpt record have" : `${o.codec} has`
    } no digests: structure checked only)`
    : o.checked!.includes("shard digests")
    ? " (every shard's size and SHA-256 checked)"
    : sidecar.length > 0
    ? ` (matches ${sidecar.join(" and ")})`
    : "";
  return `ok ${o.source}: ${[codec, `step ${o.step}`, tensors, humanBytes(o.bytes!), ...digests].join(", ")}${note}\n`;
}

async function run(values: Values, positionals: string[], io: CliIO): Promise<number> {
  let expected: string | undefined;
  if (values.sha256 !== undefined) {
    expected = String(values.sha256).toLowerCase();
    if (!/^[0-9a-f]{64}$/.test(expected)) throw new UsageError("--sha256 must be 64 hex digits");
    if (positionals.length !== 1) throw new UsageError("--sha256 checks one checkpoint: give exactly one FILE");
  }
  if (positionals.filter((p) => p === "-").length > 1) throw new UsageError("standard input (-) can be read only once");
  let code: number = EXIT.ok;
  for (const spec of positionals) {
    let outcome: Outcome;
    try {
      outcome = await verifyOne(spec, io, expected);
    } catch (e) {
      if (!(e instanceof FileError || e instanceof BadCheckpointError)) throw e;
      const failed = e instanceof FileError ? EXIT.io : EXIT.bad;
      if (code === EXIT.ok) code = failed;
      const trace = values.debug ? stackTrace(e) : "";
      await write(io.stderr, `ckpt verify: ${safeText(e.message.replace(/\s*\n\s*/g, " "))}\n${trace}`);
      if (values.json) {
        await write(
          io.stdout,
          JSON.stringify({ source: spec === "-" ? "stdin" : spec, ok: false, error: e.message }) + "\n",
        );
      }
      continue;
    }
    if (values.json) await write(io.stdout, JSON.stringify(outcome) + "\n");
    else if (!values.quiet) await write(io.stdout, okLine(outcome, expected));
  }
  return code;
}

/**
 * The `verify` command, as `ckpt verify` runs it.
 *
 * @example
 * ```ts
 * import { verifyCommand } from "./verify.ts";
 * import { main } from "./main.ts";
 * import { saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile();
 * const { digest } = await saveCheckpoint(path, { metadata: { step: 1 }, tensors: [] }, { codec: "json" });
 * let out = "";
 * const stdout = new WritableStream<Uint8Array>({ write: (c) => void (out += new TextDecoder().decode(c)) });
 * assert.equal(await main([verifyCommand.name, "--sha256", digest, path], { stdout }), 0);
 * assert.match(out, /^ok .*: json, step 1, 0 tensors/);
 * await Deno.remove(path);
 * ```
 */
export const verifyCommand: Command = {
  name: "verify",
  summary: "check every tensor digest and the whole-stream digest",
  synopsis: "[options] FILE|- [FILE...]",
  description: `
Reads each checkpoint through, in constant memory, and checks every record's SHA-256 and the
whole-stream SHA-256. Codec and gzip are recognised from the bytes. The SHA-256 of the file's
bytes is checked against a sha256sum sidecar FILE.sha256 when one exists. --sha256 takes either
digest: the file's SHA-256 (what sha256sum prints) or the checkpoint's stream digest (what
ckpt inspect prints, saveCheckpoint returns as "digest" and a manager lists); a fully
verified read that matches either proves every byte. A .safetensors file
holds no digests of its own: its structure is checked, and its sidecar if it has one.

The SHA-256 of the file's bytes is a second pass over them, so it is computed only when
--sha256 or a sidecar asks for it.

For each intact checkpoint one line goes to standard output:
  ok FILE: CODEC, step N, T tensors, SIZE, [sha256 HEX, ]stream digest HEX [(matches FILE.sha256)]
For each damaged or unreadable one, one line goes to standard error, naming the first bad
tensor (or what else is wrong) and its byte offset. Every file is checked even after a failure;
the exit code is that of the first failure.`,
  options: {
    sha256: { type: "string", arg: "HEX", help: "also require this digest: the file's SHA-256 or the stream digest" },
    quiet: { type: "boolean", short: "q", help: "print nothing for intact checkpoints" },
    json: { type: "boolean", help: "print one JSON object per checkpoint (failures included)" },
  },
  positionals: { min: 1, max: Infinity },
  examples: [
    ["ckpt verify model.ckpt", "exit 0 when intact"],
    ["ckpt verify -q runs/mnist/*.ckpt || echo damaged", "many files, quiet"],
    ["ckpt verify --sha256 9f86d0...0a08 model.ckpt", "also match a known digest"],
    ["ssh host cat model.ckpt.gz | ckpt verify -", "from standard input"],
  ],
  exits: [],
  run,
};
