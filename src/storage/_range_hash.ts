// A second thread that hashes byte ranges of the file a reader is reading, reading them itself
// (a Worker that opens the same path): while the reader's own thread reads and hashes one tensor,
// this one reads and hashes another (decoding it first when it is byte-grouped), and neither
// copies a byte to the other. Deno only. Before it takes any range, the file it opened must be
// the reader's (same device and inode): a path replaced in between (an atomic save over it)
// leaves it unused, never reading another file. Its owner closes it; it also ends itself after
// IDLE_MS without work, in case an owner is abandoned (src/format/_worker_calls.ts).
import type { EncodedBody, RangeHasher } from "../format/_byte_reader.ts";
import { WorkerCalls } from "../format/_worker_calls.ts";

/** Without a job for this long, the thread ends itself. */
const IDLE_MS = 2000;

/** A job's answer: the digest (and the decoded bytes a byte-grouped load asked for), or what went wrong. */
type Done =
  | { seq: number; digest: Uint8Array; data?: { buffer: ArrayBuffer; byteOffset: number; byteLength: number } }
  | { seq: number; error: string; syntax?: boolean };

/** The thread's first message: the identity of the file it opened, or why it could not. */
type Opened = { ready: true; dev: number | null; ino: number | null } | { ready: false; error: string };

/** A Worker that hashes ranges of one file; see the module comment. */
export class FileRangeHasher implements RangeHasher {
  #calls: WorkerCalls<Done>;
  #started = false;
  /** Settles once the thread is up (true) or will never be (false). */
  readonly up: Promise<boolean>;

  constructor(path: string, identity: { dev: number | null; ino: number | null }) {
    let settleUp!: (ok: boolean) => void;
    this.up = new Promise((r) => (settleUp = r));
    this.#calls = new WorkerCalls(new URL("./_range_hash_worker.ts", import.meta.url), {
      what: "the range hash thread",
      idleMs: IDLE_MS,
      onOther: (data) => {
        const m = data as Opened;
        const same = m.ready && identity.ino !== null && m.ino === identity.ino && m.dev === identity.dev;
        if (same) {
          this.#started = true;
          this.#calls.idle();
        } else this.close();
        settleUp(same);
      },
      onFail: () => settleUp(false),
    });
    this.#calls.post({ path });
  }

  get ready(): boolean {
    return this.#started && !this.#calls.failed && !this.#calls.busy;
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

  async #send(job: { prefix: Uint8Array; offset: number; length: number; decode?: EncodedBody }) {
    if (!this.ready) throw new Error("the range hash thread is not ready");
    const done = await this.#calls.call(job);
    // A malformed byte-grouped body is the decoder's SyntaxError, as on the reader's thread.
    if ("error" in done) throw done.syntax ? new SyntaxError(done.error) : new Error(done.error);
    return done;
  }

  close(): void {
    this.#calls.close();
  }
}
