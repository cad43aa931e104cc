/**
 * The running process as ckpt sees it, one interface for every runtime: its pid and host name,
 * whether another process is alive, and (for the CLI) its arguments, standard streams and exit.
 * Deno's API in Deno, `node:process` in Node (./_process_node.ts); in a browser there is no
 * process: `pid` is 0, the streams are absent and `exit` throws. Chosen once, when the module
 * loads.
 *
 * @example
 * ```ts
 * import { thisProcess } from "./process.ts";
 * import assert from "node:assert/strict";
 * assert.ok(thisProcess.pid > 0);
 * assert.equal(thisProcess.alive(thisProcess.pid), true);
 * ```
 *
 * @module
 */
import { RUNTIME } from "./_which.ts";

/** A standard stream and whether it is a terminal. */
export interface StdStream<S> {
  /** The stream (for standard input, opened on first use). */
  stream(): S;
  /** Whether it is a terminal. */
  isTerminal(): boolean;
}

/** The process: what ckpt reads of it and does with it. */
export interface ThisProcess {
  /** The process id (0 where there is none: a browser). */
  readonly pid: number;
  /** The URL of the program's main module (`undefined` where there is none). */
  readonly mainModule: string | undefined;
  /** The command-line arguments after the script. */
  readonly args: readonly string[];
  /** The machine's host name, or undefined where it cannot be read. */
  hostname(): string | undefined;
  /** An environment variable, or undefined (also where the environment cannot be read). */
  env(name: string): string | undefined;
  /** Lets the process end while `timer` is pending (a worker's idle timer, say). */
  unrefTimer(timer: ReturnType<typeof setTimeout>): void;
  /** Ends the process with `code`. */
  exit(code: number): never;
  /**
   * Whether a process with this pid runs on this machine: `true`, `false`, or `undefined` when it
   * cannot be told.
   */
  alive(pid: number): boolean | undefined;
  readonly stdin: StdStream<ReadableStream<Uint8Array>>;
  readonly stdout: StdStream<WritableStream<Uint8Array>>;
  readonly stderr: StdStream<WritableStream<Uint8Array>>;
}

function denoProcess(): ThisProcess {
  return {
    pid: Deno.pid,
    mainModule: Deno.mainModule,
    args: Deno.args,
    hostname: () => {
      try {
        return Deno.hostname();
      } catch {
        return undefined;
      }
    },
    env: (name) => {
      try {
        // Asked, never prompted for: without the permission there is no variable.
        if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") return undefined;
        return Deno.env.get(name);
      } catch {
        return undefined;
      }
    },
    unrefTimer: (timer) => Deno.unrefTimer(timer),
    exit: (code) => Deno.exit(code),
    alive: (pid) => {
      if (pid === Deno.pid) return true;
      // /proc/PID: Deno reads /proc only with --allow-all; without it this cannot tell (undefined).
      if (Deno.build.os !== "linux") return undefined;
      try {
        Deno.statSync(`/proc/${pid}`);
        return true;
      } catch (e) {
        return e instanceof Error && e.name === "NotFound" ? false : undefined;
      }
    },
    stdin: { stream: () => Deno.stdin.readable, isTerminal: () => Deno.stdin.isTerminal() },
    stdout: { stream: () => Deno.stdout.writable, isTerminal: () => Deno.stdout.isTerminal() },
    stderr: { stream: () => Deno.stderr.writable, isTerminal: () => Deno.stderr.isTerminal() },
  };
}

function browserProcess(): ThisProcess {
  const none = (what: string) => () => {
    throw new TypeError(`There is no ${what} here: this runtime has no process`);
  };
  return {
    pid: 0,
    mainModule: undefined,
    args: [],
    hostname: () => undefined,
    env: () => undefined,
    unrefTimer: () => {},
    exit: none("exit") as () => never,
    alive: () => undefined,
    stdin: { stream: none("standard input"), isTerminal: () => false },
    stdout: { stream: none("standard output"), isTerminal: () => false },
    stderr: { stream: none("standard error"), isTerminal: () => false },
  };
}

/** This process. */
export const thisProcess: ThisProcess = RUNTIME === "deno"
  ? denoProcess()
  : RUNTIME === "node"
  ? (await import("./_process_node.ts")).nodeProcess
  : browserProcess();
