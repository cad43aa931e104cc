/**
 * What a model holds, as named slots: the one place that decides the stable names under which
 * `snapshot` writes and `restore` reads a `tf.LayersModel`, a `tf.Variable[]` or a named tensor
 * map, and how optimizer state names are tied to those names.
 *
 * Only tfjs-core's public API and duck typing are used here (no `instanceof`), so models and
 * tensors from any tfjs build that shares tfjs-core's API (tfjs-node, tfjs-node-gpu) fit.
 *
 * @module
 */
import type { NamedTensorMap, Tensor, Variable } from "@tensorflow/tfjs-core";
import type { LayersModel } from "@tensorflow/tfjs-layers";
import type { DType } from "../format/types.ts";
import { checkTensorName } from "../format/dtype.ts";

/** What `snapshot` reads and `restore` writes: a layers model, variables, or tensors by name. */
export type TfModel = LayersModel | Variable[] | NamedTensorMap;

/** One entry of `optimizer.getWeights()` (tfjs-core does not export the type). */
export interface NamedTensor {
  name: string;
  tensor: Tensor;
}

/** The group of trainable weights. */
export const PARAMS_GROUP = "params";
/** The group of non-trainable weights (batch-norm moving statistics and the like). */
export const BUFFERS_GROUP = "buffers";
/** The group of optimizer state. */
export const OPTIMIZER_GROUP = "optimizer";
/** Prefix of every optimizer tensor name, so it never collides with a model weight. */
export const OPTIMIZER_PREFIX = "optimizer/";
/** The checkpoint name of the optimizer's iteration counter. */
export const ITER_NAME = "optimizer/iter";

/** One named tensor of a model. */
export interface Slot {
  /** Stable name in the checkpoint. */
  readonly name: string;
  /** `"params"` for trainable weights, `"buffers"` for the rest. */
  readonly group: string;
  /** The tensor or variable holding the value now. */
  readonly tensor: Tensor;
  /** The name tfjs registered the variable under (what optimizers key their state by). */
  readonly registeredName: string | undefined;
  /** Whether an optimizer updates it. */
  readonly trainable: boolean;
}

interface LayerVariableLike {
  readonly originalName: string;
  readonly trainable: boolean;
  read(): Variable;
}

function isVariable(t: unknown): t is Variable {
  return typeof t === "object" && t !== null && typeof (t as Variable).assign === "function" &&
    typeof (t as Variable).name === "string" && "trainable" in t;
}

function isTensor(t: unknown): t is Tensor {
  return typeof t === "object" && t !== null && Array.isArray((t as Tensor).shape) &&
    typeof (t as Tensor).dtype === "string" && typeof (t as Tensor).data === "function" &&
    typeof (t as Tensor).clone === "function";
}

/** Whether `model` looks like a `tf.LayersModel` (or any tfjs-layers container). */
export function isLayersModel(model: unknown): model is LayersModel {
  if (typeof model !== "object" || model === null || Array.isArray(model)) return false;
  const m = model as { weights?: unknown; layers?: unknown };
  return Array.isArray(m.layers) && Array.isArray(m.weights) &&
    (m.weights as unknown[]).every((w) =>
      typeof (w as LayerVariableLike)?.read === "function" &&
      typeof (w as LayerVariableLike).originalName === "string"
    );
}

/**
 * The slots of a model, in a stable order: for a `LayersModel` its `weights` (trainable first,
 * as tfjs lists them) named by `originalName` (`"layer_name/kernel"`, the names tfjs's own
 * `model.save` writes); for a `Variable[]` each variable's `name`; for a map its keys.
 * Throws a `TypeError` naming the problem: a wrong kind of model, a bad or repeated name, a
 * disposed tensor.
 */
