/**
 * `ckpt verify`: reads checkpoints through, checking every tensor digest and the whole-stream
 * digest, in constant memory.
 *
 * @module
 */
import type { Command, Values } from "./_command.ts";
import { BadCheckpointError, type CliIO, EXIT, FileError, humanBytes, UsageError, write } from "./_io.ts";
import { openCheckpoint } from "./_source.ts";

/** What verifying one input found. */
interface Outcome {
  source: string;
  ok: boolean;
  codec?: string;
  compression?: string;
  step?: number;
  tensors?: number;
  bytes?: number;
  sha256?: string;
  error?: string;
}

async function verifyOne(spec: string, io: CliIO, expected: string | undefined): Promise<Outcome> {
  const ckpt = await openCheckpoint(spec, io, { hash: true });
  let tensors = 0;
  try {
    for await (const _ of ckpt.tensors()) tensors++;
  } finally {
    await ckpt.close();
  }
  const sha256 = ckpt.sha256()!;
  if (expected !== undefined && sha256 !== expected) {
    throw new BadCheckpointError(`${ckpt.label}: file sha256 is ${sha256}, expected ${expected}`);
  }
  return {
    source: ckpt.label,
    ok: true,
    codec: ckpt.codec,
    compression: ckpt.compression,
    step: ckpt.metadata.step,
    tensors,
    bytes: ckpt.bytes(),
    sha256,
  };
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
      await write(io.stderr, `ckpt verify: ${e.message.replace(/\s*\n\s*/g, " ")}\n`);
      if (values.json) {
        await write(
          io.stdout,
          JSON.stringify({ source: spec === "-" ? "stdin" : spec, ok: false, error: e.message }) + "\n",
        );
      }
      continue;
    }
    if (values.json) await write(io.stdout, JSON.stringify(outcome) + "\n");
    else if (!values.quiet) {
      await write(
        io.stdout,
        `ok ${outcome.source}: ${outcome.codec}${
          outcome.compression === "gzip" ? "+gzip" : ""
        }, step ${outcome.step}, ${outcome.tensors} tensor${outcome.tensors === 1 ? "" : "s"}, ${
          humanBytes(outcome.bytes!)
        }, sha256 ${outcome.sha256}\n`,
      );
    }
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
 * const { sha256 } = await saveCheckpoint(path, { metadata: { step: 1 }, tensors: [] }, { codec: "json" });
 * let out = "";
 * const stdout = new WritableStream<Uint8Array>({ write: (c) => void (out += new TextDecoder().decode(c)) });
 * assert.equal(await main([verifyCommand.name, "--sha256", sha256, path], { stdout }), 0);
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
whole-stream SHA-256 (and, with --sha256, the digest of the file's bytes, such as the one
saveCheckpoint returned or a manager lists). Codec and gzip are recognised from the bytes.

For each intact checkpoint one line goes to standard output:
  ok FILE: CODEC, step N, T tensors, SIZE, sha256 HEX
For each damaged or unreadable one, one line goes to standard error, naming the first bad
tensor (or what else is wrong) and its byte offset. Every file is checked even after a failure;
the exit code is that of the first failure.`,
  options: {
    sha256: { type: "string", arg: "HEX", help: "also require the input's bytes to have this SHA-256" },
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
