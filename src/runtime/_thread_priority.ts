// The calling thread's scheduling priority, lowered: how a BackgroundWriter's worker gives the
// cores to the training loop first. Only on Linux, where the nice value belongs to a thread, not
// to the process (setpriority(PRIO_PROCESS, 0) changes the calling thread alone), and a thread
// starts with the nice value of the thread that creates it: lowered first thing in a worker,
// before it starts any async work, it holds for the threads that worker's runtime creates later
// (Deno's blocking pool, where its file writes and FFI calls run). Elsewhere (macOS, Windows: the
// same call would lower the whole process; browsers: no such call) nothing is changed.
//
// Deno: node:os `setPriority`, used only where the `sys` permission for it is already granted
// (queried, never prompted for: a prompt would stop the worker). A Deno worker's runtime starts
// one or two blocking-pool threads before the worker's first line runs; they are kept and serve
// its file writes and FFI hashes, at the priority they were made with. Where the process may read
// /proc/thread-self (Deno asks for --allow-all there), they are found and lowered too: a read of
// that link done on the pool names the pool thread that did it, so a few rounds of such reads at
// once, which wake the idle pool threads, name this runtime's pool threads and no other thread of
// the process. Otherwise they stay at the process's priority.
//
// Node: the same call, which needs no permission; lowering one's own priority needs no privilege
// on Linux. Node's thread pool (file I/O, async crypto) is one for the whole process, its threads
// made all at once by its first use: it is made, at the priority the process runs at, before the
// nice value drops, so that a worker that happened to use it first does not leave the main
// thread's file I/O at the lower priority. A Node worker's own work (encoding, node:crypto's
// hash) runs on its thread; its file writes run in that shared pool, at the process's priority.

import { RUNTIME } from "./_which.ts";

const os = RUNTIME === "browser" ? undefined : await import("node:os");
const nodeFs = RUNTIME === "node" ? await import("node:fs") : undefined;

/**
 * Lowers the calling thread's priority to nice value `nice` (0 to 19, higher is lower priority),
 * and in Deno the blocking-pool threads its runtime made before (where /proc can be read).
 * Resolves to `undefined` when the calling thread's was lowered (that happens before this
 * returns), or to why not (another OS, no permission, the call failed); never rejects.
 */
export async function lowerThreadPriority(nice: number): Promise<string | undefined> {
  if (!os) return "a browser has no thread priorities";
  if (os.platform() !== "linux") return `on ${os.platform()} a nice value belongs to the whole process`;
  if (RUNTIME === "deno") {
    const state = Deno.permissions.querySync({ name: "sys", kind: "setPriority" }).state;
    if (state !== "granted") return 'the sys permission "setPriority" is not granted (--allow-sys)';
  }
  try {
    nodeFs?.stat(".", () => {}); // makes Node's thread pool now, if nothing has yet (see above)
    os.setPriority(0, nice);
  } catch (e) {
    return `setPriority failed: ${(e as Error)?.message ?? e}`;
  }
  if (RUNTIME === "deno") await lowerPoolThreads(os.setPriority, nice);
  return undefined;
}

/** Reads of /proc/thread-self on the pool at once, per round, and the rounds. */
const PROBES = 4;
const PROBE_ROUNDS = 3;

/** Deno: this runtime's blocking-pool threads, found by the reads they serve, lowered to `nice`. */
async function lowerPoolThreads(setPriority: (tid: number, nice: number) => void, nice: number): Promise<void> {
  const tidOf = (link: string) => Number(link.split("/").at(-1));
  try {
    const lowered = new Set([tidOf(Deno.readLinkSync("/proc/thread-self"))]); // this thread's, read here
    for (let round = 0; round < PROBE_ROUNDS; round++) {
      const links = await Promise.all(Array.from({ length: PROBES }, () => Deno.readLink("/proc/thread-self")));
      for (const tid of links.map(tidOf)) {
        if (!lowered.has(tid)) setPriority(tid, nice);
        lowered.add(tid);
      }
    }
  } catch {
    // /proc not readable (Deno without --allow-all), or a thread gone meanwhile: left as it is.
  }
}
