// The processes of the sharded benchmarks (bench/shard_compare.ts, bench/shard_dcp.ts): each one
// builds its data, prints "ready", waits for a line on stdin, runs its operation, prints one JSON
// line ({ ms, cpuMs } for that operation alone), then waits for stdin to close before it exits.
// They are all started, all awaited ready, then signalled at once; the wall time runs from the
// signal until the last report. Their memory is read here, from /proc/<pid> (Linux): each one's
// peak is reset just before the signal (clear_refs 5) and read after its report, while it waits,
// so that it measures the operation and not the data built before it (and the processes need no
// permission to read their own /proc, which Deno grants only with --allow-all).

/** What one process reports for its operation alone. */
export interface ProcReport {
  /** Its operation's milliseconds. */
  ms: number;
  /** The CPU milliseconds it used meanwhile (every thread). */
  cpuMs: number;
  /** Its peak resident memory during the operation, MiB (NaN off Linux). */
  peakMiB: number;
  /** What that peak adds to its resident memory at the signal (its data already built), MiB. */
  addedMiB: number;
}

/** One timed run of several processes. */
export interface Run {
  /** Milliseconds from the signal until the last report. */
  ms: number;
  /** The CPU milliseconds, summed over the processes. */
  cpuMs: number;
  /** Each process's report, by index. */
  reports: ProcReport[];
}

/** Reads lines from a child's stdout, keeping what follows a line for the next call. */
function lineReader(stream: ReadableStream<Uint8Array<ArrayBuffer>>, what: string): () => Promise<string> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return async () => {
    for (;;) {
      const at = buffer.indexOf("\n");
      if (at >= 0) {
        const line = buffer.slice(0, at).trim();
        buffer = buffer.slice(at + 1);
        return line;
      }
      const { value, done } = await reader.read();
      if (done) throw new Error(`${what} ended early (its stderr is above)`);
      buffer += value;
    }
  };
}

function statusMiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN; // not Linux
  }
}

/** Resets the peak resident memory of process `pid` and returns its resident MiB now. */
function resetPeak(pid: number): number {
  try {
    Deno.writeTextFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch {
    // Not Linux: the peak then includes what came before (still an upper bound).
  }
  return statusMiB(pid, "VmRSS");
}

/** Starts one process per command, waits until each is ready, signals them at once, collects their reports. */
export async function runProcesses(what: string, commands: readonly [string, string[]][]): Promise<Run> {
  const children = commands.map(([cmd, args]) =>
    new Deno.Command(cmd, { args, stdin: "piped", stdout: "piped", stderr: "inherit" }).spawn()
  );
  const lines = children.map((c, i) => lineReader(c.stdout, `${what} process ${i}`));
  for (const [i, next] of lines.entries()) {
    const line = await next();
    if (line !== "ready") throw new Error(`${what} process ${i} printed ${JSON.stringify(line)}, not "ready"`);
  }
  const atStart = children.map((c) => resetPeak(c.pid));
  const writers = children.map((c) => c.stdin.getWriter());
  const t0 = performance.now();
  const go = new TextEncoder().encode("go\n");
  await Promise.all(writers.map((w) => w.write(go)));
  let last = t0;
  const reports = await Promise.all(lines.map(async (next, i) => {
    const report = JSON.parse(await next()) as { ms: number; cpuMs: number };
    last = Math.max(last, performance.now());
    const peakMiB = statusMiB(children[i]!.pid, "VmHWM");
    await writers[i]!.close();
    return { ...report, peakMiB, addedMiB: Math.max(0, peakMiB - atStart[i]!) };
  }));
  const ms = last - t0;
  const statuses = await Promise.all(children.map((c) => c.status));
  const failed = statuses.findIndex((s) => !s.success);
  if (failed >= 0) throw new Error(`${what} process ${failed} exited with code ${statuses[failed]!.code}`);
  return { ms, cpuMs: reports.reduce((n, r) => n + r.cpuMs, 0), reports };
}

/** The median of `xs` (the upper one of an even count). */
export function median(xs: readonly number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
}

/** The largest value of `key` over the runs' processes, where each run's worst process is taken and then the median over runs. */
export function medianWorst(runs: readonly Run[], key: "peakMiB" | "addedMiB"): number {
  return median(runs.map((r) => Math.max(...r.reports.map((p) => p[key]))));
}
