/**
 * When to save: every N steps, at most every N seconds of wall-clock time (Orbax's continuous
 * checkpointing), at the last step, and at a preemption. A loop asks
 * {@linkcode SavePolicy.shouldSave} at each step boundary instead of re-implementing it.
 *
 * @module
 */

/** Options for {@linkcode SavePolicy}. */
export interface SavePolicyOptions {
  /**
   * Save steps that are multiples of this.
   *
   * @default {undefined} (no step interval)
   */
  everySteps?: number;
  /**
   * Save when at least this many seconds of wall-clock time have passed since the last save (or
   * since the policy was made).
   *
   * @default {undefined} (no time interval)
   */
  everySeconds?: number;
  /**
   * The last step of the run: always saved.
   *
   * @default {undefined}
   */
  lastStep?: number;
  /**
   * Something that knows of a preemption (a `Preemption`): its `reached(step)` makes that step
   * a save.
   *
   * @default {undefined}
   */
  preemption?: { reached(step?: number): boolean };
  /**
   * The clock, in ms (for tests).
   *
   * @default {() => performance.now()}
   */
  now?: () => number;
}

/** Why {@linkcode SavePolicy.shouldSave} said yes. */
export type SaveReason = "steps" | "time" | "last" | "preemption";

/**
 * Decides at each step boundary whether to save.
 *
 * @example
 * ```ts
 * import { SavePolicy } from "./save_policy.ts";
 * import assert from "node:assert/strict";
 *
 * let now = 0;
 * const policy = new SavePolicy({ everySteps: 100, everySeconds: 60, lastStep: 250, now: () => now });
 * assert.equal(policy.shouldSave(1), undefined);
 * now = 61_000; // a minute later: time to save, whatever the step
 * assert.equal(policy.shouldSave(37), "time");
 * assert.equal(policy.shouldSave(38), undefined); // the clock restarted at step 37's save
 * assert.equal(policy.shouldSave(100), "steps");
 * assert.equal(policy.shouldSave(250), "last");
 * ```
 */
export class SavePolicy {
  #everySteps: number | undefined;
  #everyMs: number | undefined;
  #lastStep: number | undefined;
  #preemption: SavePolicyOptions["preemption"];
  #now: () => number;
  #lastSave: number;

  /**
   * Makes a policy; the time interval starts now.
   *
   * @param options See {@linkcode SavePolicyOptions}.
   */
  constructor(options: SavePolicyOptions = {}) {
    if (typeof options !== "object" || options === null) throw new TypeError("Invalid options: expected an object");
    const { everySteps, everySeconds, lastStep } = options;
    if (everySteps !== undefined && !(Number.isSafeInteger(everySteps) && everySteps >= 1)) {
      throw new RangeError(`Invalid option everySteps: ${everySteps}, expected a positive integer`);
    }
    if (everySeconds !== undefined && !(typeof everySeconds === "number" && everySeconds > 0)) {
      throw new RangeError(`Invalid option everySeconds: ${everySeconds}, expected a positive number`);
    }
    if (lastStep !== undefined && !(Number.isSafeInteger(lastStep) && lastStep >= 0)) {
      throw new RangeError(`Invalid option lastStep: ${lastStep}, expected a non-negative integer`);
    }
    if (options.preemption !== undefined && typeof options.preemption?.reached !== "function") {
      throw new TypeError("Invalid option preemption: expected something with reached(step), such as a Preemption");
    }
    this.#everySteps = everySteps;
    this.#everyMs = everySeconds === undefined ? undefined : everySeconds * 1000;
    this.#lastStep = lastStep;
    this.#preemption = options.preemption;
    this.#now = options.now ?? (() => performance.now());
    this.#lastSave = this.#now();
  }

  /**
   * Whether to save `step`, and why (`undefined`: no). A yes restarts the time interval, on the
   * assumption that the loop saves.
   *
   * @param step The step the loop has just finished.
   */
  shouldSave(step: number): SaveReason | undefined {
    const reason: SaveReason | undefined = this.#preemption?.reached(step)
      ? "preemption"
      : step === this.#lastStep
      ? "last"
      : this.#everySteps !== undefined && step % this.#everySteps === 0
      ? "steps"
      : this.#everyMs !== undefined && this.#now() - this.#lastSave >= this.#everyMs
      ? "time"
      : undefined;
    if (reason !== undefined) this.#lastSave = this.#now();
    return reason;
  }
}
