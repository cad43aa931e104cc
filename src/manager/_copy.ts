// A committed checkpoint file copied to another store as it is: no decode into tensors, no
// encode. Its bytes go from the source to the destination's writer and, on the way, through the
// verifier a load runs (every record digest, the stream digest, the caps), which keeps no
// tensor. The object is published only when that verification passed and found the stream
// digest the source's index recorded; otherwise the write is aborted and nothing of it becomes
// visible, so a file damaged since its commit never reaches the destination.
//
// From a local file in ckpt's binary format (a local tier's), the file is read part by part into
// a few buffers of the copy's own, reused from part to part: each buffer goes up as one part as
// it is (an S3 writer's `writePart`: no copy into the writer's part buffers; another store's
// writer copies it), and the verifier reads the same bytes from it. A buffer is filled again
// only once its upload is done and the verifier has read past it, so the bytes verified are the
// bytes sent, and memory stays at a few parts whatever the file's size. The profile this
// replaced (4 MiB chunks read into fresh memory, each copied into the writer's fresh part
// buffers) spent more time touching new memory and copying than hashing. Where FFI is granted
// on Linux and the parts fall on the 4 KiB block grid, the parts are read around the page cache
// (`O_DIRECT`, src/storage/_direct_io.ts) into buffers on that grid: a save wrote the file
// directly, so no page of it is cached, and a buffered read had the kernel allocate, fill and
// copy out a page-cache page per 4 KiB (in a replication's profile, more CPU than its SHA-256).

import type { Codec } from "../format/codec.ts";
import { DETECT_BYTES } from "../format/codec.ts";
import { type ByteReader, readFull } from "../format/_byte_reader.ts";
import { binaryCodec, decodeRecords } from "../format/codecs/binary.ts";
import { detectCodec } from "../format/decode.ts";
import type { DecodeLimits } from "../format/limits.ts";
import { settled } from "../format/_pair.ts";
import { verifyCheckpoint } from "../io/verify.ts";
import { type FileHandle, SeekMode } from "../runtime/files.ts";
import type { PartWriter } from "../storage/s3.ts";
import type { ObjectStore, ObjectWriter } from "../storage/types.ts";
import { alignedBuffer, DIRECT_ALIGN, type DirectReader, openDirectRead } from "../storage/_direct_io.ts";
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

/** Bytes read at a time from a source whose writer copies them (not an S3 part writer). */
const CHUNK = 4 * 2 ** 20;
/**
 * Buffers beyond the parts in flight: one being read from the file while the verifier reads the
 * one before.
 */
const SPARE_BUFFERS = 2;
/**
 * How far past a buffer the verifier must have read before the buffer is filled again: the
 * decoder reads a file 64 KiB ahead of what it consumed, so this leaves ample room for any
 * re-read of bytes it has buffered.
 */
const VERIFIER_MARGIN = 2 ** 20;

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
  const path = from.name(entry.file);
  const file = await openBinary(from, entry.file, path, entry.bytes, options.codecs);
  let writer: ObjectWriter;
  try {
    writer = await to.writer(key, { sync: options.sync, sizeHint: entry.bytes });
  } catch (e) {
    file?.close();
    throw e;
  }
  let digest: string | undefined;
  try {
    digest = file
      ? await copyFile(file, from.store.files!.path(entry.file), entry.bytes, writer, options)
      : await copyStream(from, entry, path, writer, options);
  } catch (e) {
    await writer.abort(e).catch(() => {});
    throw e;
  } finally {
    file?.close();
  }
  if (digest !== entry.sha256) {
    await writer.abort(new Error("another digest")).catch(() => {});
    return false;
  }
  await writer.close();
  return true;
}

/**
 * The committed file open for reading, when it is a local file in ckpt's binary format of the
 * size its index records (another size is a `SyntaxError`); `undefined` for other stores and
 * formats (copied as a stream).
 */
async function openBinary(
  from: Location,
  name: string,
  path: string,
  bytes: number,
  codecs: readonly Codec[],
): Promise<FileHandle | undefined> {
  const local = from.store.files;
  if (!local) return undefined;
  const file = await local.open(name);
  try {
    const size = (await file.stat()).size;
    if (size !== bytes) {
      throw new SyntaxError(`Cannot copy checkpoint file ${path}: it has ${size} bytes, the index says ${bytes}`);
    }
    const head = new Uint8Array(DETECT_BYTES);
    const n = await readFull(file, head);
    if (detectCodec(head.subarray(0, n), codecs) !== binaryCodec) {
      file.close();
      return undefined;
    }
    await file.seek(0, SeekMode.Start);
    return file;
  } catch (e) {
    file.close();
    throw e;
  }
}

/** Whether `writer` sends parts from the caller's memory (an S3 store's). */
function partWriter(writer: ObjectWriter): PartWriter | undefined {
  const w = writer as Partial<PartWriter>;
  const ok = typeof w.writePart === "function" && typeof w.begin === "function" && typeof w.partSize === "number" &&
    typeof w.concurrency === "number";
  return ok ? writer as PartWriter : undefined;
}

