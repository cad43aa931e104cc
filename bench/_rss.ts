// Resident memory of this process for bench/_shard_one.ts, from /proc/self (Linux): the peak is
// reset at the start signal (clear_refs 5) so that it measures the operation, not the data built
// before it.

function statusMiB(field: "VmRSS" | "VmHWM"): number {
  const m = Deno.readTextFileSync("/proc/self/status").match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Resets the peak and returns the resident MiB now; call {@linkcode peakSince} after the operation. */
export function resetPeak(): number {
  try {
    Deno.writeTextFileSync("/proc/self/clear_refs", "5");
  } catch {
    // Not Linux, or not allowed: the peak then includes what came before (still an upper bound).
  }
  return statusMiB("VmRSS");
}

/** The peak resident MiB since {@linkcode resetPeak}, and what it added to `atStart`. */
export function peakSince(atStart: number): { peakMiB: number; addedMiB: number } {
  const peakMiB = statusMiB("VmHWM");
  return { peakMiB, addedMiB: Math.max(0, peakMiB - atStart) };
}
