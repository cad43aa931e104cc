/**
 * Reading tensors back into a snapshot's staging views without keeping a second copy of the
 * state alive.
 *
 * `data()` either hands out the backend's own array (cpu, webgl and webgpu keep the values they
 * hold or have read) or a new array on every read (tensorflow, tfjs-node's backend, copies each
 * tensor out of TensorFlow; wasm copies out of its heap). Such copies are garbage once copied
 * into the staging buffer, but nothing frees them before V8 collects, which during a snapshot
 * it usually does not: on tensorflow a snapshot + background save peaked at 2.06x the model
 * (256 MiB), the staging buffer and all the copies. So where the backend copies, each copy is
 * detached (`ArrayBuffer.prototype.transfer(0)`, which frees it) as soon as it is staged, and
 * only {@linkcode READ_BACK_WINDOW} bytes are read back at a time.
 *
 * Whether a backend copies is found with tfjs-core's public API, once per backend instance: two
 * reads of a scratch op's output give two different buffers. A tensor whose values the
 * backend still holds as given (tfjs-node keeps a tensor made from JS values as is until an op
 * uses it) is first used by a one-element op, which moves its values into the backend. Arrays
 * are only detached where they own their whole, non-shared buffer.
 *
 * @module
 */
import { add, backend, reshape, scalar, slice, type Tensor, tidy } from "@tensorflow/tfjs-core";

/** Where a backend copies on read: how many bytes of tensors are read back at once (at least one tensor). */
export const READ_BACK_WINDOW = 16 * 2 ** 20;
/** Copies smaller than this are left to the garbage collector. */
const FREE_MIN_BYTES = 64 * 2 ** 10;

type Staged = Float32Array | Int32Array | Uint8Array;

const copies = new WeakMap<object, boolean>();

function canFree(): boolean {
  return typeof (ArrayBuffer.prototype as { transfer?: unknown }).transfer === "function";
}

/** Whether the current backend's `data()` hands out a new buffer on every read of an op's output. */
async function backendCopies(): Promise<boolean> {
  if (!canFree()) return false; // nothing to gain where copies cannot be freed (Node 20)
  const current = backend();
  let known = copies.get(current);
  if (known === undefined) {
    let probe: Tensor | undefined;
    try {
      probe = tidy(() => add(scalar(1), scalar(1)));
      const a = await probe.data();
      const b = await probe.data();
      known = ArrayBuffer.isView(a) && ArrayBuffer.isView(b) && a.buffer !== b.buffer;
    } catch {
      known = false; // a backend that cannot run the probe keeps the plain path
    } finally {
      probe?.dispose();
    }
    copies.set(current, known);
  }
  return known;
}

/** Frees a copy that `data()` handed out, if it owns its whole buffer. */
function free(values: unknown): void {
  if (!ArrayBuffer.isView(values)) return;
  const buffer = values.buffer;
  if (!(buffer instanceof ArrayBuffer) || values.byteOffset !== 0 || values.byteLength !== buffer.byteLength) return;
  try {
    (buffer as ArrayBuffer & { transfer(length: number): ArrayBuffer }).transfer(0);
  } catch {
    // Not detachable (a WebAssembly memory, say): left to the garbage collector.
  }
}

/**
 * Reads each tensor into its staging view; where the backend copies, in order, at most
 * {@linkcode READ_BACK_WINDOW} bytes at a time, freeing the copies as it goes. Throws the first failure, after
 * the reads already started have settled.
 */
export async function readBackInto(tensors: { name: string; held: Tensor }[], outs: Staged[]): Promise<void> {
  const freeing = await backendCopies();
  // Elsewhere all reads start at once, as a GPU backend overlaps them best, and what they
  // return is the backend's to keep anyway.
  const window = freeing ? READ_BACK_WINDOW : Infinity;
  let failure: { error: unknown } | undefined;
  let inFlight = 0;
  const reading = new Set<Promise<void>>();
  for (const [i, { name, held }] of tensors.entries()) {
    const out = outs[i]!;
    while (reading.size > 0 && inFlight + out.byteLength > window && !failure) await Promise.race(reading);
    if (failure) break;
    const freeThis = freeing && out.byteLength >= FREE_MIN_BYTES;
    // Used by an op first, so that a backend holding the values as given moves them in and
    // hands out a copy, not the array it keeps.
    if (freeThis) tidy(() => slice(reshape(held, [-1]), [0], [1]));
    inFlight += out.byteLength;
    const read: Promise<void> = held.data().then((values) => {
      if (values.length !== out.length) {
        throw new RangeError(
          `Cannot snapshot tensor ${JSON.stringify(name)}: read ${values.length} elements, expected ${out.length}`,
        );
      }
      out.set(values as ArrayLike<number>);
      if (freeThis) free(values);
    }).catch((error) => {
      failure ??= { error };
    }).finally(() => {
      inFlight -= out.byteLength;
      reading.delete(read);
    });
    reading.add(read);
  }
  await Promise.all(reading);
  if (failure) throw failure.error;
}
