/**
 * How ckpt metadata and tensor groups live in a safetensors `__metadata__` map, whose values
 * must be strings. Every key ckpt writes starts with `ckpt.`:
 *
 * | key | value |
 * | --- | --- |
 * | `ckpt.step` | the step in decimal, such as `"100"` (left out for step 0, what a file without it reads as) |
 * | `ckpt.epoch` | the epoch in decimal (only when set) |
 * | `ckpt.createdAt` | the ISO 8601 string as given (only when set) |
 * | `ckpt.metrics` | JSON object; NaN, `Infinity`, `-Infinity` and `-0` as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`, `"-0"` (only when set) |
 * | `ckpt.custom` | JSON text of `metadata.custom`, without the foreign entries (only when anything is left) |
 * | `ckpt.groups` | JSON object mapping tensor name to group, for tensors whose group is not `"params"` (only when any) |
 *
 * Keys without the `ckpt.` prefix belong to other tools (such as `"format": "pt"`). Reading
 * collects them into `metadata.custom["safetensors.__metadata__"]`; writing lifts that object's
 * string entries back to the top level of `__metadata__` (and only there). A file without any
 * `ckpt.` key (one written by Python, say) reads as step 0 and writes back the same header.
 * Keys and values that are not valid Unicode (a lone surrogate, which safetensors readers
 * refuse) are refused on read and on write.
 *
 * @module
 */
import { metadataFromJson, metadataToJson } from "../format/metadata.ts";
import type { JsonValue, Metadata } from "../format/types.ts";

/** Prefix of the `__metadata__` keys ckpt writes. */
export const CKPT_KEY_PREFIX = "ckpt.";
/** The `metadata.custom` key that holds `__metadata__` entries of other tools. */
export const FOREIGN_METADATA_KEY = "safetensors.__metadata__";

const KEYS = ["step", "epoch", "createdAt", "metrics", "custom", "groups"] as const;
const DECIMAL = /^(0|[1-9][0-9]*)$/;

/**
 * The `__metadata__` entries (in order) for `metadata` and the groups of tensors that are not
 * `"params"`. Throws a `TypeError` for invalid metadata or a malformed
 * `custom["safetensors.__metadata__"]`.
 *
 * @example
 * ```ts
 * import { metadataToSafetensors } from "./safetensors_metadata.ts";
 * import assert from "node:assert/strict";
 * const entries = metadataToSafetensors({ step: 3, metrics: { loss: NaN } }, { "opt/m": "optimizer" });
 * assert.deepEqual(entries, [
 *   ["ckpt.step", "3"],
 *   ["ckpt.metrics", '{"loss":"NaN"}'],
 *   ["ckpt.groups", '{"opt/m":"optimizer"}'],
 * ]);
 * ```
 */
export function metadataToSafetensors(
  metadata: Metadata,
  groups: Readonly<Record<string, string>> = {},
): [string, string][] {
  const canonical = JSON.parse(metadataToJson(metadata)) as Record<string, JsonValue>;
  const out: [string, string][] = [];
  const custom = canonical.custom as Record<string, JsonValue> | undefined;
  const foreign = custom !== undefined && Object.hasOwn(custom, FOREIGN_METADATA_KEY)
    ? custom[FOREIGN_METADATA_KEY]
    : undefined;
  const where = `custom[${JSON.stringify(FOREIGN_METADATA_KEY)}]`;
  if (foreign !== undefined) {
    if (typeof foreign !== "object" || foreign === null || Array.isArray(foreign)) {
      throw new TypeError(`Invalid metadata: ${where} must be an object of strings`);
    }
    for (const [k, v] of Object.entries(foreign)) {
      if (typeof v !== "string") {
        throw new TypeError(`Invalid metadata: ${where}[${JSON.stringify(k)}] is not a string`);
      }
      if (k.startsWith(CKPT_KEY_PREFIX)) {
        throw new TypeError(`Invalid metadata: ${where} key ${JSON.stringify(k)} uses the reserved prefix "ckpt."`);
      }
      const bad = loneSurrogate(k, v);
      if (bad) throw new TypeError(`Invalid metadata: ${where} ${bad}, which safetensors readers refuse`);
      out.push([k, v]);
    }
  }
  // Step 0 is what a file without "ckpt.step" reads as, so it is left out: a file with no
  // metadata of its own (one Python wrote, say) then writes back exactly as it was read.
  if (canonical.step !== 0) out.push(["ckpt.step", String(canonical.step)]);
  if (canonical.epoch !== undefined) out.push(["ckpt.epoch", String(canonical.epoch)]);
  if (canonical.createdAt !== undefined) {
    const bad = loneSurrogate("ckpt.createdAt", canonical.createdAt as string);
    if (bad) {
      throw new TypeError(`Invalid metadata: createdAt for safetensors: ${bad}, which safetensors readers refuse`);
    }
    out.push(["ckpt.createdAt", canonical.createdAt as string]);
  }
  if (canonical.metrics !== undefined) out.push(["ckpt.metrics", JSON.stringify(canonical.metrics)]);
  const ownCustom = customWithoutForeign(custom);
  if (ownCustom !== undefined) out.push(["ckpt.custom", JSON.stringify(ownCustom)]);
  if (Object.keys(groups).length > 0) out.push(["ckpt.groups", JSON.stringify(groups)]);
  return out;
}

/**
 * `custom` as `"ckpt.custom"` holds it: the foreign entries already stand at the top level of
 * `__metadata__`, so they are not written twice. Where the foreign object is the last key and
 * not empty it is left out (reading appends it again); elsewhere an empty object keeps its place
 * (reading fills it in), so the key order, and a binary checkpoint written after the trip,
 * stay exact.
 */
