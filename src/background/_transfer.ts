// Taking ownership of a checkpoint's tensor buffers so they can be transferred to a worker.

import type { TensorData, TensorInput } from "../format/types.ts";
import type { TypedArrayConstructor } from "../format/dtype.ts";
import { headroomOf, reserveHeadroom } from "../format/_headroom.ts";

/** Tensors that own their buffers, and those buffers (each once) for a `postMessage` transfer list. */
export interface OwnedTensors {
  tensors: TensorInput[];
  transfer: ArrayBuffer[];
  /**
   * Per tensor, the bytes in front of its data reserved for its record prefix (see
   * `reserveHeadroom`), kept where its buffer was moved whole, else 0: the mark lives beside
   * the buffer on this thread, so the worker is told and marks its own copy of the views.
   */
  headroom: number[];
  /** Bytes that had to be copied because their buffer could not be moved. */
  copiedBytes: number;
}

/** Whether the views together cover every byte of their buffer (with the room reserved in front of each). */
function coversBuffer(buffer: ArrayBufferLike, views: readonly TensorData[]): boolean {
  const spans = views.map((v) => [v.byteOffset - headroomOf(v), v.byteOffset + v.byteLength] as const)
    .sort((a, b) => a[0] - b[0]);
  let end = 0;
  for (const [from, to] of spans) {
    if (from > end) return false;
    if (to > end) end = to;
  }
  return end === buffer.byteLength;
}

/**
 * Moves the tensors' data out of the caller's hands, so later writes by the caller cannot change
 * what is saved and the buffers can be transferred to a worker without copying:
 * - a plain `ArrayBuffer` whose every byte belongs to tensors of this checkpoint (one tensor
 *   owning its whole buffer, or several tensors packed into one buffer) is moved, no copy, and
 *   the caller's arrays become detached. With `detach` `"post"` the tensors keep the caller's
 *   views and the buffer is only listed for the transfer: the `postMessage` that sends them
 *   detaches it (in Chromium, a buffer first moved with `ArrayBuffer.prototype.transfer()` was
 *   then copied by `postMessage` when it had come from a worker: 35-70 ms for 48 MiB on the
 *   calling thread, against 0.1 ms). With `"now"` it is moved here with `transfer()`, and one
 *   that cannot be detached (WebAssembly memory) is copied; a `postMessage` of a `"post"` list
 *   holding such a buffer throws and detaches nothing, so try `"post"` first;
 * - anything else (a view into a larger buffer that holds other data, a `SharedArrayBuffer`) is
 *   copied, and the caller's arrays are left as they are.
 * The returned tensors keep the input order, names, shapes and groups.
 */
export function takeOwnership(input: readonly TensorInput[], detach: "post" | "now" = "now"): OwnedTensors {
  const byBuffer = new Map<ArrayBufferLike, TensorData[]>();
  for (const t of input) {
    const views = byBuffer.get(t.data.buffer);
    if (views) views.push(t.data);
    else byBuffer.set(t.data.buffer, [t.data]);
  }
  // Read every view's place before any buffer is detached (a detached view reads as empty).
  const layout = input.map((t) =>
    [t.data.constructor as TypedArrayConstructor, t.data.byteOffset, t.data.length, headroomOf(t.data)] as const
  );
  const moved = new Map<ArrayBufferLike, ArrayBuffer>();
  for (const [buffer, views] of byBuffer) {
    if (!(buffer instanceof ArrayBuffer) || !coversBuffer(buffer, views)) continue;
    if (detach === "post") {
      moved.set(buffer, buffer);
      continue;
    }
    try {
      moved.set(buffer, buffer.transfer());
    } catch {
      // Not detachable (WebAssembly memory, for one): copied below instead.
    }
  }
  const transfer = [...moved.values()];
  let copiedBytes = 0;
  const headroom = input.map(() => 0);
  const tensors = input.map((t, i): TensorInput => {
    const buffer = moved.get(t.data.buffer);
    let data: TensorData;
    if (buffer === t.data.buffer) {
      data = t.data;
      headroom[i] = layout[i]![3];
    } else if (buffer) {
      const [View, byteOffset, length, room] = layout[i]!;
      data = new View(buffer, byteOffset, length);
      if (room > 0) reserveHeadroom(data, headroom[i] = room);
    } else {
      data = t.data.slice() as TensorData;
      copiedBytes += data.byteLength;
      transfer.push(data.buffer as ArrayBuffer);
    }
    return { ...t, shape: [...t.shape], data };
  });
  return { tensors, transfer, copiedBytes, headroom };
}

/**
 * Marks, on the receiving thread, the headroom `takeOwnership` kept (`headroom[i]` bytes in front
 * of `tensors[i]`), so the encoder there lays each record out whole and hashes it in one call.
 */
export function reserveReceived(tensors: readonly TensorInput[], headroom: readonly number[] | undefined): void {
  headroom?.forEach((room, i) => {
    const data = tensors[i]?.data;
    if (room > 0 && data && room <= data.byteOffset) reserveHeadroom(data, room);
  });
}

/** Each distinct buffer under the tensors, once: the transfer list for sending them on. */
export function buffersOf(tensors: readonly TensorInput[]): ArrayBuffer[] {
  const seen = new Set<ArrayBuffer>();
  for (const t of tensors) {
    if (t.data.buffer instanceof ArrayBuffer && !t.data.buffer.detached) seen.add(t.data.buffer);
  }
  return [...seen];
}
