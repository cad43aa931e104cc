/**
 * Process signals and process lifetime, the same in Deno and Node.js (and harmless in a
 * browser, which has none): listen to a signal, exit with a status, learn that the processes
 * that started this one are gone, and, in a page, learn that the page was hidden. The one place
 * that asks which runtime it runs in for these; everything above it (preemption) is portable.
 *
 * - Deno: `Deno.addSignalListener` / `Deno.removeSignalListener`, `Deno.exit`.
 * - Node.js: `process.on(signal)` / `process.off(signal)`, `process.exit`.
 * - A browser (or any runtime with neither): no signals, so {@linkcode onSignal} returns a
 *   no-op and {@linkcode signalsSupported} is `false`; {@linkcode onPageHidden} listens to
 *   `visibilitychange` (to hidden) and `pagehide`.
 *
 * A listener replaces the runtime's default action (ending the process): whoever listens must
 * exit, as {@linkcode exitProcess} does.
 *
 * @example
 * ```ts
 * import { exitStatus, onSignal, signalsSupported } from "./signals.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(signalsSupported()); // Deno here
 * const stop = onSignal("SIGUSR2", (signal) => console.log(`got ${signal}`));
 * stop(); // the default action is back
 * assert.equal(exitStatus("SIGTERM"), 143);
 * assert.equal(exitStatus("SIGINT"), 130);
 * ```
 *
 * @module
 */

/** The signals a training process may be asked to stop with, by name (POSIX numbers on Linux). */
export const SIGNAL_NUMBERS: Readonly<Record<StopSignal, number>> = Object.freeze({
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGUSR1: 10,
  SIGUSR2: 12,
  SIGTERM: 15,
});

/** A signal {@linkcode onSignal} listens to. */
export type StopSignal = "SIGHUP" | "SIGINT" | "SIGQUIT" | "SIGUSR1" | "SIGUSR2" | "SIGTERM";

/** How often {@linkcode onOrphaned} looks at the processes that started this one, in ms. */
export const DEFAULT_ORPHAN_POLL_MS = 250;

interface DenoLike {
  ppid: number;
  addSignalListener(signal: string, handler: () => void): void;
  removeSignalListener(signal: string, handler: () => void): void;
  exit(code: number): never;
  pid: number;
  build: { os: string };
  readTextFileSync(path: string): string;
  unrefTimer(id: number): void;
}

interface ProcessLike {
  ppid: number;
  on(event: string, handler: () => void): unknown;
  off(event: string, handler: () => void): unknown;
  exit(code: number): never;
  pid: number;
  platform: string;
  getBuiltinModule?(name: string): unknown;
}

const deno = (globalThis as { Deno?: DenoLike }).Deno;
const node = deno ? undefined : (globalThis as { process?: ProcessLike }).process;

/**
 * Whether this runtime delivers process signals (Deno, Node.js); `false` in a browser.
 *
 * @example
 * ```ts
 * import { signalsSupported } from "./signals.ts";
 * console.log(signalsSupported() ? "listening for SIGTERM" : "listening for pagehide");
 * ```
 */
export function signalsSupported(): boolean {
  return deno !== undefined || typeof node?.on === "function";
}

/**
 * The exit status a process stopped by `signal` conventionally reports: 128 plus the signal's
 * number (143 for SIGTERM, 130 for SIGINT).
 *
 * @example
 * ```ts
 * import { exitStatus } from "./signals.ts";
 * import assert from "node:assert/strict";
 * assert.equal(exitStatus("SIGHUP"), 129);
 * ```
 */
export function exitStatus(signal: StopSignal): number {
  return 128 + SIGNAL_NUMBERS[signal];
}

/**
 * Calls `handler` each time the process receives `signal`, instead of the runtime's default
 * action (ending the process). Returns a function that removes the listener. In a runtime
 * without signals (a browser), does nothing and returns a no-op.
 *
 * @param signal One of {@linkcode StopSignal}; anything else is a `TypeError`.
 * @param handler Called with the signal's name.
 * @returns A function that stops listening (once; later calls do nothing).
 *
 * @example
 * ```ts
 * import { onSignal } from "./signals.ts";
 * const stop = onSignal("SIGTERM", () => console.log("saving before exiting"));
 * stop();
 * ```
 */
