// A committed checkpoint file copied to another store as it is: no decode into tensors, no
// encode. Its bytes stream from the source to the destination's writer and, on the way, through
// the verifier a load runs (every record digest, the stream digest, the caps), which keeps no
// tensor. The object is published only when that verification passed and found the stream
// digest the source's index recorded; otherwise the write is aborted and nothing of it becomes
// visible, so a file damaged since its commit never reaches the destination.

import type { Codec } from "../format/codec.ts";
import type { DecodeLimits } from "../format/limits.ts";
import { verifyCheckpoint } from "../io/verify.ts";
import type { ObjectStore } from "../storage/types.ts";
import type { Location } from "./_location.ts";

/** What of the source's index entry the copy checks: its file, size and digest. */
export interface CommittedFile {
  file: string;
  bytes: number;
  sha256: string;
}

/** How the copy writes and what its verification allows. */
export interface CopyOptions {
  /** Whether the destination fsyncs (a local directory). */
  sync: boolean;
  /** The source's decode limits. */
  limits: Required<DecodeLimits>;
  /** The source's codecs of its own. */
  codecs: readonly Codec[];
  /** Awaited before each chunk is read: paces the copy (see `CopyFromOptions.pace`). */
  pace?: (() => Promise<void>) | undefined;
}

/**
 * Streams the committed file `entry` of `from` to `key` in `to`, verifying it on the way, and
 * publishes it when it verified, has the size `entry` records and its stream digest is
 * `entry.sha256`. Resolves `false` (nothing published) when it verified but `entry.sha256` is
 * another digest (that of the whole file, which an index rebuilt from the files records): the
 * caller then verifies it as a load does. Damage throws as a load would, after the abort.
 */
export async function copyCommitted(
  from: Location,
  entry: CommittedFile,
  to: ObjectStore,
  key: string,
  options: CopyOptions,
): Promise<boolean> {
  const writer = await to.writer(key, { sync: options.sync, sizeHint: entry.bytes });
  const path = from.name(entry.file);
  let digest: string | undefined;
  try {
    const chunks = (await from.store.get(entry.file)).body.getReader();
    let n = 0;
    // Each chunk goes to the writer (which copies it into its part) before the verifier gets it.
    const bytes = new ReadableStream<Uint8Array>({
      async pull(controller) {
        await options.pace?.();
        const next = await chunks.read();
        if (next.done) return controller.close();
        n += next.value.byteLength;
        if (n > entry.bytes) {
          throw new SyntaxError(
            `Cannot copy checkpoint file ${path}: it has more than the ${entry.bytes} bytes the index says`,
          );
        }
        await writer.write(next.value);
        controller.enqueue(next.value);
      },
      async cancel(reason) {
        await chunks.cancel(reason);
      },
    }, { highWaterMark: 2 }); // the next chunks are read (and sent) while the verifier hashes one
    ({ digest } = await verifyCheckpoint(bytes, { ...options.limits, codecs: options.codecs }));
    if (n !== entry.bytes) {
      throw new SyntaxError(`Cannot copy checkpoint file ${path}: it has ${n} bytes, the index says ${entry.bytes}`);
    }
  } catch (e) {
    await writer.abort(e).catch(() => {});
    throw e;
  }
  if (digest !== entry.sha256) {
    await writer.abort(new Error("another digest")).catch(() => {});
    return false;
  }
  await writer.close();
  return true;
}
