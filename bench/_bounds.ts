// The physical-limit rows of the side-by-side benchmarks: what no implementation of a row can
// beat on this machine, measured in the same run, so that the gap between ckpt and its target is
// explained by a number. For a load + verify, the larger of the raw read of the same bytes into
// fresh memory and SHA-256 over them spread over the cores ckpt can use; for a save, the larger
// of the raw durable write (or upload) and the hash. SHA-256 is timed here on one core, with the
// same implementation ckpt hashes with in Deno (node:crypto, OpenSSL), and divided by the cores:
// each ckpt path hashes on at most that many threads at once, and hashing splits evenly by
// tensor, so the division is the best any split could do.

import { createHash } from "node:crypto";
import os from "node:os";

/** The cores ckpt can use: the hash threads it starts are bounded by them. */
export function usableCores(): number {
  return Math.max(1, navigator.hardwareConcurrency || 1);
}

/**
 * Seconds SHA-256 takes over `bytes` bytes on one core, measured over a buffer of up to 64 MiB
 * hashed in 1 MiB updates (best of three: a loaded machine only makes it slower).
 */
export function sha256SecondsOneCore(bytes: number): number {
  const size = Math.min(bytes, 64 * 2 ** 20);
  const buffer = new Uint8Array(size).map((_, i) => i * 31);
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    const t0 = performance.now();
    const h = createHash("sha256");
    for (let at = 0; at < size; at += 2 ** 20) h.update(buffer.subarray(at, at + 2 ** 20));
    h.digest();
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  return best * (bytes / size);
}

/**
 * CPU seconds the whole machine spent so far (every process, the kernel's too: a store's or a
 * browser's beside the benchmark's own), from `os.cpus()` (Linux's /proc/stat, in ticks of 10
 * ms); NaN where it cannot tell. It means something only on a quiet machine.
 */
export function machineCpuSeconds(): number {
  try {
    const busy = os.cpus().reduce((sum, { times: t }) => sum + t.user + t.nice + t.sys + t.irq, 0);
    return busy > 0 ? busy / 1000 : NaN;
  } catch {
    return NaN;
  }
}

/** One part of a bound: what it measures and how long it takes. */
export interface BoundPart {
  /** What it is, such as `plain download`. */
  name: string;
  /** Its time in seconds. */
  seconds: number;
}

/** A physical limit: the slowest of its parts, which no implementation of the row can beat. */
export interface Bound {
  /** The limiting part's seconds. */
  seconds: number;
  /** "max(a 0.41 s, b 0.12 s)", for the table. */
  text: string;
}

/** The larger of `parts`, described. */
export function bound(parts: readonly BoundPart[]): Bound {
  const seconds = Math.max(...parts.map((p) => p.seconds));
  const text = `max(${parts.map((p) => `${p.name} ${p.seconds.toFixed(3)} s`).join(", ")})`;
  return { seconds, text };
}

/** The hash part of a bound over `bytes` bytes: one core's time divided by the usable cores. */
export function hashPart(bytes: number, oneCoreSeconds = sha256SecondsOneCore(bytes)): BoundPart {
  const cores = usableCores();
  return { name: `SHA-256 on ${cores} core${cores === 1 ? "" : "s"}`, seconds: oneCoreSeconds / cores };
}

/**
 * The limit line printed under a table: the bound, ckpt's time as a fraction of what the bound
 * allows (1.00: at the limit), and the row's target beside it.
 */
export function limitLine(row: string, b: Bound, ckptSeconds: number, target: string): string {
  return `| physical limit of ${row} | ${b.text} = ${b.seconds.toFixed(3)} s | ckpt at ${
    (b.seconds / ckptSeconds).toFixed(2)
  }× the limit's speed | target: ${target} |`;
}

/** The load average (1, 5 and 15 minutes), or why there is none (`--allow-sys` not granted). */
export function loadAverage(): string {
  try {
    return Deno.loadavg().map((x) => x.toFixed(2)).join(" ");
  } catch (e) {
    return `unknown (${(e as Error).name})`;
  }
}

/**
 * The limits of a save and of a load + verify of `bytes` bytes in directory `dir`: a raw durable
 * write of them (one file written in 16 MiB pieces, `fdatasync`, the directory's `fsync`) or the
 * hash, and a raw read of that file into fresh memory or the hash. The file is removed after.
 */
export async function fileBounds(dir: string, bytes: number): Promise<{ saveBound: Bound; loadBound: Bound }> {
  // Best of 3 each: a limit is the fastest the medium went, not one cold try.
  const raw = `${dir}/raw-bound.bin`;
  const chunk = 16 * 2 ** 20;
  const count = Math.ceil(bytes / chunk);
  let writeSeconds = Infinity;
  let readSeconds = Infinity;
  for (let trial = 0; trial < 3; trial++) {
    await Deno.remove(raw).catch(() => {});
    // The raw durable write as ckpt makes it where FFI is granted: around the page cache
    // (O_DIRECT), then fdatasync and the directory's fsync.
    let t0 = performance.now();
    const dd = await new Deno.Command("dd", {
      args: ["if=/dev/zero", `of=${raw}`, `bs=${chunk}`, `count=${count}`, "oflag=direct", "conv=fdatasync"],
      stdout: "null",
      stderr: "null",
    }).output();
    if (!dd.success) throw new Error(`dd could not write ${raw}`);
    const d = await Deno.open(dir);
    await d.sync();
    d.close();
    writeSeconds = Math.min(writeSeconds, (performance.now() - t0) / 1000);
    // The raw read into fresh memory: 16 MiB buffers, as ckpt allocates a tensor's, kept to the
    // end as a load keeps its tensors (dropped, later ones reuse the memory of earlier ones).
    t0 = performance.now();
    const f = await Deno.open(raw);
    const kept: Uint8Array[] = [];
    for (let i = 0; i < count; i++) {
      const buf = new Uint8Array(chunk);
      kept.push(buf);
      for (let n = 0; n < chunk;) {
        const got = await f.read(buf.subarray(n));
        if (got === null) break;
        n += got;
      }
    }
    f.close();
    readSeconds = Math.min(readSeconds, (performance.now() - t0) / 1000);
  }
  await Deno.remove(raw);
  const hash = hashPart(bytes);
  return {
    saveBound: bound([
      { name: "raw durable write (dd oflag=direct conv=fdatasync, best of 3)", seconds: writeSeconds },
      hash,
    ]),
    loadBound: bound([{ name: "raw read into fresh memory (best of 3)", seconds: readSeconds }, hash]),
  };
}
