/**
 * How ckpt metadata and tensor groups live in a safetensors `__metadata__` map, whose values
 * must be strings. Every key ckpt writes starts with `ckpt.`:
 *
 * | key | value |
 * | --- | --- |
 * | `ckpt.step` | the step in decimal, such as `"100"` |
 * | `ckpt.epoch` | the epoch in decimal (only when set) |
 * | `ckpt.createdAt` | the ISO 8601 string as given (only when set) |
 * | `ckpt.metrics` | JSON object; NaN, `Infinity`, `-Infinity` and `-0` as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`, `"-0"` (only when set) |
 * | `ckpt.custom` | JSON text of `metadata.custom` (only when set) |
 * | `ckpt.groups` | JSON object mapping tensor name to group, for tensors whose group is not `"params"` (only when any) |
 *
 * Keys without the `ckpt.` prefix belong to other tools (such as `"format": "pt"`). Reading
 * collects them into `metadata.custom["safetensors.__metadata__"]`; writing lifts that object's
 * string entries back to the top level of `__metadata__`. A file without any `ckpt.` key (one
 * written by Python, say) reads as step 0.
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
  const foreign = metadata.custom !== undefined && Object.hasOwn(metadata.custom, FOREIGN_METADATA_KEY)
    ? metadata.custom[FOREIGN_METADATA_KEY]
    : undefined;
  if (foreign !== undefined) {
    if (typeof foreign !== "object" || foreign === null || Array.isArray(foreign)) {
      throw new TypeError(
        `Invalid metadata: custom[${JSON.stringify(FOREIGN_METADATA_KEY)}] must be an object of strings`,
      );
    }
    for (const [k, v] of Object.entries(foreign)) {
      if (typeof v !== "string") {
        throw new TypeError(
          `Invalid metadata: custom[${JSON.stringify(FOREIGN_METADATA_KEY)}][${JSON.stringify(k)}] is not a string`,
        );
      }
      if (k.startsWith(CKPT_KEY_PREFIX)) {
        throw new TypeError(
          `Invalid metadata: custom[${JSON.stringify(FOREIGN_METADATA_KEY)}] key ${
            JSON.stringify(k)
          } uses the reserved prefix "ckpt."`,
        );
      }
      out.push([k, v]);
    }
  }
  out.push(["ckpt.step", String(canonical.step)]);
  if (canonical.epoch !== undefined) out.push(["ckpt.epoch", String(canonical.epoch)]);
  if (canonical.createdAt !== undefined) out.push(["ckpt.createdAt", canonical.createdAt as string]);
  if (canonical.metrics !== undefined) out.push(["ckpt.metrics", JSON.stringify(canonical.metrics)]);
  if (canonical.custom !== undefined) out.push(["ckpt.custom", JSON.stringify(canonical.custom)]);
  if (Object.keys(groups).length > 0) out.push(["ckpt.groups", JSON.stringify(groups)]);
  return out;
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
