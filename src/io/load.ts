/**
 * Loading a checkpoint whole, verified, from a file or any byte stream.
 *
 * @module
 */
import type { DecodeOptions } from "../format/decode.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import type { Checkpoint, CheckpointRecord, Metadata, Tensor } from "../format/types.ts";
import { binaryCodec, decodeRecords } from "../format/codecs/binary.ts";
import { sha256 } from "../format/_hash.ts";
import { checkOptionNames, LIMIT_OPTION_NAMES } from "../format/_options.ts";
import { FileStore } from "../storage/file.ts";
import { isAddress } from "../storage/resolve.ts";
import { openRandomAccess } from "../storage/random_access.ts";
import {
  type CheckpointSource,
  decodeCheckpoint,
  fileCodec,
  locate,
  openSource,
  readerCodec,
  type StorageOptions,
} from "./read.ts";

/** Options for {@linkcode loadCheckpoint}. */
export interface LoadOptions extends DecodeOptions, StorageOptions {
  /**
   * Load only these tensors. From an uncompressed file whose codec reads by name (binary through
   * its index, safetensors through its header) this seeks and reads nothing else, each selected
   * tensor verified by its own digest where the format has one; from other sources the stream is
   * read and verified whole and the rest dropped. A name the checkpoint lacks is a
   * `RangeError`.
   */
  only?: readonly string[];
  /**
   * The SHA-256 (hex) the source's bytes must have, such as the one `saveCheckpoint` returned;
   * a mismatch is a {@linkcode ChecksumMismatchError}.
   */
  sha256?: string;
}

/** Every option {@linkcode loadCheckpoint} takes; any other name is a `TypeError`. */
const LOAD_OPTION_NAMES = [
  "codecs",
  "only",
  "sha256",
  "reuseBuffers",
  "storage",
  ...LIMIT_OPTION_NAMES,
] as const satisfies readonly (
  keyof LoadOptions
)[];
// A compile error here means LoadOptions gained an option LOAD_OPTION_NAMES does not list.
const _everyLoadOption: Exclude<keyof LoadOptions, typeof LOAD_OPTION_NAMES[number]> extends never ? true : never =
  true;

const LOAD_HINTS: Readonly<Record<string, string>> = {
  codec: "a load recognises the format from the bytes (ckpt binary, ckpt JSON, safetensors, gzip); " +
    "pass a codec of your own as codecs: [codec]",
  compression: "a load recognises gzip from the bytes",
};

function hashing(source: ReadableStream<Uint8Array>, expected: string): ReadableStream<Uint8Array> {
  const hash = sha256();
  return source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        hash.update(chunk);
        c.enqueue(chunk);
      },
      flush() {
        const actual = hash.digest("hex");
        if (actual !== expected.toLowerCase()) throw new ChecksumMismatchError("source bytes", expected, actual);
      },
    }),
  );
}

/**
 * Loads a checkpoint and verifies it: every record digest and the whole-stream digest (and the
 * caller's `sha256`, when given). The codec and gzip are recognised from the bytes. Nothing is
 * returned unless everything checked out: corrupt bytes raise {@linkcode ChecksumMismatchError},
 * malformed ones a `SyntaxError`, sizes over a limit a `RangeError`. The formats recognised are
 * ckpt binary, ckpt JSON Lines and safetensors (each optionally gzipped), after any `codecs` of
 * your own; an option name `loadCheckpoint` does not know (such as `codec`) is a `TypeError`.
 *
 * @example
 * ```ts
 * import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile();
 * await saveCheckpoint(path, {
 *   metadata: { step: 5 },
 *   tensors: [
 *     { name: "dense/kernel", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) },
 *     { name: "dense/bias", dtype: "float32", shape: [1], data: new Float32Array([3]) },
 *   ],
 * });
 * const some = await loadCheckpoint(path, { only: ["dense/bias"] });
 * assert.deepEqual(some.tensors.map((t) => t.name), ["dense/bias"]);
 * await Deno.remove(path);
 * ```
 */
export async function loadCheckpoint(source: CheckpointSource, options: LoadOptions = {}): Promise<Checkpoint> {
  checkOptionNames(options, LOAD_OPTION_NAMES, "Cannot load checkpoint", LOAD_HINTS);
  const { only, sha256: expected } = options;
  if (expected !== undefined && !/^[0-9a-fA-F]{64}$/.test(expected)) {
    throw new TypeError("Invalid sha256 option: expected 64 hex digits");
  }
  const at = isAddress(source) ? locate(source, options) : undefined;
  if (at && only && expected === undefined) {
    // Random access: the object's tail (footer, index), its head, then only the wanted records.
    const reader = await openRandomAccess(at.store, at.key);
    const codec = await readerCodec(reader, options.codecs);
    if (codec?.readTensors) return await codec.readTensors(reader, only, options);
  }
  let records: AsyncIterable<CheckpointRecord>;
  let checkFile = () => {};
  let file: Deno.FsFile | undefined;
  if (at?.store instanceof FileStore && expected !== undefined) {
    const opened = await at.store.openFile(at.key);
    if (await fileCodec(opened, options.codecs) === binaryCodec) file = opened;
    else opened.close();
  }
  if (file) {
    // A local binary file: its digest in the same pass as decoding, over the bytes the decoder reads.
    const tap = sha256();
    const open = file;
    records = (async function* () {
      try {
        yield* decodeRecords(open, { ...options, reuseBuffers: false }, tap);
      } finally {
        open.close();
      }
    })();
    checkFile = () => {
      const actual = tap.digest("hex");
      if (actual !== expected!.toLowerCase()) throw new ChecksumMismatchError("source bytes", expected!, actual);
    };
  } else {
    const bytes = expected === undefined ? source : hashing(openSource(source, options), expected);
    records = decodeCheckpoint(bytes, { ...options, reuseBuffers: false });
  }
  const wanted = only ? new Set(only) : undefined;
  let metadata: Metadata | undefined;
  const tensors: Tensor[] = [];
  const found = new Set<string>();
  for await (const record of records) {
    if (record.type === "metadata") metadata = record.metadata;
    else {
      found.add(record.tensor.name);
      if (!wanted || wanted.has(record.tensor.name)) tensors.push(record.tensor);
    }
  }
  if (!metadata) throw new SyntaxError("Cannot decode checkpoint: no metadata record");
  checkFile();
  if (wanted) {
    const missing = [...wanted].filter((n) => !found.has(n));
    if (missing.length) {
      throw new RangeError(
        `Cannot load checkpoint: no tensor named ${missing.map((n) => JSON.stringify(n)).join(", ")}`,
      );
    }
  }
  return { metadata, tensors };
}
