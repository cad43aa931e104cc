/**
 * Loading a checkpoint whole, verified, from a file or any byte stream.
 *
 * @module
 */
import type { DecodeOptions } from "../format/decode.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import type { Checkpoint, CheckpointRecord, Metadata, Tensor } from "../format/types.ts";
import { type Hash, sha256 } from "../format/_hash.ts";
import { checkStorageOptions } from "../storage/_storage_options.ts";
import { checkOptionNames, LIMIT_OPTION_NAMES, optionNames } from "../format/_options.ts";
import { checkInto, placeInto } from "../format/_read_into.ts";
import { isAddress } from "../storage/resolve.ts";
import { openRandomAccess } from "../storage/random_access.ts";
import {
  type CheckpointSource,
  decodeByteSource,
  locate,
  openByteSource,
  readerCodec,
  sourceRecords,
  type StorageOptions,
} from "./read.ts";
import { loadIfSharded } from "./_sharded.ts";

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
   * A digest (64 hex digits) the checkpoint must match: its stream digest (what `saveCheckpoint`
   * returns as `digest`, what `ckpt inspect` prints) or the SHA-256 of the source's bytes (what
   * `sha256sum` prints, `saveCheckpoint`'s `sha256`). Either pins every byte once the load has
   * verified them all; checking the stream digest costs nothing more, the file's SHA-256 one
   * more pass (skipped for a local binary file whose stored stream digest is the one given). A
   * mismatch is a {@linkcode ChecksumMismatchError}. Given as `undefined` (the `sha256` of a
   * save made without `sha256sum: true`), it is a `TypeError`, not a check skipped.
   */
  sha256?: string;
  /**
   * Restore into buffers you already have, by tensor name (a model's own weights, say): each
   * named tensor's bytes land in the typed array given for it, whose byte length must be the
   * tensor's (else a `RangeError`; two buffers that share a byte are a `TypeError`), and the
   * returned tensor's `data` is a view of that memory.
   * From a local ckpt binary file the bytes are read straight into it, with no fresh memory to
   * touch (about half the CPU time of a load into fresh memory goes to the kernel zeroing new
   * pages: docs/performance.md); from anything else they are copied there once verified.
   * Tensors not named load into fresh memory as usual; a name no loaded tensor has is a
   * `RangeError`. If the load fails, a buffer read into directly may hold bytes that were not
   * verified (the tensor that failed, and those read ahead of it): load again or restore them
   * from elsewhere.
   *
   * @default {undefined} (every tensor in fresh memory)
   */
  into?: ReadonlyMap<string, ArrayBufferView>;
}

/** Every option {@linkcode loadCheckpoint} takes; any other name is a `TypeError`. */
const LOAD_OPTION_NAMES = optionNames<LoadOptions>()([
  "codecs",
  "only",
  "sha256",
  "reuseBuffers",
  "parallelHash",
  "storage",
  "into",
  ...LIMIT_OPTION_NAMES,
]);

const LOAD_HINTS: Readonly<Record<string, string>> = {
  codec: "a load recognises the format from the bytes (ckpt binary, ckpt JSON, safetensors, gzip); " +
    "pass a codec of your own as codecs: [codec]",
  compression: "a load recognises gzip from the bytes",
};

/**
 * The `sha256` option, lower-cased: `undefined` when not given; given as `undefined` or as
 * anything but 64 hex digits, a `TypeError`.
 */
export function wantedSha256(options: { sha256?: string }): string | undefined {
  const expected = options.sha256;
  if (expected === undefined && Object.hasOwn(options, "sha256")) {
    // `{ sha256 }` from a save without `sha256sum: true`: checking nothing would pass silently.
    throw new TypeError(
      "Invalid sha256 option: undefined (a save returns its digest as `digest`, and `sha256` only with `sha256sum: true`)",
    );
  }
  if (expected !== undefined && !/^[0-9a-fA-F]{64}$/.test(expected)) {
    throw new TypeError("Invalid sha256 option: expected 64 hex digits");
  }
  return expected?.toLowerCase();
}

