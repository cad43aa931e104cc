// Which checkpoints retention keeps, and why: a pure function of the committed entries.

import type { Metadata } from "../format/types.ts";

/**
 * Why a checkpoint is kept: among the newest `maxToKeep`, a multiple of `keepEvery`, the one kept
 * for its period of `keepTimeInterval`, or among the best.
 */
export type KeepReason = "recent" | "every" | "time" | "best";

/** The retention rules, resolved. */
export interface RetentionPolicy {
  maxToKeep: number;
  keepEvery: number | undefined;
  /** Seconds: keep a checkpoint saved at least this long after the previous one kept for it. */
  keepTimeInterval?: number | undefined;
  best: { metric: string; mode: "min" | "max"; keep: number } | undefined;
}

/** For each step (of entries ordered by step), the reasons it is kept; an empty list means delete. */
export function retention(
  entries: readonly { step: number; metadata: Metadata; savedAt?: string }[],
  policy: RetentionPolicy,
): Map<number, KeepReason[]> {
  const reasons = new Map<number, KeepReason[]>(entries.map((e) => [e.step, []]));
  const recentFrom = Math.max(0, entries.length - policy.maxToKeep);
  entries.forEach((e, i) => {
    if (i >= recentFrom) reasons.get(e.step)!.push("recent");
    if (policy.keepEvery !== undefined && e.step % policy.keepEvery === 0) reasons.get(e.step)!.push("every");
  });
  if (policy.keepTimeInterval !== undefined) {
    // Orbax's keep_time_interval: the first checkpoint, then each saved at least the interval
    // after the last one kept this way (entries without a time never count).
    let last = -Infinity;
    for (const e of entries) {
      const at = e.savedAt === undefined ? NaN : Date.parse(e.savedAt);
      if (Number.isNaN(at) || at - last < policy.keepTimeInterval * 1000) continue;
      last = at;
      reasons.get(e.step)!.push("time");
    }
  }
  for (const step of bestSteps(entries, policy.best)) reasons.get(step)!.push("best");
  return reasons;
}

/**
 * The steps of the best `keep` checkpoints by a metric, best first. Checkpoints without the
 * metric, or with NaN, never count; between equal values the newer step wins.
 */
export function bestSteps(
  entries: readonly { step: number; metadata: Metadata }[],
  best: RetentionPolicy["best"],
): number[] {
  if (!best) return [];
  const sign = best.mode === "min" ? 1 : -1;
  return entries
    .flatMap((e) => {
      const v = e.metadata.metrics?.[best.metric];
      return typeof v === "number" && !Number.isNaN(v) ? [{ step: e.step, v }] : [];
    })
    .sort((a, b) => sign * (a.v - b.v) || b.step - a.step || 0)
    .slice(0, best.keep)
    .map((c) => c.step);
}