export function onSignal(signal: StopSignal, handler: (signal: StopSignal) => void): () => void {
  if (!Object.hasOwn(SIGNAL_NUMBERS, signal)) {
    throw new TypeError(
      `Cannot listen to signal ${JSON.stringify(signal)}: expected one of ${Object.keys(SIGNAL_NUMBERS).join(", ")}`,
    );
  }
  if (typeof handler !== "function") throw new TypeError("Cannot listen to a signal: handler must be a function");
  const listener = () => handler(signal);
  if (deno) {
    deno.addSignalListener(signal, listener);
    return once(() => deno.removeSignalListener(signal, listener));
  }
  if (typeof node?.on === "function") {
    node.on(signal, listener);
    return once(() => node.off(signal, listener));
  }
  return () => {};
}

/**
 * Ends the process with `status` (Deno, Node.js). In a browser there is no process to end: it
 * throws a `TypeError`.
 *
 * @example
 * ```ts ignore
 * import { exitProcess } from "./signals.ts";
 * exitProcess(143);
 * ```
 */
export function exitProcess(status: number): never {
  if (deno) return deno.exit(status);
  if (typeof node?.exit === "function") return node.exit(status);
  throw new TypeError(`Cannot exit with status ${status}: this runtime has no process to end`);
}

/**
 * Calls `handler` once when a process that started this one in the same process group (the
 * command the user typed and the launchers between it and this process, such as `npx` and
 * `deno task`) is gone. A signal sent to the command the user started does not always reach the
 * process doing the work: `npx` (npm) passes SIGTERM to the shell it runs the command in, and
 * that shell dies without passing it on, leaving `deno task` and its child running as orphans.
 * Watching for that gap turns it into the notice the signal would have been.
 *
 * Where `/proc` can be read (Linux under Node.js; under Deno only with `--allow-all`, since Deno
 * guards `/proc/PID` behind it), every ancestor in this process's own process group is watched,
 * up to the group's leader (what a shell started as one job; a login shell that exits, as under
 * `nohup`, is outside it). Elsewhere only the parent is watched (its pid changes when it is gone
 * and this process is adopted): enough for `deno task` killed, not for a launcher above it. An
 * unreferenced timer looks every `pollMs` (it never keeps the process alive); in a browser it
 * watches nothing and returns a no-op.
 *
 * @param handler Called once, with the pid of the first ancestor found gone.
 * @param pollMs How often to look, in ms.
 * @returns A function that stops watching.
 *
 * @example
 * ```ts
 * import { onOrphaned } from "./signals.ts";
 * const stop = onOrphaned((pid) => console.log(`process ${pid} that started us is gone`));
 * stop();
 * ```
 */
export function onOrphaned(handler: (pid: number) => void, pollMs: number = DEFAULT_ORPHAN_POLL_MS): () => void {
  if (typeof handler !== "function") throw new TypeError("Cannot watch the parent: handler must be a function");
  if (!(pollMs > 0) || !Number.isFinite(pollMs)) {
    throw new RangeError(`Invalid pollMs: ${pollMs}, expected a positive number of ms`);
  }
  const gone = ancestorsWatch() ?? parentWatch();
  if (!gone) return () => {};
  const timer = setInterval(() => {
    const pid = gone();
    if (pid === undefined) return;
    clearInterval(timer);
    handler(pid);
  }, pollMs);
  unref(timer);
  return once(() => clearInterval(timer));
}

/** Watches the ancestors in this process group through `/proc` (Linux; in Deno only with `--allow-all`). */
function ancestorsWatch(): (() => number | undefined) | undefined {
  const read = procReader();
  const self = read && procStat(read, deno?.pid ?? node!.pid);
  if (!read || !self) return undefined;
  const watched: ProcStat[] = [];
  for (let stat = procStat(read, self.ppid); stat && stat.pgrp === self.pgrp; stat = procStat(read, stat.ppid)) {
    watched.push(stat);
    if (stat.pid === stat.pgrp) break; // the group's leader: the job as the shell started it
  }
  return () => watched.find((w) => procStat(read, w.pid)?.start !== w.start)?.pid;
}

