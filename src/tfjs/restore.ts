/**
 * Loading a checkpoint back into a TensorFlow.js model and optimizer, with a report.
 *
 * @module
 */
import { checkOptionNames, optionNames } from "../format/_options.ts";
import { type Optimizer, type Tensor, tensor, tidy, type Variable } from "@tensorflow/tfjs-core";
import type { CheckpointInput, TensorInput } from "../format/types.ts";
import { validateTensor } from "../format/dtype.ts";
import {
  isLayersModel,
  ITER_NAME,
  modelSlots,
  type NamedTensor,
  OPTIMIZER_GROUP,
  OPTIMIZER_PREFIX,
  optimizerTensorName,
  type Slot,
  splitByPrefix,
  type TfModel,
} from "./_slots.ts";

/** A tensor's shape and dtype, as compared by {@linkcode restore}. */
export interface TensorSpec {
  /** Dimensions. */
  shape: number[];
  /** Element type: a checkpoint dtype, or the tfjs dtype of the target. */
  dtype: string;
}

/** A tensor present on both sides whose shape or dtype differs. */
export interface Mismatch {
  /** Checkpoint name. */
  name: string;
  /** What the model or optimizer has. */
  expected: TensorSpec;
  /** What the checkpoint has. */
  found: TensorSpec;
}

/** What {@linkcode restore} did, by checkpoint name. A clean report has only `loaded` entries. */
export interface RestoreReport {
  /** Tensors written into the model or optimizer. */
  loaded: string[];
  /** Names the model or optimizer has and the checkpoint lacks. */
  missing: string[];
  /** Names the checkpoint has and the model or optimizer lacks. */
  unexpected: string[];
  /** Names on both sides whose shape or dtype differ. */
  mismatched: Mismatch[];
}

/** Options for {@linkcode restore}. */
export interface RestoreOptions {
  /** What to load into: a `tf.LayersModel`, an array of `tf.Variable`, or an object of named `tf.Variable`. */
  model: TfModel;
  /**
   * An optimizer to load the checkpoint's `"optimizer"` group into with `setWeights()`. Without
   * it that group is ignored (neither loaded nor reported).
   */
  optimizer?: Optimizer;
  /**
   * When true, any missing, unexpected or mismatched tensor throws a
   * {@linkcode CheckpointMismatchError} before anything is changed. When false, what matches is
   * loaded and the rest reported; optimizer state is still all or nothing (tfjs optimizers keep
   * it by position), so it is skipped unless all of it matches.
   *
   * @default {true}
   */
  strict?: boolean;
  /**
   * How to rebuild tfjs Adam's bias-correction powers (`beta1^t`, `beta2^t`), which Adam keeps
   * outside `getWeights()` as running float32 products, so no checkpoint holds them:
   * - `"replay"`: redoes tfjs's own running product, `Math.fround(p * beta)` once per step of
   *   the counter (the product of two float32 values is exact in a double, so one rounding gives
   *   tfjs's float32 product), and assigns the result to Adam's power variables: the resumed run
   *   is bit for bit the uninterrupted one on the cpu, wasm, tensorflow and webgpu backends, at
   *   about 90 ns per step of the counter (0.9 s per 10 million). Those variables are fields of
   *   tfjs-core's `AdamOptimizer` (`accBeta1`, `accBeta2`), not its public API; where an Adam
   *   lacks them, the replay goes through the public API instead: the counter set to 0, then
   *   `applyGradients([])` t times (with no gradients it only advances the counter and the
   *   powers), bit for bit on cpu, wasm and tensorflow but not on webgpu (where
   *   `pow(0.999, 1)` is not exactly 0.999), at about 70 µs per step on cpu.
   * - `"recompute"`: what tfjs's `setWeights()` does, `pow(beta, t + 1)`, at no cost. It can
   *   differ from the running product in the last bit, so the steps after a restore start about
   *   1e-7 (relative) away from an uninterrupted run, a gap that training then widens.
   *
   * Other optimizers keep no such state, and ignore this.
   *
   * @default {"replay"}
   */
  adamPowers?: "recompute" | "replay";
}

