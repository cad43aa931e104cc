/**
 * Preemption: learning that the job is about to be stopped (SIGTERM from Kubernetes, Docker,
 * Slurm or a spot VM; SIGINT from Ctrl-C; a hidden page in a browser), saving the step the loop
 * is at, draining everything queued, and exiting with the conventional status within a grace
 * period. Modelled on Orbax's `reached_preemption(step)`: the loop polls a flag at step
 * boundaries, where the state is consistent, instead of saving from inside a signal handler.
 *
 * @module
 */
import { checkOptionNames, optionNames } from "../format/_options.ts";
import {
  exitProcess,
  exitStatus,
  nextTurn,
  onOrphaned,
  onPageHidden,
  onSignal,
  signalsSupported,
  type StopSignal,
  unref,
} from "../runtime/signals.ts";

/** The default of {@linkcode PreemptionOptions.signals}. */
export const DEFAULT_PREEMPTION_SIGNALS: readonly StopSignal[] = Object.freeze(["SIGTERM", "SIGINT"]);

/**
 * The default of {@linkcode PreemptionOptions.gracePeriod}, in ms: under Kubernetes' default
 * `terminationGracePeriodSeconds` (30), which ends with SIGKILL.
 */
export const DEFAULT_GRACE_PERIOD = 25_000;

/**
 * The default of {@linkcode PreemptionOptions.pollInterval}, in ms: a notice waits at most this
 * long (plus a step) in a loop that never yields, at a cost of one turn of the event loop.
 */
export const DEFAULT_POLL_INTERVAL = 50;

/** Options for {@linkcode Preemption.listen}. */
export interface PreemptionOptions {
  /**
   * The signals that ask the job to save and stop.
   *
   * @default {["SIGTERM", "SIGINT"]}
   */
  signals?: readonly StopSignal[];
  /**
   * Milliseconds from the notice to the exit: when the drain is not done by then, the process
   * exits anyway with the notice's status, keeping the newest committed checkpoint (every commit
   * is atomic). `Infinity` waits as long as the drain takes.
   *
   * @default {25000}
   */
  gracePeriod?: number;
  /**
   * At most how many milliseconds {@linkcode Preemption.poll} lets a loop run without letting
   * the event loop turn, where signals and page events are delivered. `0` turns it at every
   * call.
   *
   * @default {50}
   */
  pollInterval?: number;
  /**
   * What a second signal does while the job is saving: `"exit"` stops at once with the status
   * (what a second Ctrl-C means; the last commit stays intact, the save in flight is dropped),
   * `"ignore"` lets the save finish.
   *
   * @default {"exit"}
   */
  secondSignal?: "exit" | "ignore";
  /**
   * Whether the processes that started this one vanishing (such as `npx`, whose shell drops the
   * SIGTERM it was sent) counts as a SIGTERM: see `onOrphaned` in `src/runtime/signals.ts`.
   *
   * @default {true}
   */
  watchParent?: boolean;
  /**
   * In a browser, whether hiding the page (`visibilitychange` to hidden, `pagehide`) is a notice.
   * A page is not ended by ckpt: {@linkcode Preemption.stop} drains and resolves, and
   * {@linkcode Preemption.reset} takes the next notice.
   *
   * @default {true}
   */
  pageHidden?: boolean;
  /**
   * Called once per notice, as it arrives (from the signal handler: keep it short).
   *
   * @default {undefined}
   */
  onNotice?: (notice: PreemptionNotice) => void;
  /**
   * Where messages go (the grace period running out, a second signal, a drain that failed).
   *
   * @default {console.error}
   */
  log?: (message: string) => void;
}

const PREEMPTION_OPTION_NAMES = optionNames<PreemptionOptions>()([
  "signals",
  "gracePeriod",
  "pollInterval",
  "secondSignal",
  "watchParent",
  "pageHidden",
  "onNotice",
  "log",
]);

/** Why the job should stop. */
export interface PreemptionNotice {
  /** The signal, `"SIGTERM"` for an orphaned process, or `"pagehide"` / `"visibilitychange"` in a page. */
  reason: StopSignal | "pagehide" | "visibilitychange";
  /** The exit status a process stopped for it reports (128 + the signal's number; 0 in a page). */
  status: number;
  /** When it arrived (`performance.now()`). */
  at: number;
}

/** Anything {@linkcode Preemption.stop} drains: a writer or a manager. */
export interface Drainable {
  /** Waits for everything queued to be durable (what a page does: it goes on afterwards). */
  flush(): Promise<void>;
  /** Waits for everything queued, makes it durable, releases what it holds (what a process does). */
  close(): Promise<void>;
}