/** A checkpoint's records, each verified as it comes, with what to check once they ended. */
export interface VerifiedRecords {
  /** The records: the metadata, then each tensor once its digest matched. */
  records: AsyncIterable<CheckpointRecord>;
  /** The stream digest (hex) once the records ended intact; `undefined` for codecs that store none. */
  digest: Promise<string | undefined>;
  /** Checks the `sha256` option (if given) against the stream digest or the bytes' SHA-256; call after the records ended. */
  checkDigest(): Promise<void>;
}

/**
 * The records of `source`, for a whole read (the caller takes them all at once): `bodies: "hash"` verifies tensors without keeping
 * them (a ckpt binary checkpoint's tensor records then carry an empty array). With `sha256`,
 * the bytes' own SHA-256 is computed in the same pass where it may be what was given.
 */
export async function verifiedRecords(
  source: CheckpointSource,
  options: DecodeOptions & StorageOptions & { sha256?: string },
  bodies: "keep" | "hash",
): Promise<VerifiedRecords> {
  const wanted = wantedSha256(options);
  const at = isAddress(source) ? locate(source, options) : undefined;
  if (wanted === undefined) {
    const { records, digest } = sourceRecords(at ?? source, options, bodies, true);
    return { records, digest, checkDigest: () => Promise.resolve() };
  }
  const opened = await openByteSource(at ?? source, options);
  let tap: Hash | undefined;
  try {
    // From a stream, the bytes' SHA-256 is computed as well, in case that is what was given; from
    // a binary file or object only when its footer holds another stream digest than the one given
    // (the stored one is checked by decoding), in the same pass, over the bytes the decoder reads.
    if (opened.kind === "stream" || await opened.storedDigest() !== wanted) tap = sha256();
  } catch (e) {
    if (opened.kind !== "stream") opened.close();
    throw e;
  }
  const { records, digest } = decodeByteSource(opened, options, bodies, tap, true);
  return { records, digest, checkDigest: () => checkWanted(wanted, digest, tap) };
}

/** Checks the `sha256` option against the stream digest, or else the bytes' SHA-256 (`tap`), once the records ended. */
async function checkWanted(wanted: string, streamDigest: Promise<string | undefined>, tap?: Hash): Promise<void> {
  const stream = await streamDigest;
  if (stream === wanted) return;
  const actual = tap?.digest("hex");
  if (actual === wanted) return;
  // Report the file's digest when it was computed (the likelier meaning of a digest that matches
  // nothing), else the stream digest.
  if (actual !== undefined) {
    throw new ChecksumMismatchError("source bytes", wanted, actual, stream ? `(stream digest ${stream})` : "");
  }
  throw new ChecksumMismatchError("checkpoint stream digest", wanted, stream ?? "none");
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
  try {
    return await loadOne(source, options);
  } catch (e) {
    // Bytes no codec reads may be a sharded checkpoint's manifest (src/shard): looked at only then.
    const sharded = e instanceof SyntaxError && isAddress(source)
      ? await loadIfSharded(locate(source, options), { ...options })
      : undefined;
    if (sharded) return sharded;
    throw e;
  }
}

async function loadOne(source: CheckpointSource, options: LoadOptions): Promise<Checkpoint> {
  checkOptionNames(options, LOAD_OPTION_NAMES, "Cannot load checkpoint", LOAD_HINTS);
  checkStorageOptions(options.storage, "Cannot load checkpoint");
  const { only, into } = options;
  if (into !== undefined) checkInto(into);
  const expected = wantedSha256(options);
  const at = isAddress(source) ? locate(source, options) : undefined;
  if (at && only && expected === undefined) {
    // Random access: the object's tail (footer, index), its head, then only the wanted records.
    const reader = await openRandomAccess(at.store, at.key);
    const codec = await readerCodec(reader, options.codecs);
    if (codec?.readTensors) {
      const some = await codec.readTensors(reader, only, options);
      return { ...some, tensors: placeInto(some.tensors, into) };
    }
  }
  const { records, checkDigest } = await verifiedRecords(at ?? source, { ...options, reuseBuffers: false }, "keep");
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
  await checkDigest();
  if (wanted) {
    const missing = [...wanted].filter((n) => !found.has(n));
    if (missing.length) {
      throw new RangeError(
        `Cannot load checkpoint: no tensor named ${missing.map((n) => JSON.stringify(n)).join(", ")}`,
      );
    }
  }
  return { metadata, tensors: placeInto(tensors, into) };
}
