// Recovery checks shared by the crash-state tests: what "old or new, bit for bit" means for a
// single file and for a manager's directory, and the next save that must succeed.

import assert from "node:assert/strict";
import {
  type Checkpoint,
  type CheckpointInput,
  CheckpointManager,
  type CheckpointManagerOptions,
  loadCheckpoint,
  saveCheckpoint,
} from "../../mod.ts";
import type { ObjectStore } from "../../src/storage/types.ts";
import type { StorageAddress } from "../../src/storage/resolve.ts";
import { exact, makeCheckpoint } from "../manager/_helpers.ts";

/** The test checkpoints: about 9 KiB each (three 4 KiB blocks), the trained part changing with the step. */
export function checkpointAt(step: number): CheckpointInput {
  return makeCheckpoint(step, { frozen: 512, trained: 1536 });
}

/** Throws unless `got` is exactly `checkpointAt(step)` for one of `steps`. */
export function assertOneOf(
  got: { metadata: { step: number }; tensors: readonly unknown[] } | undefined,
  steps: number[],
) {
  if (got === undefined) throw new Error(`recovered nothing; expected step ${steps.join(" or ")}`);
  const step = got.metadata.step;
  if (!steps.includes(step)) throw new Error(`recovered step ${step}; expected step ${steps.join(" or ")}`);
  assert.deepEqual(exact(got.tensors as never), exact(checkpointAt(step).tensors as never), `step ${step} differs`);
}

/**
 * A manager's recovery: open, `latest()` is the old or (once the save returned, only) the new
 * step (with no old one, before the save returned, nothing will do too), with no checkpoint
 * skipped as damaged; every checkpoint the index lists loads (retention deleted nothing it
 * names); then the next save succeeds and loads back.
 */
export async function checkManager(
  dir: string | ObjectStore,
  options: CheckpointManagerOptions,
  old: number | undefined,
  next: number,
  returned: boolean,
): Promise<void> {
  const warned: string[] = [];
  const manager = await CheckpointManager.open(dir, { ...options, onWarning: (m) => warned.push(m) });
  try {
    const latest = await manager.latest();
    if (!(latest === undefined && old === undefined && !returned)) {
      assertOneOf(latest, returned || old === undefined ? [next] : [old, next]);
    }
    const damaged = warned.filter((w) => /damaged|Skipping/.test(w));
    if (damaged.length) throw new Error(`a committed checkpoint was damaged: ${damaged.join(" | ")}`);
    for (const { step } of await manager.list()) assertOneOf(await manager.load(step), [step]);
    await manager.save(checkpointAt(next + 1));
    assertOneOf(await manager.latest(), [next + 1]);
  } finally {
    await manager.close();
  }
}

/** A single file's recovery: it loads as the old or (once the save returned) the new one; a new save over it loads back. */
export async function checkFile(path: StorageAddress, old: number, next: number, returned: boolean): Promise<void> {
  assertOneOf(await loadCheckpoint(path), returned ? [next] : [old, next]);
  await saveCheckpoint(path, checkpointAt(next + 1));
  assertOneOf(await loadCheckpoint(path), [next + 1]);
}

/** A larger checkpoint: 12 tensors of `bytes` each, so a save stages (or uploads) it in several writes. */
export function bigCheckpoint(step: number, bytes: number): CheckpointInput {
  const tensors = Array.from({ length: 12 }, (_, t) => {
    const data = new Float32Array(bytes / 4).map((_, i) => step * 1e6 + t * 1e5 + i);
    return { name: `big/${t}`, dtype: "float32" as const, shape: [data.length], data };
  });
  return { metadata: { step }, tensors };
}

/** Throws unless `got` is exactly `bigCheckpoint(step, bytes)` for one of `steps`. */
export function assertBig(got: Checkpoint, steps: number[], bytes: number): void {
  const step = got.metadata.step;
  if (!steps.includes(step)) throw new Error(`recovered step ${step}; expected step ${steps.join(" or ")}`);
  assert.deepEqual(exact(got.tensors), exact(bigCheckpoint(step, bytes).tensors as never), `step ${step} differs`);
}
