// The process on Node (./process.ts): node:process, with the standard streams as web streams. A
// write to a closed pipe rejects with OsErrors.BrokenPipe (as in Deno) instead of an unhandled
// 'error' event ending the process.
import type { StdStream, ThisProcess } from "./process.ts";
import { fromErrno } from "./errors.ts";

const process = (await import("node:process")).default;
const os = await import("node:os");
const { Readable } = await import("node:stream");

type NodeWritable = import("node:stream").Writable;

function writable(out: NodeWritable): WritableStream<Uint8Array> {
  let broken: unknown;
  out.on("error", (e) => broken ??= fromErrno(e));
  return new WritableStream<Uint8Array>({
    write: (chunk) =>
      new Promise<void>((resolve, reject) => {
        if (broken) return reject(broken);
        out.write(chunk, (e) => e ? reject(broken ??= fromErrno(e)) : resolve());
      }),
  });
}

function std<S>(make: () => S, tty: () => boolean): StdStream<S> {
  let s: S | undefined;
  return { stream: () => s ??= make(), isTerminal: tty };
}

/** node:process as {@linkcode ThisProcess}. */
export const nodeProcess: ThisProcess = {
  pid: process.pid,
  // Not node:url's pathToFileURL: the web build (also run under Node) replaces node:url.
  mainModule: process.argv[1]
    ? new URL(`file://${process.argv[1].split("/").map(encodeURIComponent).join("/")}`).href
    : undefined,
  args: process.argv.slice(2),
  hostname: () => {
    try {
      return os.hostname();
    } catch {
      return undefined;
    }
  },
  env: (name) => process.env[name],
  unrefTimer: (timer) => void (timer as unknown as { unref?(): void }).unref?.(),
  exit: (code) => process.exit(code),
  alive: (pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      const code = (e as { code?: string }).code;
      return code === "ESRCH" ? false : code === "EPERM" ? true : undefined;
    }
  },
  stdin: std(() => Readable.toWeb(process.stdin) as unknown as ReadableStream<Uint8Array>, () => !!process.stdin.isTTY),
  stdout: std(() => writable(process.stdout), () => !!process.stdout.isTTY),
  stderr: std(() => writable(process.stderr), () => !!process.stderr.isTTY),
};
