// A second thread that hashes byte ranges of the file a reader is reading, reading them itself
// (a Worker that opens the same path): while the reader's own thread reads and hashes one tensor,
// this one reads and hashes another (decoding it first when it is byte-grouped), and neither
// copies a byte to the other. Deno only. Before it takes any range, the file it opened must be
// the reader's (same device and inode): a path replaced in between (an atomic save over it)
// leaves it unused, never reading another file.
// An idle Worker keeps a Deno process alive, so its owner closes it, and it closes itself after
// IDLE_MS without work in case an owner is abandoned.
import type { EncodedBody, RangeHasher } from "../format/_byte_reader.ts";

/** Without a job for this long, the thread ends itself. */
const IDLE_MS = 2000;

/** A job's answer: the digest, and the decoded bytes a byte-grouped load asked for. */
interface Done {
  seq: number;
  digest: Uint8Array;
  data?: { buffer: ArrayBuffer; byteOffset: number; byteLength: number };
}

interface Waiter {
  resolve(done: Done): void;
  reject(e: unknown): void;
}

type Reply =
  | { ready: true; dev: number; ino: number | null }
  | { ready: false; error: string }
  | Done
  | { seq: number; error: string; syntax?: boolean };

/** A Worker that hashes ranges of one file; see the module comment. */
export class FileRangeHasher implements RangeHasher {
  #worker: Worker;
  #started = false;
  #closed = false;
  #seq = 0;
  #waiting = new Map<number, Waiter>();
  #idle: ReturnType<typeof setTimeout> | undefined;
  /** Settles once the thread is up (true) or will never be (false). */
  readonly up: Promise<boolean>;

  constructor(path: string, identity: { dev: number; ino: number | null }) {
    this.#worker = new Worker(new URL("./_range_hash_worker.ts", import.meta.url), { type: "module" });
    let settleUp!: (ok: boolean) => void;
    this.up = new Promise((r) => (settleUp = r));
    this.#worker.onmessage = (e: MessageEvent<Reply>) => {
      const m = e.data;
      if ("ready" in m) {
        const same = m.ready && identity.ino !== null && m.ino === identity.ino && m.dev === identity.dev;
        if (same) {
          this.#started = true;
          this.#arm();
        } else this.close();
        settleUp(same);
        return;
      }
      const w = this.#waiting.get(m.seq);
      this.#waiting.delete(m.seq);
      if ("digest" in m) w?.resolve(m);
      else w?.reject(m.syntax ? new SyntaxError(m.error) : new Error(m.error));
      this.#arm();
    };
    this.#worker.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      this.#fail(new Error(`the range hash thread failed (${e.message})`));
      settleUp(false);
    };
    this.#worker.postMessage({ path });
  }

  get ready(): boolean {
    return this.#started && !this.#closed && this.#waiting.size === 0;
  }

  async digest(prefix: Uint8Array, offset: number, length: number): Promise<Uint8Array> {
    return (await this.#send({ prefix, offset, length })).digest;
  }

  async decode(
    prefix: Uint8Array,
    offset: number,
    length: number,
    body: EncodedBody,
  ): Promise<{ digest: Uint8Array; data?: Uint8Array }> {
    const { digest, data } = await this.#send({ prefix, offset, length, decode: body });
    return { digest, data: data && new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  }

  #send(job: { prefix: Uint8Array; offset: number; length: number; decode?: EncodedBody }): Promise<Done> {
    if (!this.ready) return Promise.reject(new Error("the range hash thread is not ready"));
    clearTimeout(this.#idle);
    const seq = ++this.#seq;
    return new Promise((resolve, reject) => {
      this.#waiting.set(seq, { resolve, reject });
      this.#worker.postMessage({ seq, ...job });
    });
  }

  close(): void {
    this.#fail(new Error("the range hash thread was closed"));
  }

  #fail(e: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#idle);
    this.#worker.terminate();
    for (const w of this.#waiting.values()) w.reject(e);
    this.#waiting.clear();
  }

  /** Ends the thread after IDLE_MS without work; the timer alone does not keep the process alive. */
  #arm(): void {
    if (this.#closed || this.#waiting.size > 0) return;
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => this.close(), IDLE_MS);
    Deno.unrefTimer(this.#idle as unknown as number);
  }
}