function formatNames(names: string[]): string {
  const shown = names.slice(0, 5).map((n) => JSON.stringify(n)).join(", ");
  return names.length > 5 ? `${shown} and ${names.length - 5} more` : shown;
}

function formatSpec(s: TensorSpec): string {
  return `${s.dtype} [${s.shape.join(", ")}]`;
}

/**
 * Thrown by a strict {@linkcode restore} when the checkpoint does not fit the model or optimizer;
 * nothing was changed. `report` says what differs (its `loaded` list is empty).
 *
 * @example
 * ```ts
 * import { CheckpointMismatchError } from "./restore.ts";
 * import assert from "node:assert/strict";
 * const e = new CheckpointMismatchError({ loaded: [], missing: ["fc/bias"], unexpected: [], mismatched: [] });
 * assert.match(e.message, /1 missing \("fc\/bias"\)/);
 * ```
 */
export class CheckpointMismatchError extends Error {
  /** What was missing, unexpected or mismatched. */
  readonly report: RestoreReport;

  /**
   * Makes the error from the report of a refused restore.
   *
   * @param report The report of the refused restore.
   */
  constructor(report: RestoreReport) {
    const parts: string[] = [];
    if (report.missing.length) parts.push(`${report.missing.length} missing (${formatNames(report.missing)})`);
    if (report.unexpected.length) {
      parts.push(`${report.unexpected.length} unexpected (${formatNames(report.unexpected)})`);
    }
    if (report.mismatched.length) {
      const shown = report.mismatched.slice(0, 5).map((m) =>
        `${JSON.stringify(m.name)}: expected ${formatSpec(m.expected)}, found ${formatSpec(m.found)}`
      ).join("; ");
      const more = report.mismatched.length > 5 ? ` and ${report.mismatched.length - 5} more` : "";
      parts.push(`${report.mismatched.length} mismatched (${shown}${more})`);
    }
    super(`Cannot restore checkpoint: ${parts.join(", ")}`);
    this.name = "CheckpointMismatchError";
    this.report = report;
  }
}

const ACTION = "restore";

function specOf(t: { shape: readonly number[]; dtype: string }): TensorSpec {
  return { shape: [...t.shape], dtype: t.dtype };
}

function sameSpec(target: { shape: readonly number[]; dtype: string }, found: TensorInput): boolean {
  return target.dtype === found.dtype && target.shape.length === found.shape.length &&
    target.shape.every((d, i) => d === found.shape[i]);
}

/** Whether `optimizer` is tfjs-core's Adam (its serialization class name is "Adam"). */
function isAdam(optimizer: Optimizer): boolean {
  return typeof optimizer.getClassName === "function" && optimizer.getClassName() === "Adam";
}

/** tfjs-core Adam's running powers: `accBeta1 = beta1^(t+1)` kept as a float32 product, with its betas. */
interface AdamPowers {
  beta1: number;
  beta2: number;
  accBeta1: Variable;
  accBeta2: Variable;
}

/**
 * Adam's power variables where this tfjs-core keeps them (fields of `AdamOptimizer`, tfjs-core
 * 1.x to 4.x), or undefined, and then {@linkcode restore} replays `applyGradients([])` instead.
 */
function adamPowerVariables(optimizer: Optimizer): AdamPowers | undefined {
  const o = optimizer as unknown as Partial<AdamPowers>;
  const scalarVariable = (v: unknown) =>
    v !== undefined && isVariable(v as Tensor) && (v as Variable).dtype === "float32" && (v as Variable).rank === 0;
  const ok = typeof o.beta1 === "number" && typeof o.beta2 === "number" && scalarVariable(o.accBeta1) &&
    scalarVariable(o.accBeta2);
  return ok ? o as AdamPowers : undefined;
}

/**
 * Sets Adam's powers to what `iterations` steps of training leave in them: tfjs starts each at
 * `beta` (as float32) and multiplies it by `beta` in float32 at every step, which is
 * `Math.fround(p * beta)` here (the product of two float32 values is exact in a double, so one
 * rounding gives the float32 product), bit for bit, at a few nanoseconds per step.
 */
