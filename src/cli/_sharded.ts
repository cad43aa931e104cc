// A sharded checkpoint as the CLI reads it: the manifest (a path or an s3:// or https:// address),
// its tensors one at a time, each slice checked against the digest the manifest pins, and for
// `verify` every part read through and its stream digest compared with the manifest's.
import { SHARD_MAGIC, type ShardManifest } from "../shard/manifest.ts";
import { readShardManifest, readShards } from "../shard/read.ts";
import type { Tensor } from "../format/types.ts";
import { locate } from "../io/read.ts";
import { BadCheckpointError, readFailure, readHead } from "./_io.ts";

/** Whether `spec` (a path or an address, not `-`) holds a shard manifest: its first bytes say so. */
export async function isShardManifest(spec: string): Promise<boolean> {
  if (spec === "-") return false;
  let head: Uint8Array;
  try {
    head = await readHead(spec, SHARD_MAGIC.byteLength);
  } catch {
    return false; // the usual reader reports it, in its words
  }
  return head.byteLength === SHARD_MAGIC.byteLength && SHARD_MAGIC.every((b, i) => head[i] === b);
}

/** The address of a manifest's part: beside the manifest, as docs/FORMAT.md places it. */
export function partSpec(spec: string, manifest: ShardManifest, part: number): string {
  return `${spec}.parts/${manifest.saveId}/${manifest.parts[part]!.name}`;
}

/** What a sharded checkpoint gives the CLI's reader (see `OpenCheckpoint` in _source.ts). */
export interface ShardedSource {
  manifest: ShardManifest;
  /** The sharded checkpoint's digest (the manifest's trailer). */
  digest: string;
  /** The tensors in the manifest's order, each read by its slices and checked. */
  tensors(): AsyncGenerator<Tensor>;
  /** Bytes read: the manifest's, then every slice record's. */
  bytes(): number;
}

/**
 * Opens the sharded checkpoint at `spec`. With `parts`, the tensors are followed by a verified
 * read of every part (each an ordinary checkpoint file) whose stream digest must be the one the
 * manifest names: then every byte of every part is checked, not only the slices' records.
 */
export async function openShardedSource(
  spec: string,
  verifyPart?: (part: string, expected: string) => Promise<number>,
): Promise<ShardedSource> {
  let read;
  try {
    read = await readShardManifest(spec);
  } catch (e) {
    throw named(spec, e);
  }
  const { manifest, digest } = read;
  let bytes = 0;
  try {
    const at = locate(spec);
    bytes = (await at.store.head(at.key))?.size ?? 0;
  } catch (e) {
    throw named(spec, e);
  }
  const tensors = async function* (): AsyncGenerator<Tensor> {
    for (const t of manifest.tensors) {
      let got;
      try {
        got = await readShards(spec, { tensors: [t.name] });
      } catch (e) {
        throw named(spec, e);
      }
      for (const s of t.slices) bytes += s.length;
      yield got.tensors[0]!;
    }
    if (verifyPart) {
      for (const [i, p] of manifest.parts.entries()) bytes += await verifyPart(partSpec(spec, manifest, i), p.digest);
    }
  };
  return { manifest, digest, tensors, bytes: () => bytes };
}

function named(spec: string, e: unknown): unknown {
  if (e instanceof SyntaxError || e instanceof RangeError || (e as Error)?.name === "ChecksumMismatchError") {
    return new BadCheckpointError(`${spec}: ${(e as Error).message}`, { cause: e });
  }
  if (e instanceof Error && /NotFound|ObjectNotFound/.test(e.name)) return readFailure(spec, e);
  return e;
}

/** Reads a part through (constant memory) and checks its stream digest against the manifest's; its size. */
export function partVerifier(
  open: (
    spec: string,
  ) => Promise<
    {
      tensors(): AsyncGenerator<unknown>;
      digest(): Promise<string | undefined>;
      bytes(): number;
      close(): Promise<void>;
    }
  >,
  manifestSpec: string,
): (part: string, expected: string) => Promise<number> {
  return async (part, expected) => {
    const ckpt = await open(part);
    try {
      for await (const _ of ckpt.tensors()) { /* each record checked as it goes */ }
    } finally {
      await ckpt.close();
    }
    const actual = await ckpt.digest();
    if (actual !== expected) {
      throw new BadCheckpointError(
        `${manifestSpec}: part ${part} has stream digest ${actual}, the manifest says ${expected}`,
      );
    }
    return ckpt.bytes();
  };
}
