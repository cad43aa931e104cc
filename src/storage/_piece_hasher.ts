// A Web Worker that hashes byte ranges of buffers transferred to it, with the platform's own
// SHA-256 (WebCrypto), and transfers them back: a load from a Blob in a page hashes each large
// record there while the page's thread receives the next piece. Chromium's
// `crypto.subtle.digest` runs on the calling thread (a 64 MiB digest returns after it hashed,
// 150-230 ms here), so in the page the read and the hash would take turns on one thread.
// The same worker reads an OPFS file itself where the engine lets it (src/storage/_opfs_read.ts):
// through a sync access handle (workers only), each piece straight into fresh memory that it
// hashes and transfers to the page, with none of a Blob read's copies between processes; and
// writes one for a page's save, from buffers the page fills (src/storage/_opfs_worker_write.ts).
// The worker's code is inline (a Blob URL), so no bundler has to place a file for it.

/**
 * The worker. Each message has an `id` and is answered with it (a failure: the `error` and its
 * `name`, and the message's buffer back):
 * - `{ buffer, ranges }`: the buffer back and one digest per `[offset, length]` range;
 * - `{ open }`: a read-only sync access handle on the FileSystemFileHandle `open`, kept under
 *   the message's id, answered with the file's `size`;
 * - `{ read: [handle, at, length], ranges }`: those bytes of an open handle in a fresh buffer,
 *   answered as a buffer is;
 * - `{ openWrite }`: a read-write sync access handle on `openWrite`, kept under the message's id;
 * - `{ write: [handle, at, length], buffer }`: the first `length` bytes of `buffer` written at
 *   `at`, answered with the buffer back;
 * - `{ close: handle }`: closes that handle (its lock is gone once answered).
 */
const WORKER_CODE = `const handles = new Map();
onmessage = async (e) => {
  const { id, ranges } = e.data;
  let buffer = e.data.buffer;
  try {
    if (e.data.open) {
      const handle = await e.data.open.createSyncAccessHandle({ mode: "read-only" });
      handles.set(id, handle);
      postMessage({ id, size: handle.getSize() });
      return;
    }
    if (e.data.openWrite) {
      handles.set(id, await e.data.openWrite.createSyncAccessHandle());
      postMessage({ id });
      return;
    }
    if (e.data.write) {
      const [handle, at, length] = e.data.write;
      const h = handles.get(handle);
      const view = new Uint8Array(buffer, 0, length);
      for (let done = 0; done < length;) {
        const n = h.write(view.subarray(done), { at: at + done });
        if (!(n > 0)) throw new Error(\`wrote \${n} of \${length - done} bytes at \${at + done}\`);
        done += n;
      }
      postMessage({ id, buffer }, [buffer]);
      return;
    }
    if (e.data.close !== undefined) {
      handles.get(e.data.close)?.close();
      handles.delete(e.data.close);
      postMessage({ id });
      return;
    }
    if (e.data.read) {
      const [handle, at, length] = e.data.read;
      buffer = new ArrayBuffer(length);
      const n = handles.get(handle).read(new Uint8Array(buffer), { at });
      if (n !== length) throw new Error(\`read \${n} of \${length} bytes at \${at}\`);
    }
    const digests = [];
    for (const [at, n] of ranges) digests.push(await crypto.subtle.digest("SHA-256", new Uint8Array(buffer, at, n)));
    postMessage({ id, buffer, digests }, [buffer]);
  } catch (err) {
    postMessage({ id, buffer, error: String(err), name: err?.name }, buffer ? [buffer] : []);
  }
};`;

interface Answer {
  id: number;
  buffer?: ArrayBuffer;
  digests?: ArrayBuffer[];
  size?: number;
  error?: string;
  name?: string;
}

/** What the worker failed with, under the name the platform gave it (`NoModificationAllowedError`). */
export class WorkerError extends Error {
  constructor(message: string, name = "Error") {
    super(message);
    this.name = name;
  }
}

/**
 * How long a page keeps an idle worker for the next load (its start costs about 40 ms of CPU in
 * Chromium here, a fifth of a 64 MiB read); Deno and Node end it with each load.
 */
const IDLE_MS = 10_000;

function isServerRuntime(): boolean {
  const g = globalThis as { Deno?: { version?: { deno?: unknown } }; process?: { versions?: { node?: unknown } } };
  return typeof g.Deno?.version?.deno === "string" || typeof g.process?.versions?.node === "string";
}

/**
 * The workers the loads of this realm share while in use (and a while after, in a page), by
 * slot: a Blob load uses the first; a sync-handle load reads on both where it can hold two handles.
 */
const shared: (PieceHasher | undefined)[] = [];
/** Set once a worker failed (a page whose policy refuses Blob-URL workers): none is started again. */
let refused = false;

/** Hashes ranges of buffers on a worker thread; see the module comment. */
export class PieceHasher {
  #worker: Worker;
  #url: string;
  #next = 0;
  #waiting = new Map<number, { resolve(a: Answer): void; reject(e: Error): void }>();
  #failed: Error | undefined;
  #users = 0;
  #idle: ReturnType<typeof setTimeout> | undefined;
  #slot: number;