/**
 * The local binary file `file` (at `path`) of `size` bytes to `writer` and through the verifier;
 * its stream digest.
 */
async function copyFile(
  file: FileHandle,
  path: string,
  size: number,
  writer: ObjectWriter,
  options: CopyOptions,
): Promise<string | undefined> {
  const parts = partWriter(writer);
  const chunk = parts?.partSize ?? CHUNK;
  // Around the page cache where the parts fall on the block grid (see src/storage/_direct_io.ts).
  const direct = chunk % DIRECT_ALIGN === 0 ? openDirectRead(path) : undefined;
  try {
    return await copyParts(file, direct, size, chunk, writer, parts, options);
  } finally {
    direct?.close();
  }
}

async function copyParts(
  file: FileHandle,
  direct: DirectReader | undefined,
  size: number,
  chunk: number,
  writer: ObjectWriter,
  parts: PartWriter | undefined,
  options: CopyOptions,
): Promise<string | undefined> {
  // As many buffers as the writer has parts in flight, and the spares.
  const buffers = (parts?.concurrency ?? 1) + SPARE_BUFFERS;
  const window = new FileParts(file, direct, size, chunk, buffers, options.pace);
  if (parts && size > chunk) parts.begin(); // its first request overlaps the first part's read
  const sending = window.fill(async (bytes, sent) => {
    if (parts) {
      (await parts.writePart(bytes)).sent.then(sent);
    } else {
      await writer.write(bytes);
      sent();
    }
  });
  sending.catch((e) => window.fail(e)); // the verifier's next read rejects with it
  const digest = settled<string>();
  try {
    const records = decodeRecords(window, { ...options.limits, reuseBuffers: true }, undefined, digest, "hash");
    let metadata = false;
    for await (const record of records) metadata ||= record.type === "metadata";
    if (!metadata) throw new SyntaxError("Cannot decode checkpoint: no metadata record");
    await sending;
  } catch (e) {
    window.fail(e);
    await sending.catch(() => {});
    throw e;
  }
  return await digest.promise;
}

/** One buffer of the file: its bytes from `start`, and who still reads them. */
interface Slot {
  bytes: Uint8Array;
  start: number;
  end: number;
  /** Whether the writer still reads it. */
  sending: boolean;
}

/**
 * A file read part by part into a few reused buffers, each handed to a sender, and read again by
 * a verifier as a {@linkcode ByteReader}: the bodies it only hashes are hashed in those buffers
 * ({@linkcode ByteReader.borrow}), the rest copied into buffers of its own. A buffer is filled
 * again once sent and once the verifier has read {@linkcode VERIFIER_MARGIN} past it.
 */
class FileParts implements ByteReader {
  readonly #file: FileHandle;
  readonly #direct: DirectReader | undefined;
  /** Where the handle's position is. */
  #handleAt = 0;
  readonly #size: number;
  readonly #chunk: number;
  readonly #max: number;
  #made = 0;
  #free: Uint8Array[] = [];
  #slots: Slot[] = [];
  /** Bytes read from the file so far. */
  #filled = 0;
  /** Where the verifier reads next. */
  #position = 0;
  readonly #pace: (() => Promise<void>) | undefined;
  /** The pace call under way, which both sides wait for. */
  #pacing: Promise<void> | undefined;
  /** The part the verifier reads. */
  #verifying: Slot | undefined;
  #failure: { error: unknown } | undefined;
  #wake: (() => void) | undefined;

  /**
   * `pace` is awaited before each part is read from the file and before the verifier reads it;
   * while one call is under way, both sides wait for it.
   */
  constructor(
    file: FileHandle,
    direct: DirectReader | undefined,
    size: number,
    chunk: number,
    buffers: number,
    pace: (() => Promise<void>) | undefined,
  ) {
    this.#file = file;
    this.#direct = direct;
    this.#size = size;
    this.#chunk = chunk;
    this.#max = buffers;
    this.#pace = pace;
  }