function setRunningPowers(powers: AdamPowers, iterations: number): void {
  const [b1, b2] = [Math.fround(powers.beta1), Math.fround(powers.beta2)];
  let [p1, p2] = [b1, b2];
  for (let i = 0; i < iterations; i++) [p1, p2] = [Math.fround(p1 * b1), Math.fround(p2 * b2)];
  tidy(() => {
    powers.accBeta1.assign(tensor(p1, [], "float32"));
    powers.accBeta2.assign(tensor(p2, [], "float32"));
  });
}

function isVariable(t: Tensor): t is Variable {
  return typeof (t as Variable).assign === "function";
}

/**
 * A tfjs tensor with a copy of a checkpoint tensor's data: the cpu backend keeps the array it is
 * given, and the checkpoint's may be a staging buffer that the next snapshot overwrites.
 * Only float32, int32 and bool get here (anything else fails the spec comparison first).
 */
function toTensor(t: TensorInput): Tensor {
  return tensor((t.data as Float32Array | Int32Array | Uint8Array).slice(), [...t.shape], t.dtype as "float32");
}

interface Plan {
  variable: Variable;
  source: TensorInput;
}

interface OptimizerPlan {
  /** What goes to `setWeights`, in order: the counter, then the state named as this process names it. */
  weights: { name: string; source: TensorInput }[];
  names: string[];
}

/**
 * The optimizer half of a restore. Checks every `"optimizer"` tensor against the model it
 * belongs to and, for a layers model, that each block of state (Adam's `m`s, then its `v`s)
 * covers the trainable weights in the order tfjs trains them; reorders within a block if needed.
 */
async function planOptimizer(
  optimizer: Optimizer,
  model: TfModel,
  slots: Slot[],
  entries: TensorInput[],
  report: RestoreReport,
): Promise<OptimizerPlan | undefined> {
  const before = report.missing.length + report.unexpected.length + report.mismatched.length;
  const byStable = new Map<string, Slot>();
  const registeredToStable = new Map<string, string>();
  for (const s of slots) {
    if (s.registeredName === undefined) continue;
    byStable.set(s.name, s);
    registeredToStable.set(s.registeredName, s.name);
  }
  const stableNames = new Map([...byStable.keys()].map((n) => [n, n]));
  const iter = entries.find((e) => e.name === ITER_NAME);
  if (!iter) report.missing.push(ITER_NAME);
  else if (iter.dtype !== "int32" || iter.shape.length !== 0) {
    report.mismatched.push({ name: ITER_NAME, expected: { shape: [], dtype: "int32" }, found: specOf(iter) });
  }
  // State per variable, in blocks of one slot kind ("/m", "/v"...), as getWeights listed it.
  const blocks: { suffix: string; items: { slot: Slot; source: TensorInput }[] }[] = [];
  for (const e of entries) {
    if (e === iter) continue;
    const split = e.name.startsWith(OPTIMIZER_PREFIX)
      ? splitByPrefix(e.name.slice(OPTIMIZER_PREFIX.length), stableNames)
      : undefined;
    const slot = split && byStable.get(split[0]);
    if (!split || !slot || !slot.trainable) {
      report.unexpected.push(e.name);
      continue;
    }
    if (!sameSpec(slot.tensor, e)) {
      report.mismatched.push({ name: e.name, expected: specOf(slot.tensor), found: specOf(e) });
      continue;
    }
    const last = blocks[blocks.length - 1];
    if (last && last.suffix === split[1] && !last.items.some((x) => x.slot === slot)) {
      last.items.push({ slot, source: e });
    } else blocks.push({ suffix: split[1], items: [{ slot, source: e }] });
  }
  if (isLayersModel(model)) {
    // tfjs-layers trains model.trainableWeights in order; index i of each block is weight i.
    const trainable = slots.filter((s) => s.trainable);
    for (const b of blocks) {
      for (const s of trainable) {
        if (!b.items.some((x) => x.slot === s)) report.missing.push(`${OPTIMIZER_PREFIX}${s.name}${b.suffix}`);
      }
      b.items.sort((x, y) => trainable.indexOf(x.slot) - trainable.indexOf(y.slot));
    }
  }
  // An optimizer that already has state must get the same state back, no less.
  let current: NamedTensor[] = [];
  try {
    current = await optimizer.getWeights();
  } catch (e) {
    throw new TypeError(`Cannot restore optimizer: ${(e as Error)?.message ?? e}`, { cause: e });
  }
  for (const w of current) if (!isVariable(w.tensor)) w.tensor.dispose(); // the counter, made for us
  const have = new Set(entries.map((e) => e.name));
  current.forEach((w, i) => {
    const name = optimizerTensorName(w.name, i, registeredToStable);
    if (!have.has(name) && !report.missing.includes(name)) report.missing.push(name);
  });
  if (report.missing.length + report.unexpected.length + report.mismatched.length !== before || !iter) return;
  const weights = [{ name: "iter", source: iter }];
  for (const b of blocks) {
    for (const x of b.items) weights.push({ name: `${x.slot.registeredName}${b.suffix}`, source: x.source });
  }
  return { weights, names: [ITER_NAME, ...blocks.flatMap((b) => b.items.map((x) => x.source.name))] };
}

