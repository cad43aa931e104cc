// A whole load of an OPFS object read by the hash workers through sync access handles
// (`createSyncAccessHandle({ mode: "read-only" })`, which engines give only in workers): each
// piece read from the file straight into fresh memory there, its large records hashed there
// with WebCrypto, then transferred to the page, where the decoder's tensors view it (two
// workers taking turns where the engine gives two handles on one file). A Blob read
// (`slice().arrayBuffer()`) instead copies the bytes between the browser's processes and into
// the page's memory before the worker can hash them.
//
// A sync access handle locks the file: while one is open, moving another file over it or
// removing it fails (`NoModificationAllowedError`, Chromium and Firefox), and Firefox grants
// one handle at a time. So the read holds its handles for one whole load only (a load consumes
// every piece at once), under a shared Web Lock named as OpfsStore's commits name theirs
// (`ckpt-opfs:URL`, taken exclusively around each move and delete): a save or delete by ckpt
// waits for the load to end instead of failing, and a load that finds a commit under way, an
// engine that cannot post the handle to a worker or refuses the handle (WebKit), or a file
// another holds, reads the Blob as before. What the handle reads is checked to be the object
// the Blob is (its size); the decoder checks every byte against the digests as always.
import { notedPiece, readAhead } from "./_read_ahead.ts";
import { PieceHasher } from "./_piece_hasher.ts";

/** The OPFS file behind each `File` an OpfsStore handed out, and its object's URL. */
const origins = new WeakMap<Blob, { file: unknown; url: string }>();

/** This realm's worker cannot read through a sync access handle: not asked again. */
let refused = false;
/** Loads read through a sync access handle so far (tests tell the two paths apart by it). */
let reads = 0;

/** Notes that `blob` is the content of the OPFS file handle `file`, the object at `url`. */
export function noteOpfsFile(blob: Blob, file: unknown, url: string): void {
  origins.set(blob, { file, url });
}

/** The parts of `navigator.locks` used here. */
interface Locks {
  request<T>(name: string, callback: () => Promise<T>): Promise<T>;
  request<T>(
    name: string,
    options: { mode: "shared"; ifAvailable: true },
    callback: (lock: unknown) => Promise<T> | T,
  ): Promise<T>;
}

function lockManager(): Locks | undefined {
  return (globalThis.navigator as unknown as { locks?: Locks } | undefined)?.locks;
}

/**
 * Runs `change` (a move over, or the removal of, the OPFS object at `url`) under the object's
 * Web Lock, exclusively, where the runtime has Web Locks: tabs and workers of one origin take
 * turns, and a load reading the object through a sync access handle ends first.
 */
export function underObjectLock<T>(url: string, change: () => Promise<T>): Promise<T> {
  const locks = lockManager();
  return locks ? locks.request(lockName(url), change) : change();
}

function lockName(url: string): string {
  return `ckpt-opfs:${url}`;
}

/**
 * Holds the Web Lock `name` shared, if no one holds it exclusively now: the function that
 * releases it, or `undefined`.
 */
async function sharedLock(locks: Locks, name: string): Promise<(() => void) | undefined> {
  let release: (() => void) | undefined;
  const held = await new Promise<boolean>((resolve, reject) => {
    locks.request(name, { mode: "shared", ifAvailable: true }, (lock) => {
      resolve(lock !== null);
      return lock && new Promise<void>((done) => release = done);
    }).catch(reject);
  });
  return held ? release : undefined;
}

/** A hash worker and the sync access handle it holds open on the file. */
interface Reader {
  hasher: PieceHasher;
  handle: number;
}

/**
 * Opens a sync access handle on `file` in the hash worker of `slot`, if the file is `size`
 * bytes; `undefined` where it cannot (the engine cannot post the handle to a worker or refuses
 * one: not asked again; another holds the file; it changed), the worker then released.
 */
async function openReader(slot: number, file: unknown, size: number): Promise<Reader | undefined> {
  const hasher = PieceHasher.acquire(slot);
  if (!hasher) return undefined;
  try {
    const open = await hasher.open(file);
    if (open.size === size) return { hasher, handle: open.handle };
    await closeReader({ hasher, handle: open.handle });
    return undefined;
  } catch (e) {
    // Held by another (Firefox grants one handle at a time): this load only does without it. A
    // first handle refused otherwise is the engine's refusal; a second one only this load's.
    if (slot === 0 && (e as { name?: unknown }).name !== "NoModificationAllowedError") refused = true;
  }
  hasher.release();
  return undefined;
}

async function closeReader({ hasher, handle }: Reader): Promise<void> {
  await hasher.closeHandle(handle).catch(() => {});
  hasher.release();
}

/**
 * `blob`'s pieces (cut at `ends`) read by hash workers through sync access handles, each with
 * the digests of its `ranges` noted, as `blobPieces` gives them from the Blob; `undefined` where
 * this load cannot read so (see the module comment): the caller then reads the Blob. Two
 * workers take turns where the engine gives two handles on one file (Chromium's read-only mode
 * shares the file), so one reads and hashes a piece while the other does the next. Call only
 * for a read that takes every piece at once: the handles and the lock are held until the pieces
 * end.
 */
export async function opfsPieces(
  blob: Blob,
  ends: readonly number[],
  url: string,
  ranges: (start: number, end: number) => [number, number][],
): Promise<AsyncGenerator<Uint8Array> | undefined> {
  const origin = origins.get(blob);
  const locks = lockManager();
  if (!origin || !locks || refused) return undefined;
  const release = await sharedLock(locks, lockName(origin.url)).catch(() => undefined);
  if (!release) return undefined;
  const first = await openReader(0, origin.file, blob.size);
  if (!first) {
    release();
    return undefined;
  }
  const second = ends.length > 1 ? await openReader(1, origin.file, blob.size) : undefined;
  return pieces(second ? [first, second] : [first], release, ends, url, ranges);
}

async function* pieces(
  readers: Reader[],
  release: () => void,
  ends: readonly number[],
  url: string,
  ranges: (start: number, end: number) => [number, number][],
): AsyncGenerator<Uint8Array> {
  reads++;
  const startOf = (i: number) => i === 0 ? 0 : ends[i - 1]!;
  try {
    yield* readAhead(ends.length, async (i) => {
      const start = startOf(i);
      const wanted = ranges(start, ends[i]!);
      const { hasher, handle } = readers[i % readers.length]!;
      try {
        return notedPiece(await hasher.read(handle, start, ends[i]! - start, wanted), wanted);
      } catch (e) {
        throw new Error(`Cannot read ${url}: ${(e as Error).message}`, { cause: e });
      }
    });
  } finally {
    // The handles are closed before the lock goes, so a commit waiting for the lock can move.
    await Promise.all(readers.map(closeReader));
    release();
  }
}

/** Test hook: how many loads read through a sync access handle so far. */
export function opfsHandleReadsForTests(): number {
  return reads;
}