  /**
   * Reads the file in order, each part into a free buffer, and gives it to `send`, which calls
   * `sent` once the writer no longer reads it.
   */
  async fill(send: (bytes: Uint8Array, sent: () => void) => Promise<void>): Promise<void> {
    while (this.#filled < this.#size) {
      await this.#paced();
      const buffer = await this.#buffer();
      const start = this.#filled;
      const bytes = buffer.subarray(0, Math.min(this.#chunk, this.#size - start));
      const n = await this.#read(buffer, bytes, start);
      if (n < bytes.byteLength) {
        throw new SyntaxError(
          `Cannot copy checkpoint file: it ended at ${start + n} bytes while being read, the index says ${this.#size}`,
        );
      }
      const slot: Slot = { bytes, start, end: start + n, sending: true };
      this.#slots.push(slot);
      this.#filled = slot.end;
      this.#notify();
      await send(bytes, () => {
        slot.sending = false;
        this.#release();
      });
    }
  }

  /**
   * Reads `bytes` (the start of `buffer`) from `start`: directly into `buffer` where it can (a
   * whole number of blocks, of which only the file's bytes count), else through the handle,
   * whose position is the fill's alone. How many bytes it got: fewer only where the file ended.
   */
  async #read(buffer: Uint8Array, bytes: Uint8Array, start: number): Promise<number> {
    if (this.#direct?.accepts(buffer)) {
      const whole = Math.min(buffer.byteLength, Math.ceil(bytes.byteLength / DIRECT_ALIGN) * DIRECT_ALIGN);
      const n = await this.#direct.read(buffer.subarray(0, whole), start);
      if (n >= 0) return Math.min(n, bytes.byteLength);
    }
    if (this.#handleAt !== start) await this.#file.seek(start, SeekMode.Start);
    const n = await readFull(this.#file, bytes);
    this.#handleAt = start + n;
    return n;
  }

  /** Stops both sides: the fill and the verifier's reads reject with `error`. */
  fail(error: unknown): void {
    this.#failure ??= { error };
    this.#notify();
  }

  async read(into: Uint8Array): Promise<number | null> {
    const lent = await this.borrow(into.byteLength);
    if (lent === null) return null;
    into.set(lent);
    return lent.byteLength;
  }

  /**
   * The next bytes, up to `max`, as a view of the part buffer they were read into (the verifier
   * hashes a body there): valid until the next call, as the buffer is kept until the verifier
   * has read {@linkcode VERIFIER_MARGIN} past it.
   */
  async borrow(max: number): Promise<Uint8Array | null> {
    if (this.#position >= this.#size) return null;
    while (this.#filled <= this.#position) await this.#wait();
    const slot = this.#slots.find((s) => s.start <= this.#position && this.#position < s.end);
    if (!slot) {
      throw new Error(`Cannot copy checkpoint file: the part at ${this.#position} was reused before it was verified`);
    }
    if (slot !== this.#verifying) {
      this.#verifying = slot;
      await this.#paced(); // (the slot stays: the verifier has not read past it)
    }
    const from = this.#position - slot.start;
    const n = Math.min(max, slot.end - this.#position);
    this.#position += n;
    this.#release();
    return slot.bytes.subarray(from, from + n);
  }

  stat(): Promise<{ size: number }> {
    return Promise.resolve({ size: this.#size });
  }

  /** Waits for the pace call under way, or makes one. */
  #paced(): Promise<void> | undefined {
    if (!this.#pace) return undefined;
    return this.#pacing ??= this.#pace().finally(() => this.#pacing = undefined);
  }

  /**
   * A free buffer: a released one, a new one while fewer than the maximum exist (on the block
   * grid for direct reads; not in huge pages: 64 MiB replicated 3 times took 0.92 s of CPU so
   * against 0.63 s, the kernel clearing each fresh 2 MiB page as the read faults it in), or the
   * next released.
   */
  async #buffer(): Promise<Uint8Array> {
    for (;;) {
      if (this.#failure) throw this.#failure.error;
      const free = this.#free.pop();
      if (free) return free;
      if (this.#made < this.#max) {
        this.#made++;
        return this.#direct ? alignedBuffer(this.#chunk) : new Uint8Array(this.#chunk);
      }
      await this.#wait();
    }
  }

  /** Frees the buffers the writer is done with and the verifier has read well past. */
  #release(): void {
    const past = this.#position >= this.#size ? Infinity : this.#position; // at the end: read whole
    const done = (s: Slot) => !s.sending && s.end + VERIFIER_MARGIN <= past;
    const kept: Slot[] = [];
    for (const s of this.#slots) {
      if (done(s)) this.#free.push(new Uint8Array(s.bytes.buffer, s.bytes.byteOffset, this.#chunk));
      else kept.push(s);
    }
    if (kept.length === this.#slots.length) return;
    this.#slots = kept;
    this.#notify();
  }

  /** Resolves at the next change (a part read, a buffer freed, a failure); rejects on a failure. */
  #wait(): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure.error);
    return new Promise<void>((resolve) => {
      const previous = this.#wake;
      this.#wake = () => {
        previous?.();
        resolve();
      };
    });
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/**
 * Any other source (another store, another codec): its bytes as the store gives them, each
 * chunk to the writer (which copies it) and then to the verifier; the stream digest.
 */
async function copyStream(
  from: Location,
  entry: CommittedFile,
  path: string,
  writer: ObjectWriter,
  options: CopyOptions,
): Promise<string | undefined> {
  const chunks = (await from.store.get(entry.file)).body.getReader();
  let n = 0;
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
  const { digest } = await verifyCheckpoint(bytes, { ...options.limits, codecs: options.codecs });
  if (n !== entry.bytes) {
    throw new SyntaxError(`Cannot copy checkpoint file ${path}: it has ${n} bytes, the index says ${entry.bytes}`);
  }
  return digest;
}