function customWithoutForeign(
  custom: Record<string, JsonValue> | undefined,
): Record<string, JsonValue> | undefined {
  if (custom === undefined || !Object.hasOwn(custom, FOREIGN_METADATA_KEY)) return custom;
  const keys = Object.keys(custom);
  const foreign = custom[FOREIGN_METADATA_KEY] as Record<string, JsonValue>;
  const drop = keys.at(-1) === FOREIGN_METADATA_KEY && Object.keys(foreign).length > 0;
  const out: Record<string, JsonValue> = {};
  for (const k of keys) {
    if (k === FOREIGN_METADATA_KEY && drop) continue;
    const v = k === FOREIGN_METADATA_KEY ? {} : custom[k]!;
    Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return keys.length === 1 && drop ? undefined : out;
}

/**
 * Why a `__metadata__` entry cannot be written as safetensors readers require (their JSON
 * parser refuses an escaped lone surrogate such as `"\ud800"`), or `undefined` when it can.
 *
 * @example
 * ```ts
 * import { loneSurrogate } from "./safetensors_metadata.ts";
 * import assert from "node:assert/strict";
 * assert.equal(loneSurrogate("format", "pt"), undefined);
 * assert.equal(loneSurrogate("note", "a\ud800"), 'value for "note" is not valid Unicode (a lone surrogate)');
 * ```
 */
export function loneSurrogate(key: string, value: string): string | undefined {
  if (!key.isWellFormed()) return `key ${JSON.stringify(key)} is not valid Unicode (a lone surrogate)`;
  if (!value.isWellFormed()) return `value for ${JSON.stringify(key)} is not valid Unicode (a lone surrogate)`;
  return undefined;
}

/**
 * Metadata and non-`"params"` groups from `__metadata__` entries. `where` goes into messages.
 * Throws a `SyntaxError` for a malformed `ckpt.` entry, an unknown `ckpt.` key, or a group for a
 * tensor the file lacks.
 *
 * @example
 * ```ts
 * import { metadataFromSafetensors } from "./safetensors_metadata.ts";
 * import assert from "node:assert/strict";
 * const { metadata, groups } = metadataFromSafetensors(
 *   new Map([["format", "pt"], ["ckpt.step", "3"], ["ckpt.groups", '{"m":"optimizer"}']]),
 *   new Set(["m"]),
 *   "at offset 8",
 * );
 * assert.deepEqual(metadata, { step: 3, custom: { "safetensors.__metadata__": { format: "pt" } } });
 * assert.equal(groups.get("m"), "optimizer");
 * ```
 */
export function metadataFromSafetensors(
  entries: ReadonlyMap<string, string>,
  tensorNames: ReadonlySet<string>,
  where: string,
): { metadata: Metadata; groups: Map<string, string> } {
  const fail = (why: string): never => {
    throw new SyntaxError(`Cannot decode safetensors: invalid __metadata__ ${where}: ${why}`);
  };
  const ours: Record<string, unknown> = {};
  const foreign: Record<string, string> = {};
  let hasForeign = false;
  for (const [k, v] of entries) {
    if (!k.startsWith(CKPT_KEY_PREFIX)) {
      Object.defineProperty(foreign, k, { value: v, enumerable: true, writable: true, configurable: true });
      hasForeign = true;
      continue;
    }
    const field = k.slice(CKPT_KEY_PREFIX.length);
    if (!(KEYS as readonly string[]).includes(field)) fail(`unknown key ${JSON.stringify(k)}`);
    ours[field] = v;
  }
  const parse = (field: string): unknown => {
    try {
      return JSON.parse(ours[field] as string);
    } catch (e) {
      return fail(`"ckpt.${field}" is not valid JSON (${(e as Error).message})`);
    }
  };
  const decimal = (field: string): number => {
    const v = ours[field] as string;
    if (!DECIMAL.test(v) || !Number.isSafeInteger(Number(v))) {
      fail(`"ckpt.${field}" is ${JSON.stringify(v)}, not a decimal integer`);
    }
    return Number(v);
  };
  const json: Record<string, unknown> = { step: ours.step === undefined ? 0 : decimal("step") };
  if (ours.epoch !== undefined) json.epoch = decimal("epoch");
  if (ours.createdAt !== undefined) json.createdAt = ours.createdAt;
  if (ours.metrics !== undefined) json.metrics = parse("metrics");
  if (ours.custom !== undefined) json.custom = parse("custom");
  const groups = new Map<string, string>();
  if (ours.groups !== undefined) {
    const g = parse("groups");
    if (typeof g !== "object" || g === null || Array.isArray(g)) fail('"ckpt.groups" is not a JSON object');
    for (const [name, group] of Object.entries(g as object)) {
      if (typeof group !== "string") fail(`"ckpt.groups" gives tensor ${JSON.stringify(name)} a non-string group`);
      if (!tensorNames.has(name)) fail(`"ckpt.groups" names tensor ${JSON.stringify(name)}, which the file lacks`);
      groups.set(name, group as string);
    }
  }
  const metadata = metadataFromJson(json, where);
  const custom = metadata.custom;
  if (custom !== undefined && Object.hasOwn(custom, FOREIGN_METADATA_KEY)) custom[FOREIGN_METADATA_KEY] = foreign;
  else if (hasForeign) metadata.custom = { ...custom, [FOREIGN_METADATA_KEY]: foreign };
  return { metadata, groups };
}