/** Default of {@linkcode RestoreOptions.adamPowers}: replay the powers, for an exact resume. */
export const DEFAULT_ADAM_POWERS: "recompute" | "replay" = "replay";

const RESTORE_OPTION_NAMES = optionNames<RestoreOptions>()(["model", "optimizer", "strict", "adamPowers"]);

/**
 * Loads a checkpoint (from `snapshot`, `loadCheckpoint` or a `CheckpointManager`) into a model
 * and, optionally, its optimizer, and reports what matched by name.
 *
 * Model weights are matched by the names {@linkcode snapshot} gives them and written with
 * `assign` (bypassing layer constraints, so the values are exactly the saved ones). Optimizer
 * state goes through the optimizer's public `setWeights()`, which rebuilds it in the order
 * tfjs uses. After a restore the next training steps match an uninterrupted run bit for bit
 * for SGD, momentum, RMSProp, Adagrad, Adadelta and Adam, on cpu, wasm, tensorflow and webgpu:
 * tfjs keeps Adam's `beta1^t` and `beta2^t` as running float32 products outside `getWeights()`,
 * and `restore` redoes that product (see {@linkcode RestoreOptions.adamPowers};
 * `adamPowers: "recompute"` leaves tfjs's `pow(beta, t + 1)`, about 1e-7 away).
 *
 * Strict mode (the default) throws a {@linkcode CheckpointMismatchError} before changing
 * anything when the report is not clean. A checkpoint tensor whose data does not fit its own
 * shape and dtype is a `TypeError` or `RangeError` in any mode.
 *
 * @example
 * ```ts
 * import * as tf from "@tensorflow/tfjs";
 * import { restore, snapshot } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * tf.enableProdMode(); // Deno only looks like Node.js: no "install tfjs-node" banner
 * await tf.setBackend("cpu");
 * const build = () => tf.sequential({ layers: [tf.layers.dense({ name: "restore_fc", units: 1, inputShape: [2] })] });
 * const trained = build();
 * const checkpoint = await snapshot({ model: trained, step: 7 });
 *
 * const fresh = build();
 * const report = await restore(checkpoint, { model: fresh });
 * assert.deepEqual(report.loaded, ["restore_fc/kernel", "restore_fc/bias"]);
 * assert.deepEqual(await fresh.getWeights()[0]!.data(), await trained.getWeights()[0]!.data());
 * trained.dispose();
 * fresh.dispose();
 * ```
 */