/**
 * Listens for the signals that end a job and tells a training loop, at a step boundary, that it
 * should save now and stop. Saving happens in the loop, with the state of a whole step, never in
 * the signal handler; {@linkcode Preemption.stop} then drains the writers and the manager in the
 * order given (so a writer's queued saves reach the manager before it closes and releases its
 * lock) and exits with 143 (SIGTERM) or 130 (SIGINT). If the drain outlasts the grace period, or
 * a second signal comes (with `secondSignal: "exit"`), it exits at once: commits are atomic, so
 * the newest committed checkpoint is intact and the next run resumes from it.
 *
 * @example
 * ```ts
 * import { CheckpointManager, Preemption } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const dir = await Deno.makeTempDir();
 * const manager = await CheckpointManager.open(dir, { maxToKeep: 2 });
 * using preemption = Preemption.listen();
 * const tensors = [{ name: "w", dtype: "float32" as const, shape: [1], data: new Float32Array([0]) }];
 * for (let step = 1; step <= 100; step++) {
 *   tensors[0]!.data[0] = step; // a training step
 *   if (step === 42) preemption.notify("SIGTERM"); // what `kill <pid>` does, here by hand
 *   if (step % 50 === 0 || preemption.reached(step)) {
 *     await manager.save({ metadata: { step }, tensors });
 *     if (preemption.reached(step)) break; // a real loop calls `await preemption.stop([manager])` here
 *   }
 * }
 * assert.equal(preemption.step, 42);
 * assert.equal(preemption.notice?.status, 143);
 * await manager.close();
 * assert.deepEqual((await CheckpointManager.open(dir, { readOnly: true }).then((m) => m.list())).map((e) => e.step), [42]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class Preemption implements Disposable {
  #notice: PreemptionNotice | undefined;
  #step: number | undefined;
  #stopping = false;
  #options: Required<Omit<PreemptionOptions, "onNotice">> & Pick<PreemptionOptions, "onNotice">;
  #unlisten: (() => void)[] = [];
  #deadline: ReturnType<typeof setTimeout> | undefined;
  /** When {@linkcode Preemption.poll} last let the event loop turn. */
  #turned = performance.now();

  private constructor(options: PreemptionOptions) {
    if (typeof options !== "object" || options === null) throw new TypeError("Invalid options: expected an object");
    checkOptionNames(options, PREEMPTION_OPTION_NAMES, "Cannot listen for preemption");
    const signals = options.signals ?? DEFAULT_PREEMPTION_SIGNALS;
    if (!Array.isArray(signals)) throw new TypeError("Invalid option signals: expected an array of signal names");
    const gracePeriod = options.gracePeriod ?? DEFAULT_GRACE_PERIOD;
    if (typeof gracePeriod !== "number" || !(gracePeriod >= 0)) {
      throw new RangeError(`Invalid option gracePeriod: ${gracePeriod}, expected a non-negative number of ms`);
    }
    const pollInterval = options.pollInterval ?? DEFAULT_POLL_INTERVAL;
    if (typeof pollInterval !== "number" || !(pollInterval >= 0)) {
      throw new RangeError(`Invalid option pollInterval: ${pollInterval}, expected a non-negative number of ms`);
    }
    const secondSignal = options.secondSignal ?? "exit";
    if (secondSignal !== "exit" && secondSignal !== "ignore") {
      throw new TypeError(`Invalid option secondSignal: ${JSON.stringify(secondSignal)}, expected "exit" or "ignore"`);
    }
    for (const name of ["watchParent", "pageHidden"] as const) {
      if (options[name] !== undefined && typeof options[name] !== "boolean") {
        throw new TypeError(`Invalid option ${name}: ${String(options[name])}, expected a boolean`);
      }
    }
    this.#options = {
      signals,
      gracePeriod,
      pollInterval,
      secondSignal,
      watchParent: options.watchParent ?? true,
      pageHidden: options.pageHidden ?? true,
      onNotice: options.onNotice,
      log: options.log ?? ((m) => console.error(m)),
    };
  }

  /**
   * Starts listening (see {@linkcode PreemptionOptions}); `dispose()` or `using` stops.
   *
   * @param options Signals, grace period, what a second signal does.
   * @returns A listening `Preemption`.
   */
  static listen(options: PreemptionOptions = {}): Preemption {
    const p = new Preemption(options);
    try {
      for (const signal of p.#options.signals) p.#unlisten.push(onSignal(signal, (s) => p.notify(s)));
      if (p.#options.watchParent && signalsSupported()) {
        p.#unlisten.push(onOrphaned(() => p.notify("SIGTERM")));
      }
      if (p.#options.pageHidden) p.#unlisten.push(onPageHidden((why) => p.notify(why)));
    } catch (e) {
      p.dispose();
      throw e;
    }
    return p;
  }

  /** The notice, once one has arrived. */
  get notice(): PreemptionNotice | undefined {
    return this.#notice;
  }

  /** The step {@linkcode Preemption.reached} first answered `true` for. */
  get step(): number | undefined {
    return this.#step;
  }

  /**
   * Whether the job should save `step` now and stop: `true` from the first step boundary after a
   * notice on (Orbax's `reached_preemption(step)`). The first step it answers `true` for is kept
   * as {@linkcode Preemption.step}. It sees the notices delivered so far; in a loop that may
   * never let the event loop turn, ask {@linkcode Preemption.poll} instead.
   *
   * @param step The step the loop has just finished.
   */
  reached(step?: number): boolean {
    if (!this.#notice) return false;
    if (this.#step === undefined && step !== undefined) this.#step = step;
    return true;
  }

  /**
   * {@linkcode Preemption.reached}, after letting the event loop turn when it has not for
   * {@linkcode PreemptionOptions.pollInterval} ms: the check for a training loop. Signals are
   * delivered by the event loop, and a loop that only awaits settled promises never gives it a
   * turn: `await model.trainOnBatch()` on tfjs's cpu backend is one, and there `reached()` alone
   * never sees a SIGTERM. Between turns `poll()` costs a clock read; a turn costs about 40 µs.
   *
   * @example
   * ```ts
   * import { Preemption } from "./preemption.ts";
   * import assert from "node:assert/strict";
   * using preemption = Preemption.listen({ pollInterval: 0, signals: [], watchParent: false });
   * setTimeout(() => preemption.notify("SIGTERM"), 0); // as a signal's listener would, from the event loop
   * let step = 0;
   * while (!(await preemption.poll(step))) step++; // no timer in the loop: poll() lets the notice in
   * assert.equal(preemption.step, step);
   * preemption.reset(); // (an example must not exit)
   * ```
   *
   * @param step The step the loop has just finished.
   */
  async poll(step?: number): Promise<boolean> {
    if (!this.#notice && performance.now() - this.#turned >= this.#options.pollInterval) {
      await nextTurn();
      this.#turned = performance.now();
    }
    return this.reached(step);
  }

  /**
   * Delivers a notice as if `reason` had arrived (what the listeners call): the first starts the
   * grace period; a second one while {@linkcode Preemption.stop} drains exits at once (with
   * `secondSignal: "exit"`).
   *
   * @param reason A signal name, or the page event in a browser.
   */
  notify(reason: PreemptionNotice["reason"]): void {
    if (this.#notice) {
      if (!signalsSupported() || reason === "pagehide" || reason === "visibilitychange") return;
      if (this.#options.secondSignal === "ignore") {
        this.#options.log(`${reason} again: still saving (send SIGKILL to stop without saving)`);
        return;
      }
      this.#options.log(`${reason} again: exiting now; the newest committed checkpoint is intact`);
      exitProcess(this.#notice.status);
    }
    const status = reason === "pagehide" || reason === "visibilitychange" ? 0 : exitStatus(reason);
    this.#notice = { reason, status, at: performance.now() };
    if (signalsSupported() && Number.isFinite(this.#options.gracePeriod)) {
      this.#deadline = setTimeout(() => {
        this.#options.log(
          `${reason}: the grace period of ${this.#options.gracePeriod} ms ran out before the save was durable; exiting with the newest committed checkpoint`,
        );
        exitProcess(status);
      }, this.#options.gracePeriod);
      unref(this.#deadline);
    }
    this.#options.onNotice?.(this.#notice);
  }

  /**
   * Drains `savers` in order (each one's `close()`: a writer waits for its queued saves, a
   * manager for its commits, then releases its lock), stops listening, and ends the process
   * with the notice's status (143 for SIGTERM, 130 for SIGINT). A drain that fails is logged and
   * ends it with status 1. In a page (no process), it flushes them instead (they stay open) and
   * resolves, ready for the next notice.
   *
   * @param savers Writers first, then the manager.
   * @param options `onDrained(status)` runs once everything is durable, before the exit.
   */
  async stop(savers: readonly Drainable[], options: { onDrained?: (status: number) => void } = {}): Promise<void> {
    this.#stopping = true;
    let status = this.#notice?.status ?? 0;
    const page = !signalsSupported();
    for (const saver of savers) {
      try {
        await (page ? saver.flush() : saver.close());
      } catch (e) {
        this.#options.log(`cannot save before exiting: ${(e as Error)?.message ?? e}`);
        status = 1;
      }
    }
    options.onDrained?.(status);
    if (page) return this.reset();
    this.dispose();
    exitProcess(status);
  }

  /** Forgets the notice (and its step), so the next one is taken: for a page shown again. */
  reset(): void {
    clearTimeout(this.#deadline);
    this.#notice = undefined;
    this.#step = undefined;
    this.#stopping = false;
  }

  /** Whether {@linkcode Preemption.stop} is draining. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** Stops listening; the runtime's default actions are back. */
  dispose(): void {
    clearTimeout(this.#deadline);
    for (const stop of this.#unlisten.splice(0)) stop();
  }

  /** Same as {@linkcode Preemption.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
