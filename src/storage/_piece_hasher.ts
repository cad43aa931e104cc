// A Web Worker that hashes byte ranges of buffers transferred to it, with the platform's own
// SHA-256 (WebCrypto), and transfers them back: a load from a Blob in a page hashes each large
// record there while the page's thread receives the next piece. Chromium's
// `crypto.subtle.digest` runs on the calling thread (a 64 MiB digest returns after it hashed,
// 150-230 ms here), so in the page the read and the hash would take turns on one thread.
// The worker's code is inline (a Blob URL), so no bundler has to place a file for it.

/** The worker: each message `{ id, buffer, ranges }` answered with the buffer and one digest per range. */
const WORKER_CODE = `onmessage = async (e) => {
  const { id, buffer, ranges } = e.data;
  try {
    const digests = [];
    for (const [at, n] of ranges) digests.push(await crypto.subtle.digest("SHA-256", new Uint8Array(buffer, at, n)));
    postMessage({ id, buffer, digests }, [buffer]);
  } catch (err) {
    postMessage({ id, buffer, error: String(err) }, [buffer]);
  }
};`;

interface Answer {
  id: number;
  buffer: ArrayBuffer;
  digests?: ArrayBuffer[];
  error?: string;
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

/** The worker the loads of this realm share while it is in use (and a while after, in a page). */
let shared: PieceHasher | undefined;
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

  private constructor() {
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
   * The realm's hasher, started if none is running, for one load until its {@linkcode release};
   * `undefined` where no worker can start (no `Worker`, no Blob URLs, or one failed before).
   */
  static acquire(): PieceHasher | undefined {
    if (refused || typeof Worker !== "function" || typeof URL.createObjectURL !== "function") return undefined;
    if (!shared || shared.#failed) {
      try {
        shared = new PieceHasher();
      } catch {
        refused = true;
        return undefined;
      }
    }
    clearTimeout(shared.#idle);
    shared.#users++;
    return shared;
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

  /**
   * The SHA-256 of each `[offset, length]` range of `buffer`, and the buffer back (it is
   * transferred there and back: detached meanwhile). Rejects if the worker failed (a page whose
   * policy refuses Blob-URL workers): the buffer is then lost to the caller.
   */
  digest(buffer: ArrayBuffer, ranges: [number, number][]): Promise<{ buffer: ArrayBuffer; digests: Uint8Array[] }> {
    if (this.#failed) return Promise.reject(this.#failed);
    const id = this.#next++;
    const answer = new Promise<Answer>((resolve, reject) => this.#waiting.set(id, { resolve, reject }));
    this.#worker.postMessage({ id, buffer, ranges }, [buffer]);
    return answer.then((a) => {
      if (a.error !== undefined) throw new Error(`the hash worker failed: ${a.error}`);
      return { buffer: a.buffer, digests: a.digests!.map((d) => new Uint8Array(d)) };
    });
  }

  /** Ends the worker; what is in flight rejects. */
  close(): void {
    if (shared === this) shared = undefined;
    clearTimeout(this.#idle);
    this.#fail(new Error("the hash worker was closed"));
    this.#worker.terminate();
    URL.revokeObjectURL(this.#url);
  }
}

/** Test hook: forgets that a worker failed, so the next load starts one again. */
export function forgetRefusalForTests(): void {
  refused = false;
}
