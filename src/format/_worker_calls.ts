// Numbered calls to a module Worker, each answered by one reply that carries its number, and the
// lifecycle every second thread here shares: a failure (the Worker's error, or its owner closing
// it) terminates the Worker and rejects every call in flight and after; with `idleMs`, the Worker
// also ends itself that long after its last reply (an idle Worker keeps a Deno process alive, so
// an owner abandoned without closing it must not), on a timer that alone keeps nothing alive.
import { startWorker, type WorkerFailure, type WorkerHandle, type WorkerMessage } from "../runtime/workers.ts";
import { thisProcess } from "../runtime/process.ts";

/** A reply to a call: the call's number, and whatever the Worker answers. */
export interface Reply {
  seq: number;
}

interface Waiter<R> {
  resolve(reply: R): void;
  reject(e: unknown): void;
}

/** Options of {@linkcode WorkerCalls}. */
export interface WorkerCallsOptions {
  /** What the thread is called in errors: `${what} failed (…)`, `${what} was closed`. */
  what: string;
  /** End the Worker after this many milliseconds without a call in flight (armed by {@linkcode WorkerCalls.idle}). */
  idleMs?: number;
  /** Messages that answer no call (such as "ready"). */
  onOther?(data: unknown): void;
  /** Called once when it fails or is closed. */
  onFail?(e: Error): void;
}

/** A module Worker spoken to by numbered calls; see the module comment. */
export class WorkerCalls<R extends Reply> {
  #worker: WorkerHandle;
  #seq = 0;
  #waiting = new Map<number, Waiter<R>>();
  #failure: Error | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #options: WorkerCallsOptions;

  constructor(url: URL, options: WorkerCallsOptions) {
    this.#options = options;
    this.#worker = startWorker(url);
    this.#worker.onmessage = (e: WorkerMessage<unknown>) => {
      const seq = (e.data as Partial<Reply> | null)?.seq;
      if (typeof seq !== "number") return options.onOther?.(e.data);
      const w = this.#waiting.get(seq);
      this.#waiting.delete(seq);
      w?.resolve(e.data as R); // none after a failure: that call was rejected then
      this.idle();
    };
    this.#worker.onerror = (e: WorkerFailure) => {
      e.preventDefault();
      this.fail(new Error(`${options.what} failed (${e.message})`));
    };
  }

  /** Whether a call is in flight. */
  get busy(): boolean {
    return this.#waiting.size > 0;
  }

  /** Whether it failed or was closed (every call now rejects). */
  get failed(): boolean {
    return this.#failure !== undefined;
  }

  /** Posts a message that is not a call (no reply awaited), such as what to open. */
  post(message: unknown): void {
    if (!this.#failure) this.#worker.postMessage(message);
  }

  /** Sends `message` with a new number (as `seq`); resolves with the reply that carries it. */
  call(message: Record<string, unknown>, transfer: Transferable[] = []): Promise<R> {
    if (this.#failure) return Promise.reject(this.#failure);
    clearTimeout(this.#timer);
    const seq = ++this.#seq;
    return new Promise((resolve, reject) => {
      this.#waiting.set(seq, { resolve, reject });
      this.#worker.postMessage({ ...message, seq }, transfer);
    });
  }

  /** Starts the idle timer when nothing is in flight (after each reply, and when the owner says the thread is up). */
  idle(): void {
    const ms = this.#options.idleMs;
    if (ms === undefined || this.#failure || this.busy) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.close(), ms);
    thisProcess.unrefTimer(this.#timer);
  }

  /** Ends the Worker; calls in flight and after reject with `e` (the first failure is kept). */
  fail(e: Error): void {
    if (this.#failure) return;
    this.#failure = e;
    clearTimeout(this.#timer);
    this.#worker.terminate();
    for (const w of this.#waiting.values()) w.reject(e);
    this.#waiting.clear();
    this.#options.onFail?.(e);
  }

  /** Ends the Worker: `${what} was closed`. */
  close(): void {
    this.fail(new Error(`${this.#options.what} was closed`));
  }
}
