/**
 * Side-by-side: the same tensors saved by ckpt (binary, binary+gzip, JSON), by `dd bs=16M
 * conv=fdatasync`, and — where Debian's python3-numpy / python3-torch are installed — by
 * `np.savez` and `torch.save` (each with fsync); then load + verify against
 * `openssl speed -evp sha256`, and peak RSS of lazy saves and tensor-by-tensor loads.
 * Every method runs in its own process, trials are interleaved, medians are printed with ratios.
 *
 *   deno task bench:compare [--sizes 64,512,1024] [--trials 3] [--json-max 64] [--gzip-max 512] [--dir DIR]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { join } from "node:path";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "64,512,1024" },
    trials: { type: "string", default: "3" },
    "json-max": { type: "string", default: "64" },
    "gzip-max": { type: "string", default: "512" },
    dir: { type: "string" },
  },
});
const sizes = values.sizes.split(",").map(Number);
const trials = Number(values.trials);
const jsonMax = Number(values["json-max"]);
const gzipMax = Number(values["gzip-max"]);
const dir = values.dir ?? await Deno.makeTempDir({ dir: join(import.meta.dirname!, "..", "tmp"), prefix: "bench-" })
  .catch(() => Deno.makeTempDir({ prefix: "ckpt-bench-" }));
await Deno.mkdir(dir, { recursive: true });
const one = new URL("./_save_one.ts", import.meta.url).pathname;
const deno = Deno.execPath();
const MiB = 2 ** 20;

interface Run {
  seconds: number;
  peakRss?: number;
  baseRss?: number;
}

/** Polls a child's VmHWM (peak RSS) until it exits; returns the last value seen. */
async function runTimed(cmd: string, args: string[]): Promise<{ seconds: number; stdout: string; peak: number }> {
  const t0 = performance.now();
  const child = new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).spawn();
  let peak = 0;
  let done = false;
  const poll = (async () => {
    while (!done) {
      try {
        const m = /VmHWM:\s+(\d+) kB/.exec(await Deno.readTextFile(`/proc/${child.pid}/status`));
        if (m) peak = Math.max(peak, Number(m[1]) * 1024);
      } catch { /* exited */ }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const out = await child.output();
  done = true;
  await poll;
  const seconds = (performance.now() - t0) / 1000;
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`);
  return { seconds, stdout: new TextDecoder().decode(out.stdout), peak };
}

async function ckpt(op: string, mib: number, out: string, extra: string[] = []): Promise<Run> {
  const r = await runTimed(deno, ["run", "-A", one, "--op", op, "--mib", String(mib), "--out", out, ...extra]);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

async function has(cmd: string, args: string[]): Promise<boolean> {
  try {
    return (await new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).output()).success;
  } catch {
    return false;
  }
}

const PY = "/usr/bin/python3";
const PY_SAVE = `
import json, os, sys, time
kind, raw, out = sys.argv[1], sys.argv[2], sys.argv[3]
import numpy as np
a = np.fromfile(raw, dtype=np.float32)
step = 4 * 1024 * 1024
arrays = {f"layer{i}/kernel": a[i * step:(i + 1) * step] for i in range((a.size + step - 1) // step)}
if kind == "torch":
    import torch
    arrays = {k: torch.from_numpy(v) for k, v in arrays.items()}
t = time.perf_counter()
with open(out, "wb") as f:
    if kind == "torch":
        torch.save(arrays, f)
    else:
        np.savez(f, **arrays)
    f.flush()
    os.fsync(f.fileno())
print(json.dumps({"seconds": time.perf_counter() - t}))
`;
const haveNumpy = await has(PY, ["-c", "import numpy"]);
const haveTorch = await has(PY, ["-c", "import torch"]);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
const fmtMB = (bytes: number, s: number) => `${(bytes / 1e6 / s).toFixed(0)} MB/s`;
const fmtMiB = (b: number) => `${(b / MiB).toFixed(0)} MiB`;

// openssl's single-thread SHA-256 speed on 16 KiB blocks, the ceiling for load + verify.
let opensslMBs = NaN;
try {
  const o = await new Deno.Command("openssl", {
    args: ["speed", "-evp", "sha256", "-seconds", "2"],
    stdout: "piped",
    stderr: "null",
  })
    .output();
  const line = new TextDecoder().decode(o.stdout).split("\n").find((l) => /^sha256\s/.test(l));
  const cols = line?.trim().split(/\s+/);
  opensslMBs = cols ? parseFloat(cols[5]!) * 1000 / 1e6 : NaN; // 16384-byte column, in kB/s
} catch { /* no openssl */ }

console.log(
  `ckpt save/load side by side — ${Deno.build.os}, ${navigator.hardwareConcurrency} cores, Deno ${Deno.version.deno}`,
);
console.log(`dir ${dir}; ${trials} trials per method, interleaved; medians; each method in its own process`);
console.log(
  "ckpt saves are timed after a 8 MiB warm-up save in the same process (steady state), except the 'first save' row",
);
console.log(`openssl speed -evp sha256 (16 KiB blocks): ${opensslMBs.toFixed(0)} MB/s`);
console.log(`python3-numpy: ${haveNumpy ? "yes" : "no"}, python3-torch: ${haveTorch ? "yes" : "no"}\n`);

for (const mib of sizes) {
  const bytes = mib * MiB;
  const raw = join(dir, `raw-${mib}.bin`);
  await ckpt("raw", mib, raw);
  const methods: [string, () => Promise<Run>][] = [
    ["dd bs=16M conv=fdatasync", async () => {
      const r = await runTimed("dd", [`if=${raw}`, `of=${join(dir, "dd.bin")}`, "bs=16M", "conv=fdatasync"]);
      return { seconds: r.seconds, peakRss: r.peak, baseRss: 0 };
    }],
    ["dd to a new file, then mv over", async () => {
      // What an atomic save has to do: the new bytes go to fresh pages while the old file keeps
      // its own until the rename (dd over an existing file recycles the pages it truncates).
      const r = await runTimed("sh", [
        "-c",
        `dd if="$0" of="$1.tmp" bs=16M conv=fdatasync 2>/dev/null && mv "$1.tmp" "$1"`,
        raw,
        join(dir, "dd-atomic.bin"),
      ]);
      return { seconds: r.seconds, peakRss: r.peak, baseRss: 0 };
    }],
    ["ckpt binary (sha256+fsync)", () => ckpt("save", mib, join(dir, "b.ckpt"), ["--warm"])],
    ["  same, first save in a process", () => ckpt("save", mib, join(dir, "b.ckpt"))],
    ["deno naive 1 MiB writes", () => ckpt("naive", mib, join(dir, "naive.bin"))],
  ];
  if (mib <= gzipMax) {
    methods.push(["ckpt binary+gzip", () => ckpt("save", mib, join(dir, "bg.ckpt"), ["--gzip", "--warm"])]);
  }
  if (mib <= jsonMax) {
    methods.push(["ckpt json", () => ckpt("save", mib, join(dir, "j.ckpt"), ["--codec", "json", "--warm"])]);
  }
  if (haveNumpy) {
    methods.push(["np.savez (+fsync)", async () => {
      const r = await runTimed(PY, ["-c", PY_SAVE, "numpy", raw, join(dir, "np.npz")]);
      return { ...JSON.parse(r.stdout), peakRss: r.peak };
    }]);
  }
  if (haveTorch) {
    methods.push(["torch.save (+fsync)", async () => {
      const r = await runTimed(PY, ["-c", PY_SAVE, "torch", raw, join(dir, "t.pt")]);
      return { ...JSON.parse(r.stdout), peakRss: r.peak };
    }]);
  }
  const results = new Map<string, Run[]>(methods.map(([n]) => [n, []]));
  for (let t = 0; t < trials; t++) {
    for (const [name, fn] of methods) results.get(name)!.push(await fn());
  }
  // Loads, page cache warm, each in a fresh process.
  const loads: Run[] = [];
  for (let t = 0; t < trials; t++) loads.push(await ckpt("load", mib, join(dir, "b.ckpt")));
  const lazy = await ckpt("save-lazy", mib, join(dir, "lazy.ckpt"));
  const stream = await ckpt("load-stream", mib, join(dir, "lazy.ckpt"));

  const ddMed = median(results.get("dd bs=16M conv=fdatasync")!.map((r) => r.seconds));
  console.log(`== ${mib} MiB of float32 tensors (${Math.ceil(mib / 16)} × 16 MiB) ==`);
  console.log("method                          median s   throughput   vs dd   peak RSS");
  for (const [name] of methods) {
    const runs = results.get(name)!;
    const s = median(runs.map((r) => r.seconds));
    const peak = Math.max(...runs.map((r) => r.peakRss ?? 0));
    console.log(
      `${name.padEnd(32)}${s.toFixed(3).padStart(8)}   ${fmtMB(bytes, s).padStart(10)}   ${
        (ddMed / s).toFixed(2).padStart(5)
      }×   ${fmtMiB(peak)}`,
    );
  }
  const loadMed = median(loads.map((r) => r.seconds));
  console.log(
    `ckpt load + verify (binary)     ${loadMed.toFixed(3).padStart(8)}   ${fmtMB(bytes, loadMed).padStart(10)}   ${
      (bytes / 1e6 / loadMed / opensslMBs).toFixed(2)
    }× openssl sha256`,
  );
  console.log(
    `bounded memory: lazy save peak RSS +${fmtMiB(lazy.peakRss! - lazy.baseRss!)} over start (${
      fmtMB(bytes, lazy.seconds)
    }); tensor-by-tensor load +${fmtMiB(stream.peakRss! - stream.baseRss!)} (${fmtMB(bytes, stream.seconds)})\n`,
  );
}
if (!values.dir) await Deno.remove(dir, { recursive: true });
