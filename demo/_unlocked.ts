/**
 * Running the demo without deno.lock, for the backends it loads only when asked for.
 *
 * Deno records every npm package a process imports in the lockfile it runs with, the computed
 * `import()` of an optional backend included: `deno task train --backend tensorflow` added
 * tfjs-node and its 300 lines of dependencies to the repository's deno.lock. A process started
 * with `--no-lock` records nothing, and a task cannot choose its flags from its arguments, so the
 * demo, asked for such a backend, runs itself again with `--no-lock` and waits for that run.
 *
 * @module
 */
import { onOrphaned } from "../src/runtime/signals.ts";

/** Set in the run started by {@linkcode runUnlocked}: that run is the one to train in. */
export const UNLOCKED_ENV = "CKPT_TRAIN_UNLOCKED";

/** The permissions of deno.json's `train` task but `--allow-run`, which only this relaunch needs. */
const PERMISSIONS = ["--allow-read", "--allow-write", "--allow-env", "--allow-net=127.0.0.1", "--allow-ffi"];

const FORWARDED: readonly Deno.Signal[] = ["SIGINT", "SIGTERM", "SIGHUP"];

/** Whether this process was started by {@linkcode runUnlocked}. */
export function isUnlocked(): boolean {
  return Deno.env.get(UNLOCKED_ENV) === "1";
}

/**
 * Runs `script` with `args` in `deno run --no-lock` and resolves with its exit status. The run
 * has a process group of its own, so Ctrl-C reaches it once, passed on from here, as SIGTERM and
 * SIGHUP are; should this process be killed outright, the run finds itself orphaned and saves and
 * stops as on SIGTERM (its `Preemption` watches its parent), and should whatever started this
 * process go, the run is sent SIGTERM.
 */
export async function runUnlocked(script: string, args: string[]): Promise<number> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-lock", ...PERMISSIONS, script, ...args],
    env: { [UNLOCKED_ENV]: "1" },
    stdin: "null",
    detached: true,
  }).spawn();
  const forward = new Map(FORWARDED.map((s) => [s, () => child.kill(s)]));
  for (const [signal, handler] of forward) Deno.addSignalListener(signal, handler);
  const stopWatching = onOrphaned(() => child.kill("SIGTERM"));
  try {
    return (await child.status).code;
  } finally {
    stopWatching();
    for (const [signal, handler] of forward) Deno.removeSignalListener(signal, handler);
  }
}
