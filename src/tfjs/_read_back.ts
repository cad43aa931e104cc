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
 * only {@linkcode READ_BACK_WINDOW} bytes are read back at a time. Better still, a snapshot can
 * keep such a copy as its own array ({@linkcode readBackOwned}): no staging buffer, no second
 * copy (on tensorflow that copy cost as much CPU as the read-back itself), and no copy to free.
 *
 * Whether a backend copies is found with tfjs-core's public API, once per backend instance: two
 * reads of a scratch op's output give two different buffers. A tensor whose values the
 * backend still holds as given (tfjs-node keeps a tensor made from JS values as is until an op
 * uses it) is first used by a one-element op, which moves its values into the backend. Arrays
 * are only detached where they own their whole, non-shared buffer.
 *
 * @module
 */
import { add, backend, scalar, slice, type Tensor, tidy } from "@tensorflow/tfjs-core";

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
export async function backendCopies(): Promise<boolean> {
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

/** Whether `values` is a view over the whole of a non-shared `ArrayBuffer`. */
function ownsBuffer(values: unknown): values is ArrayBufferView<ArrayBuffer> {
  if (!ArrayBuffer.isView(values)) return false;
  const buffer = values.buffer;
  return buffer instanceof ArrayBuffer && values.byteOffset === 0 && values.byteLength === buffer.byteLength;
}

/** Frees `buffer`'s memory now where the runtime can detach it (`transfer(0)`: not Node 20). */
export function detach(buffer: ArrayBuffer): void {
  const transfer = (buffer as ArrayBuffer & { transfer?: (length: number) => ArrayBuffer }).transfer;
  try {
    transfer?.call(buffer, 0);
  } catch {
    // Not detachable (a WebAssembly memory, say): left to the garbage collector.
  }
}

/** Frees a copy that `data()` handed out, if it owns its whole buffer. */
function free(values: unknown): void {
  if (ownsBuffer(values)) detach(values.buffer);
}

/**
 * Has a one-element op use `held`, so that a backend holding the values as given moves them in
 * and hands out a copy on the next read, not the array it keeps.
 */
function moveIntoBackend(held: Tensor): void {
  // One op, not a reshape then a slice: on tensorflow each op costs ~0.1 ms whatever its size.
  tidy(() => {
    slice(held, held.shape.map(() => 0), held.shape.map(() => 1)); // not returned: tidy disposes it
  });
}

/** The typed array class of each checkpoint dtype a snapshot stages. */
export type StagedArray = typeof Float32Array | typeof Int32Array | typeof Uint8Array;

/**
 * Reads each tensor back, in order, into an array of its own, for a backend whose `data()`
 * hands out a fresh copy ({@linkcode backendCopies}): a copy of {@linkcode FREE_MIN_BYTES} or
 * more that is of the wanted class and owns its whole buffer becomes the tensor's array as it
 * is (the backend keeps no reference to it: the same reason {@linkcode readBackInto} may free
 * it); a smaller one (which the backend may still hold as given) or another class is copied
 * into a new array. The arrays come to one copy of the state, as a staging buffer would, and
 * nothing else is left to collect. `onArray` is told of each array as soon as it is read.
 */
export async function readBackOwned(
  tensors: { name: string; held: Tensor }[],
  arrays: StagedArray[],
  lengths: number[],
  onArray?: (index: number, array: Staged) => void,
): Promise<Staged[]> {
  const owned: Staged[] = [];
  for (const [i, { name, held }] of tensors.entries()) {
    const Kind = arrays[i]!;
    const adopt = lengths[i]! * Kind.BYTES_PER_ELEMENT >= FREE_MIN_BYTES;
    if (adopt) moveIntoBackend(held);
    const values = await held.data();
    if (values.length !== lengths[i]) {
      throw new RangeError(
        `Cannot snapshot tensor ${JSON.stringify(name)}: read ${values.length} elements, expected ${lengths[i]}`,
      );
    }
    if (adopt && values instanceof Kind && ownsBuffer(values)) owned.push(values);
    else {
      owned.push(new Kind(values as ArrayLike<number>));
      if (adopt) free(values);
    }
    onArray?.(i, owned[i]!);
  }
  return owned;
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
    if (freeThis) moveIntoBackend(held);
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