export async function restore(checkpoint: CheckpointInput, options: RestoreOptions): Promise<RestoreReport> {
  if (typeof checkpoint !== "object" || checkpoint === null || !Array.isArray(checkpoint.tensors)) {
    throw new TypeError("Cannot restore: checkpoint must have a tensors array (load it whole first)");
  }
  if (typeof options !== "object" || options === null) throw new TypeError("Cannot restore: options are required");
  checkOptionNames(options, RESTORE_OPTION_NAMES, "Cannot restore");
  const strict = options.strict ?? true;
  if (typeof strict !== "boolean") throw new TypeError("Cannot restore: strict must be a boolean");
  const adamPowers = options.adamPowers ?? DEFAULT_ADAM_POWERS;
  if (adamPowers !== "recompute" && adamPowers !== "replay") {
    throw new TypeError(
      `Cannot restore: adamPowers must be "recompute" or "replay", got ${JSON.stringify(adamPowers)}`,
    );
  }
  const { optimizer } = options;
  if (optimizer !== undefined && (typeof optimizer?.setWeights !== "function" || !optimizer.getWeights)) {
    throw new TypeError("Cannot restore: optimizer has no setWeights() method");
  }
  const slots = modelSlots(options.model, ACTION);
  const weights = new Map<string, TensorInput>();
  const optimizerEntries: TensorInput[] = [];
  const report: RestoreReport = { loaded: [], missing: [], unexpected: [], mismatched: [] };
  for (const t of checkpoint.tensors as TensorInput[]) {
    validateTensor(t);
    if ((t.group ?? "params") === OPTIMIZER_GROUP) optimizerEntries.push(t);
    else if (weights.has(t.name)) throw new TypeError(`Cannot restore: checkpoint has two tensors named "${t.name}"`);
    else weights.set(t.name, t);
  }
  const plans: Plan[] = [];
  for (const s of slots) {
    const found = weights.get(s.name);
    weights.delete(s.name);
    if (!found) report.missing.push(s.name);
    else if (!sameSpec(s.tensor, found)) {
      report.mismatched.push({ name: s.name, expected: specOf(s.tensor), found: specOf(found) });
    } else if (!isVariable(s.tensor)) {
      throw new TypeError(`Cannot restore: model[${JSON.stringify(s.name)}] is a tf.Tensor, not a tf.Variable`);
    } else plans.push({ variable: s.tensor, source: found });
  }
  report.unexpected.push(...weights.keys());
  const optimizerPlan = optimizer
    ? await planOptimizer(optimizer, options.model, slots, optimizerEntries, report)
    : undefined;
  if (strict && (report.missing.length || report.unexpected.length || report.mismatched.length)) {
    throw new CheckpointMismatchError(report);
  }
  tidy(() => {
    for (const p of plans) p.variable.assign(toTensor(p.source));
  });
  report.loaded.push(...plans.map((p) => p.source.name));
  if (optimizer && optimizerPlan) {
    const before = await optimizer.getWeights();
    const named = optimizerPlan.weights.map((w) => ({
      name: w.name,
      tensor: toTensor(w.source),
    }));
    const iterations = (optimizerPlan.weights[0]!.source.data as Int32Array)[0]!;
    const powers = adamPowers === "replay" && isAdam(optimizer) ? adamPowerVariables(optimizer) : undefined;
    const replay = adamPowers === "replay" && isAdam(optimizer) && !powers;
    if (replay) {
      named[0]!.tensor.dispose();
      named[0]!.tensor = tensor(0, [], "int32");
    }
    try {
      await optimizer.setWeights(named);
    } finally {
      for (const n of named) n.tensor.dispose();
    }
    if (powers) setRunningPowers(powers, iterations);
    // With no gradients, Adam's applyGradients() only multiplies the powers by beta and counts.
    if (replay) { for (let i = 0; i < iterations; i++) optimizer.applyGradients([]); }
    // setWeights replaces the state variables without disposing the old ones.
    const after = new Set((await optimizer.getWeights()).map((w) => w.tensor));
    for (const w of before) if (!after.has(w.tensor) && isVariable(w.tensor)) w.tensor.dispose();
    for (const w of before) if (!isVariable(w.tensor)) w.tensor.dispose();
    for (const w of after) if (!isVariable(w)) w.dispose();
    report.loaded.push(...optimizerPlan.names);
  }
  return report;
}
