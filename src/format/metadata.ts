/**
 * Checkpoint metadata: validation and the canonical JSON form every codec stores.
 *
 * @module
 */
import type { JsonValue, Metadata } from "./types.ts";

const KEYS = new Set(["step", "epoch", "createdAt", "custom", "metrics"]);

function checkJson(value: unknown, path: string, depth: number): void {
  if (depth > 64) throw new RangeError(`Invalid metadata: ${path} nests deeper than 64 levels`);
  if (value === null || typeof value === "string" || typeof value === "boolean") return;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError(`Invalid metadata: ${path} is ${value}, not a finite number`);
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((v, i) => checkJson(v, `${path}[${i}]`, depth + 1));
    return;
  }
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    for (const [k, v] of Object.entries(value)) checkJson(v, `${path}.${k}`, depth + 1);
    return;
  }
  throw new TypeError(`Invalid metadata: ${path} is not a JSON value`);
}

/** A value as it would read in JSON, for messages: `-0` kept, `missing` for undefined. */
function show(v: unknown): string {
  if (v === undefined) return "missing";
  if (Object.is(v, -0)) return "-0";
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/** A step or epoch: a non-negative safe integer, and not -0 (which JSON would write as 0). */
function isCount(v: unknown): boolean {
  return Number.isSafeInteger(v) && (v as number) >= 0 && !Object.is(v, -0);
}

/**
 * Checks metadata before it is written: `step` a non-negative safe integer, `epoch` likewise when
 * present, `createdAt` a string, `metrics` numbers, `custom` JSON values. Throws a `TypeError`
 * naming the field.
 *
 * @example
 * ```ts
 * import { validateMetadata } from "./metadata.ts";
 * import assert from "node:assert/strict";
 * validateMetadata({ step: 10, metrics: { loss: NaN } });
 * assert.throws(() => validateMetadata({ step: -1 }), TypeError);
 * ```
 */
export function validateMetadata(metadata: Metadata): void {
  if (typeof metadata !== "object" || metadata === null) {
    throw new TypeError("Invalid metadata: expected an object with a step");
  }
  for (const k of Object.keys(metadata)) {
    if (!KEYS.has(k)) throw new TypeError(`Invalid metadata: unknown field ${JSON.stringify(k)}`);
  }
  const { step, epoch, createdAt, custom, metrics } = metadata;
  if (!isCount(step)) throw new TypeError(`Invalid metadata: step is ${show(step)}, not a non-negative integer`);
  if (epoch !== undefined && !isCount(epoch)) {
    throw new TypeError(`Invalid metadata: epoch is ${show(epoch)}, not a non-negative integer`);
  }
  if (createdAt !== undefined && typeof createdAt !== "string") {
    throw new TypeError("Invalid metadata: createdAt must be a string");
  }
  if (metrics !== undefined) {
    if (typeof metrics !== "object" || metrics === null || Array.isArray(metrics)) {
      throw new TypeError("Invalid metadata: metrics must be an object of numbers");
    }
    for (const [k, v] of Object.entries(metrics)) {
      if (typeof v !== "number") throw new TypeError(`Invalid metadata: metric ${JSON.stringify(k)} is not a number`);
    }
  }
  if (custom !== undefined) {
    if (typeof custom !== "object" || custom === null || Array.isArray(custom)) {
      throw new TypeError("Invalid metadata: custom must be an object of JSON values");
    }
    checkJson(custom, "custom", 0);
  }
}

/** A metric as JSON: finite numbers as numbers, the rest as strings. */
function metricToJson(v: number): number | string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  if (Object.is(v, -0)) return "-0";
  return v;
}

/**
 * The number a string stands for where JSON has no literal for it: `"NaN"`, `"Infinity"`,
 * `"-Infinity"`, `"-0"`; `undefined` for any other value.
 *
 * @example
 * ```ts
 * import { specialNumber } from "./metadata.ts";
 * import assert from "node:assert/strict";
 * assert.ok(Object.is(specialNumber("-0"), -0));
 * assert.equal(specialNumber("nan"), undefined);
 * ```
 */
export function specialNumber(v: unknown): number | undefined {
  switch (v) {
    case "NaN":
      return NaN;
    case "Infinity":
      return Infinity;
    case "-Infinity":
      return -Infinity;
    case "-0":
      return -0;
  }
  return undefined;
}

function metricFromJson(v: unknown, name: string): number {
  if (typeof v === "number") return v;
  const n = specialNumber(v);
  if (n === undefined) throw new SyntaxError(`metric ${JSON.stringify(name)} is ${JSON.stringify(v)}, not a number`);
  return n;
}

/**
 * The canonical JSON text of metadata: fixed key order, metrics that JSON cannot hold (NaN,
 * ±Infinity, -0) as strings. The same metadata always gives the same text.
 *
 * @example
 * ```ts
 * import { metadataToJson } from "./metadata.ts";
 * import assert from "node:assert/strict";
 * assert.equal(metadataToJson({ metrics: { loss: NaN }, step: 3 }), '{"step":3,"metrics":{"loss":"NaN"}}');
 * ```
 */
export function metadataToJson(metadata: Metadata): string {
  validateMetadata(metadata);
  const out: Record<string, unknown> = { step: metadata.step };
  if (metadata.epoch !== undefined) out.epoch = metadata.epoch;
  if (metadata.createdAt !== undefined) out.createdAt = metadata.createdAt;
  if (metadata.metrics !== undefined) {
    out.metrics = Object.fromEntries(Object.entries(metadata.metrics).map(([k, v]) => [k, metricToJson(v)]));
  }
  if (metadata.custom !== undefined) out.custom = metadata.custom;
  return JSON.stringify(out);
}

/**
 * Metadata from its parsed JSON form, checked field by field. Throws a `SyntaxError` that says
 * which field is wrong; `where` is added to the message (for example `at offset 16`).
 *
 * @example
 * ```ts
 * import { metadataFromJson } from "./metadata.ts";
 * import assert from "node:assert/strict";
 * const m = metadataFromJson({ step: 3, metrics: { loss: "-Infinity" } }, "at offset 16");
 * assert.equal(m.metrics!.loss, -Infinity);
 * assert.throws(() => metadataFromJson({ step: "3" }, "at offset 16"), SyntaxError);
 * ```
 */
export function metadataFromJson(value: unknown, where: string): Metadata {
  const fail = (why: string): never => {
    throw new SyntaxError(`Cannot decode checkpoint: invalid metadata ${where}: ${why}`);
  };
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail("not a JSON object");
  const v = value as Record<string, unknown>;
  const metadata: Metadata = { step: v.step as number };
  if (v.epoch !== undefined) metadata.epoch = v.epoch as number;
  if (v.createdAt !== undefined) metadata.createdAt = v.createdAt as string;
  if (v.custom !== undefined) metadata.custom = v.custom as Record<string, JsonValue>;
  if (v.metrics !== undefined) {
    if (typeof v.metrics !== "object" || v.metrics === null || Array.isArray(v.metrics)) {
      fail("metrics is not an object");
    }
    try {
      metadata.metrics = Object.fromEntries(
        Object.entries(v.metrics as object).map(([k, x]) => [k, metricFromJson(x, k)]),
      );
    } catch (e) {
      fail((e as Error).message);
    }
  }
  const unknown = Object.keys(v).find((k) => !KEYS.has(k));
  if (unknown !== undefined) fail(`unknown field ${JSON.stringify(unknown)}`);
  try {
    validateMetadata(metadata);
  } catch (e) {
    fail((e as Error).message.replace(/^Invalid metadata: /, ""));
  }
  return metadata;
}