  private constructor(slot: number) {
    this.#slot = slot;
    this.#url = URL.createObjectURL(new Blob([WORKER_CODE], { type: "text/javascript" }));
    this.#worker = new Worker(this.#url, { type: "module" });
    this.#worker.onmessage = (e: MessageEvent<Answer>) => {
      const waiting = this.#waiting.get(e.data.id);
      this.#waiting.delete(e.data.id);
      waiting?.resolve(e.data);
    };
    this.#worker.onerror = (e: Event) => {
      e.preventDefault();
      refused = true;
      this.#fail(new Error(`the hash worker failed: ${(e as ErrorEvent).message ?? "no message"}`));
    };
  }

  /**
   * The realm's hasher in `slot`, started if none is running, for one load until its
   * {@linkcode release}; `undefined` where no worker can start (no `Worker`, no Blob URLs, or one
   * failed before).
   */
  static acquire(slot = 0): PieceHasher | undefined {
    if (refused || typeof Worker !== "function" || typeof URL.createObjectURL !== "function") return undefined;
    let hasher = shared[slot];
    if (!hasher || hasher.#failed) {
      try {
        shared[slot] = hasher = new PieceHasher(slot);
      } catch {
        refused = true;
        return undefined;
      }
    }
    clearTimeout(hasher.#idle);
    hasher.#users++;
    return hasher;
  }

  /** Ends one load's use: the worker ends once no load uses it (in a page, after {@linkcode IDLE_MS} idle). */
  release(): void {
    if (--this.#users > 0) return;
    if (isServerRuntime()) this.close();
    else this.#idle = setTimeout(() => this.close(), IDLE_MS);
  }

  #fail(e: Error): void {
    this.#failed ??= e;
    for (const w of this.#waiting.values()) w.reject(this.#failed);
    this.#waiting.clear();
  }

  /** Posts `message` (transferring `transfer`) and gives the worker's answer; its error rejects. */
  #ask(message: Record<string, unknown>, transfer: Transferable[] = []): Promise<Answer> {
    if (this.#failed) return Promise.reject(this.#failed);
    const id = this.#next++;
    const answer = new Promise<Answer>((resolve, reject) => this.#waiting.set(id, { resolve, reject }));
    try {
      this.#worker.postMessage({ ...message, id }, transfer);
    } catch (e) {
      // Not cloneable here (WebKit's FileSystemFileHandle): nothing was sent.
      this.#waiting.delete(id);
      return Promise.reject(e);
    }
    return answer.then((a) => {
      if (a.error !== undefined) throw new WorkerError(`the hash worker failed: ${a.error}`, a.name);
      return a;
    });
  }

  /**
   * The SHA-256 of each `[offset, length]` range of `buffer`, and the buffer back (it is
   * transferred there and back: detached meanwhile). Rejects if the worker failed (a page whose
   * policy refuses Blob-URL workers): the buffer is then lost to the caller.
   */
  async digest(buffer: ArrayBuffer, ranges: [number, number][]): Promise<Digested> {
    return digested(await this.#ask({ buffer, ranges }, [buffer]));
  }

  /**
   * Opens a read-only sync access handle on an OPFS `FileSystemFileHandle` in the worker: its
   * number for {@linkcode PieceHasher.read} and the file's size. Rejects where the engine cannot
   * post the handle or refuses one (`DataCloneError`, `NotSupportedError`), or another holds
   * the file (`NoModificationAllowedError`).
   */
  async open(file: unknown): Promise<{ handle: number; size: number }> {
    const { id, size } = await this.#ask({ open: file }); // the worker keeps the handle under the message's id
    return { handle: id, size: size! };
  }

  /** `length` bytes at `at` of an open handle, in a fresh buffer, and the digests of its `ranges`. */
  async read(handle: number, at: number, length: number, ranges: [number, number][]): Promise<Digested> {
    return digested(await this.#ask({ read: [handle, at, length], ranges }));
  }

  /**
   * Opens a read-write sync access handle on an OPFS `FileSystemFileHandle` in the worker: its
   * number for {@linkcode PieceHasher.write}. Rejects as {@linkcode PieceHasher.open} does.
   */
  async openWrite(file: unknown): Promise<number> {
    return (await this.#ask({ openWrite: file })).id; // the worker keeps the handle under it
  }

  /**
   * Writes the first `length` bytes of `buffer` at `at` through an open read-write handle; the
   * buffer is transferred there and back (detached meanwhile). A failure rejects with the
   * engine's error name (`QuotaExceededError`), the buffer then lost to the caller.
   */
  async write(handle: number, at: number, buffer: ArrayBuffer, length: number): Promise<ArrayBuffer> {
    return (await this.#ask({ write: [handle, at, length], buffer }, [buffer])).buffer!;
  }

  /** Closes an open handle; resolves once it is closed (and the file's lock gone). */
  async closeHandle(handle: number): Promise<void> {
    await this.#ask({ close: handle });
  }

  /** Ends the worker; what is in flight rejects. */
  close(): void {
    if (shared[this.#slot] === this) shared[this.#slot] = undefined;
    clearTimeout(this.#idle);
    this.#fail(new Error("the hash worker was closed"));
    this.#worker.terminate();
    URL.revokeObjectURL(this.#url);
  }
}

/** A buffer from the worker and the digests of its ranges. */
export interface Digested {
  buffer: ArrayBuffer;
  digests: Uint8Array[];
}

function digested(a: Answer): Digested {
  return { buffer: a.buffer!, digests: a.digests!.map((d) => new Uint8Array(d)) };
}

/** Test hook: forgets that a worker failed, so the next load starts one again. */
export function forgetRefusalForTests(): void {
  refused = false;
}
