/**
 * The bookkeeping every saver shares (`BackgroundWriter`, the tfjs `CheckpointWriter`, the
 * manager): how many saves are in flight, waking whoever waits for them all, the failures nobody
 * took charge of (reported once, by the next call), and a close that runs once. One place, so
 * that draining everything before an exit (preemption) means the same thing for all of them.
 *
 * @module
 */
import type { SavePromise } from "./_protocol.ts";

interface Failure {
  error: unknown;
  /** The failed save's promise; when someone took charge of its failure, it counts as reported. */
  promise?: SavePromise<unknown> | undefined;
}

/** Saves in flight, unreported failures and a once-only close, for one saver. */
export class SaveLedger {
  #what: string;
  #pending = 0;
  #idleWaiters: (() => void)[] = [];
  #failures: Failure[] = [];
  #closed = false;
  #closing: Promise<void> | undefined;
  #detail: boolean;

  /**
   * @param what How the aggregate error names the saves ("background saves").
   * @param detail Whether the aggregate error's message quotes the first failure.
   */
  constructor(what: string, detail = true) {
    this.#what = what;
    this.#detail = detail;
  }

  /** Saves begun and not settled. */
  get pending(): number {
    return this.#pending;
  }

  /** Whether `close` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** A save begins. */
  begin(): void {
    this.#pending++;
  }

  /** A save settled; when none is left, whoever waits in `idle()` goes on. */
  end(): void {
    this.#pending--;
    if (this.#pending === 0) { for (const wake of this.#idleWaiters.splice(0)) wake(); }
  }

  /** Records a failure, to be reported unless someone takes charge of `promise`'s rejection. */
  failed(error: unknown, promise?: SavePromise<unknown>): void {
    this.#failures.push({ error, promise });
  }

  /** Resolves once no save is pending. */
  async idle(): Promise<void> {
    while (this.#pending > 0) await new Promise<void>((r) => this.#idleWaiters.push(r));
  }

  /** Throws the failures nobody took charge of (one error, or an `AggregateError`), once. */
  throwUnreported(): void {
    const errors = this.#failures.filter((f) => !f.promise?.observed).map((f) => f.error);
    this.#failures = [];
    if (errors.length === 0) return;
    if (errors.length === 1) throw errors[0];
    const first = this.#detail ? `; the first: ${(errors[0] as Error)?.message ?? errors[0]}` : "";
    throw new AggregateError(errors, `${errors.length} ${this.#what} failed${first}`);
  }

  /** Waits until no save is pending, then throws what `throwUnreported` throws. */
  async flush(): Promise<void> {
    await this.idle();
    this.throwUnreported();
  }

  /**
   * Marks the saver closed, flushes, then runs `shutdown` whatever the flush threw. Later calls
   * return the same promise.
   */
  close(shutdown: () => void | Promise<void>): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      try {
        await this.flush();
      } finally {
        await shutdown();
      }
    })();
    return this.#closing;
  }
}