export function modelSlots(model: TfModel, action: string): Slot[] {
  const slots: Slot[] = [];
  if (isLayersModel(model)) {
    for (const w of model.weights as unknown as LayerVariableLike[]) {
      const v = w.read();
      slots.push({
        name: w.originalName,
        group: w.trainable ? PARAMS_GROUP : BUFFERS_GROUP,
        tensor: v,
        registeredName: v.name,
        trainable: w.trainable && v.trainable,
      });
    }
  } else if (Array.isArray(model)) {
    model.forEach((v, i) => {
      if (!isVariable(v)) throw new TypeError(`Cannot ${action}: model[${i}] is not a tf.Variable`);
      slots.push({
        name: v.name,
        group: v.trainable ? PARAMS_GROUP : BUFFERS_GROUP,
        tensor: v,
        registeredName: v.name,
        trainable: v.trainable,
      });
    });
  } else if (typeof model === "object" && model !== null && Object.getPrototypeOf(model) === Object.prototype) {
    for (const [name, t] of Object.entries(model)) {
      if (!isTensor(t)) throw new TypeError(`Cannot ${action}: model[${JSON.stringify(name)}] is not a tf.Tensor`);
      const variable = isVariable(t);
      slots.push({
        name,
        group: variable && !t.trainable ? BUFFERS_GROUP : PARAMS_GROUP,
        tensor: t,
        registeredName: variable ? t.name : undefined,
        trainable: variable ? t.trainable : false,
      });
    }
  } else {
    throw new TypeError(
      `Cannot ${action}: model must be a tf.LayersModel, an array of tf.Variable or an object of named tf.Tensor`,
    );
  }
  const seen = new Set<string>();
  for (const s of slots) {
    const bad = checkTensorName(s.name);
    if (bad) throw new TypeError(`Cannot ${action}: ${bad}`);
    if (s.name.startsWith(OPTIMIZER_PREFIX)) {
      throw new TypeError(
        `Cannot ${action}: weight name ${
          JSON.stringify(s.name)
        } starts with "${OPTIMIZER_PREFIX}", kept for optimizer state`,
      );
    }
    if (seen.has(s.name)) {
      throw new TypeError(
        `Cannot ${action}: two weights are named ${JSON.stringify(s.name)}; give the layers or variables unique names`,
      );
    }
    seen.add(s.name);
    if (s.tensor.isDisposed) throw new TypeError(`Cannot ${action}: weight ${JSON.stringify(s.name)} is disposed`);
  }
  return slots;
}

/** tfjs dtypes a checkpoint can hold, and their checkpoint dtype. */
const TF_DTYPES: Readonly<Record<string, DType>> = { float32: "float32", int32: "int32", bool: "bool" };

/** The checkpoint dtype of a tfjs dtype; a `TypeError` for `complex64` and `string`. */
export function checkpointDType(tfDtype: string, name: string, action: string): DType {
  const d = Object.hasOwn(TF_DTYPES, tfDtype) ? TF_DTYPES[tfDtype] : undefined;
  if (!d) {
    throw new TypeError(
      `Cannot ${action}: tensor ${
        JSON.stringify(name)
      } has dtype ${tfDtype}; only float32, int32 and bool are supported`,
    );
  }
  return d;
}

/**
 * The longest `prefix` of `name` that is a key of `names`, split at a `/`: tfjs optimizers name
 * their state `${variableName}/${slot}` (`dense/kernel/m`), and variable names contain `/` too.
 */
export function splitByPrefix(name: string, names: ReadonlyMap<string, string>): [string, string] | undefined {
  for (let i = name.lastIndexOf("/"); i > 0; i = name.lastIndexOf("/", i - 1)) {
    const mapped = names.get(name.slice(0, i));
    if (mapped !== undefined) return [mapped, name.slice(i)];
  }
  return undefined;
}

/**
 * The checkpoint name of one optimizer weight: `optimizer/iter` for the counter, and
 * `optimizer/<stable weight name>/<slot>` for per-variable state, so the name survives the
 * process-unique suffixes tfjs adds to variable names. State of a variable outside the model
 * keeps its tfjs name under `optimizer/`.
 */
export function optimizerTensorName(tfName: string, index: number, stableByRegistered: ReadonlyMap<string, string>) {
  if (index === 0 && tfName === "iter") return ITER_NAME;
  const split = splitByPrefix(tfName, stableByRegistered);
  return OPTIMIZER_PREFIX + (split ? split[0] + split[1] : tfName);
}
