// Loads a checkpoint of large tensors in a process of its own (run with or without FFI) and
// prints whether the tensors' buffers were advised to use huge pages, whether the load was bit
// for bit, and how much of the process's memory the kernel backed with huge pages.
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { adviseHugePages } from "../../src/storage/_huge_pages.ts";

const dir = await Deno.makeTempDir();
try {
  const path = `${dir}/big.ckpt`;
  const tensors = [0, 1, 2].map((k) => {
    const data = new Uint32Array(2 * 2 ** 20).map((_, i) => Math.imul(i + 1, 2654435761 + k) >>> 0);
    return { name: `t${k}`, dtype: "uint32" as const, shape: [data.length], data };
  });
  await saveCheckpoint(path, { metadata: { step: 1 }, tensors });
  const hugeBefore = anonHuge();
  const back = await loadCheckpoint(path);
  const exact = back.tensors.length === 3 &&
    back.tensors.every((t, k) =>
      t.name === `t${k}` && new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
        .every((b, i) => b === new Uint8Array(tensors[k]!.data.buffer)[i])
    );
  const hugeAfter = anonHuge();
  const advised = adviseHugePages(new Uint8Array(8 * 2 ** 20));
  console.log(JSON.stringify({ advised, exact, hugeBefore, hugeAfter, mode: thpMode() }));
} finally {
  await Deno.remove(dir, { recursive: true });
}

/** AnonHugePages of this process, in bytes (NaN where /proc is not readable). */
function anonHuge(): number {
  try {
    const m = /AnonHugePages:\s+(\d+) kB/.exec(Deno.readTextFileSync("/proc/self/smaps_rollup"));
    return m ? Number(m[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** The kernel's transparent huge page mode: "always", "madvise" or "never" ("" where there is none). */
function thpMode(): string {
  try {
    return /\[(\w+)\]/.exec(Deno.readTextFileSync("/sys/kernel/mm/transparent_hugepage/enabled"))?.[1] ?? "";
  } catch {
    return "";
  }
}
