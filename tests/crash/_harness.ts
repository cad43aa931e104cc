// The crash-state driver: records a save (_record.ts), enumerates the states a power loss can
// leave (_enumerate.ts), writes each distinct one into a fresh directory and runs a recovery check
// on it. Generic: a case is "a state to start from", "a save to run" and "a recovery check".

import { join } from "node:path";
import { record, type Recording } from "./_record.ts";
import { choose, crashStates, describe, materialize, treeKey, writeTree } from "./_enumerate.ts";

/** States checked at most per save, unless a case says otherwise (above it, a seeded sample). */
export const DEFAULT_CAP = 400;

/** One save to check against every crash state. */
export interface CrashCase {
  /** Makes the state before the save in `dir` (an empty directory): the old checkpoint. */
  prepare(dir: string): Promise<void>;
  /** The save whose file-system calls are recorded. */
  save(dir: string): Promise<void>;
  /**
   * Recovery from a crash state in `dir`; throws when it is wrong. `returned`: the crash came after
   * the save's last call (the save had returned, so only the new checkpoint will do).
   */
  check(dir: string, state: { returned: boolean }): Promise<void>;
  /** States checked at most; above it a sample drawn with `seed`. @default {DEFAULT_CAP} */
  cap?: number;
  /** @default {1} */
  seed?: number;
  /** Names neither snapshot nor recorded (a lock file taken with calls of its own). */
  skip?: (name: string) => boolean;
}

/** What the enumeration found. */
export interface CrashReport {
  /** Recorded file-system ops of the save. */
  ops: number;
  /** Crash states under the model. */
  states: number;
  /** States checked (all of them, or the sample). */
  checked: number;
  /** Distinct directory trees among the checked states (each recovered once). */
  distinct: number;
  /** Each failing state, in words, with what recovery did. */
  failures: string[];
  recording: Recording;
}

/** Records `c.save`, then checks recovery from every crash state (or a sample above the cap). */
export async function exploreCrashes(c: CrashCase): Promise<CrashReport> {
  const base = await Deno.makeTempDir({ prefix: "ckpt-crash-" });
  try {
    const origin = join(base, "origin");
    await Deno.mkdir(origin);
    await c.prepare(origin);
    const recording = await record(origin, () => c.save(origin), c.skip);
    const states = crashStates(recording);
    const picked = choose(states.count, c.cap ?? DEFAULT_CAP, c.seed ?? 1, states.last);
    const seen = new Map<string, string | undefined>();
    const failures: string[] = [];
    let n = 0;
    for (const i of picked) {
      const state = states.at(i);
      const returned = state.k === recording.ops.length;
      const tree = materialize(recording, state);
      const key = `${returned}\n${await treeKey(tree)}`;
      if (!seen.has(key)) {
        const dir = join(base, `state-${n++}`);
        await Deno.mkdir(dir);
        let error: string | undefined;
        try {
          await writeTree(dir, tree);
          await c.check(dir, { returned });
        } catch (e) {
          error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        }
        await Deno.remove(dir, { recursive: true });
        seen.set(key, error);
      }
      const error = seen.get(key);
      if (error !== undefined) failures.push(`${describe(recording, state)}: ${error}`);
    }
    return {
      ops: recording.ops.length,
      states: states.count,
      checked: picked.length,
      distinct: seen.size,
      failures,
      recording,
    };
  } finally {
    await Deno.remove(base, { recursive: true });
  }
}

/** One line for a test's output: the counts. */
export function summary(name: string, r: CrashReport): string {
  return `${name}: ${r.ops} ops, ${r.states} crash states, ${r.checked} checked, ${r.distinct} distinct trees, ${r.failures.length} failing`;
}
