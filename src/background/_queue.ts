// The queue a background worker keeps: one save at a time, in arrival order; in "coalesce" mode
// a request that arrives while another waits replaces it. It lives in the worker, so queued saves
// start even while the thread that asked for them is busy and never yields to its event loop.

/**
 * Runs `run` on one item at a time, in arrival order. `run` must not throw: it reports its own
 * outcome. `supersede` is told about each waiting item a coalescing push replaced.
 */
export class SaveQueue<T> {
  #run: (item: T) => Promise<void>;
  #supersede: (item: T, by: T) => void;
  #waiting: T[] = [];
  #running = false;

  constructor(run: (item: T) => Promise<void>, supersede: (item: T, by: T) => void) {
    this.#run = run;
    this.#supersede = supersede;
  }

  /** Items waiting, not counting the one running. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Queues `item`; with `coalesce`, it replaces every item still waiting (not the running one). */
  push(item: T, coalesce: boolean): void {
    if (coalesce) { for (const old of this.#waiting.splice(0)) this.#supersede(old, item); }
    this.#waiting.push(item);
    if (!this.#running) void this.#drain();
  }

  async #drain(): Promise<void> {
    this.#running = true;
    try {
      while (this.#waiting.length > 0) await this.#run(this.#waiting.shift()!);
    } finally {
      this.#running = false;
    }
  }
}