/** Watches the parent alone: its pid changes when it is gone and this process is adopted. */
function parentWatch(): (() => number | undefined) | undefined {
  const ppid = () => deno?.ppid ?? node?.ppid;
  const first = ppid();
  if (typeof first !== "number" || first <= 1) return undefined;
  return () => ppid() === first ? undefined : first;
}

/**
 * Calls `handler` when the page is hidden (`visibilitychange` to `"hidden"`, or `pagehide`): a
 * browser may discard a hidden page without another word, so that is a page's notice to save.
 * Outside a page (no `document`), does nothing and returns a no-op.
 *
 * @param handler Called with the event's type each time the page is hidden.
 * @returns A function that stops listening.
 *
 * @example
 * ```ts
 * import { onPageHidden } from "./signals.ts";
 * const stop = onPageHidden((why) => console.log(`page hidden (${why}): saving`));
 * stop();
 * ```
 */
export function onPageHidden(handler: (event: "visibilitychange" | "pagehide") => void): () => void {
  if (typeof handler !== "function") throw new TypeError("Cannot watch the page: handler must be a function");
  const doc = (globalThis as { document?: { visibilityState: string } & EventTarget }).document;
  if (!doc || typeof globalThis.addEventListener !== "function") return () => {};
  const onVisibility = () => {
    if (doc.visibilityState === "hidden") handler("visibilitychange");
  };
  const onHide = () => handler("pagehide");
  doc.addEventListener("visibilitychange", onVisibility);
  globalThis.addEventListener("pagehide", onHide);
  return once(() => {
    doc.removeEventListener("visibilitychange", onVisibility);
    globalThis.removeEventListener("pagehide", onHide);
  });
}

/**
 * Lets the event loop turn once, so that what waits there (a signal's listener, a timer, the
 * end of a write) runs before the promise resolves: `setImmediate` in Deno and Node.js (about
 * 40 µs), a zero timeout elsewhere. A loop that only awaits promises that are already settled
 * (`await model.trainOnBatch()` on tfjs's cpu backend) never leaves the microtask queue, and
 * nothing that waits in the event loop runs until it does.
 *
 * @example
 * ```ts
 * import { nextTurn } from "./signals.ts";
 * import assert from "node:assert/strict";
 * let ran = false;
 * setTimeout(() => ran = true, 0);
 * while (!ran) await nextTurn(); // `await Promise.resolve()` here would never end
 * assert.ok(ran);
 * ```
 */
export function nextTurn(): Promise<void> {
  const immediate = (globalThis as { setImmediate?: (fn: () => void) => unknown }).setImmediate;
  return new Promise((resolve) => immediate ? immediate(resolve) : setTimeout(resolve, 0));
}

/** Keeps `timer` from holding the process open (Deno, Node.js); nothing to do in a browser. */
export function unref(timer: ReturnType<typeof setTimeout>): void {
  if (deno && typeof timer === "number") deno.unrefTimer(timer);
  else (timer as { unref?: () => void })?.unref?.();
}

interface ProcStat {
  pid: number;
  ppid: number;
  pgrp: number;
  /** Start time in clock ticks since boot: tells a pid reused by another process apart. */
  start: string;
}

type Reader = (path: string) => string;

function procReader(): Reader | undefined {
  if (deno) return deno.build.os === "linux" ? (path) => deno.readTextFileSync(path) : undefined;
  if (node?.platform !== "linux" || typeof node.getBuiltinModule !== "function") return undefined;
  const fs = node.getBuiltinModule("node:fs") as { readFileSync(path: string, encoding: "utf8"): string };
  return (path) => fs.readFileSync(path, "utf8");
}

/** `/proc/PID/stat`, or undefined when the process is gone (or cannot be read). */
function procStat(read: Reader, pid: number): ProcStat | undefined {
  if (!Number.isSafeInteger(pid) || pid <= 1) return undefined;
  let text: string;
  try {
    text = read(`/proc/${pid}/stat`);
  } catch {
    return undefined;
  }
  // "PID (COMM) STATE PPID PGRP SESSION ...": COMM may hold spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  if (fields.length < 20 || fields[0] === "Z") return undefined; // a zombie is gone too
  return { pid, ppid: Number(fields[1]), pgrp: Number(fields[2]), start: fields[19]! };
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
