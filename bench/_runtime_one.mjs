// One timed operation of bench/node_compare.ts, the same script under Deno and under Node:
//
//   <runtime> _runtime_one.mjs <module> save|load|lazy <path> <MiB>
//
// `module` is what to import ckpt from: the repository's mod.ts under Deno, "@ckpt/ckpt" under
// Node (the script then sits in a project that installed the package). Prints one JSON line:
// the operation's seconds and the process's peak RSS (VmHWM) in bytes.
import process from "node:process";
import { readFileSync } from "node:fs";

const [module, op, path, mib] = process.argv.slice(2);
const { loadCheckpoint, saveCheckpoint } = await import(module);
const TENSOR = 16 * 2 ** 20; // bytes per tensor
const count = Math.max(1, Math.round((Number(mib) * 2 ** 20) / TENSOR));

function tensor(i) {
  const data = new Float32Array(TENSOR / 4);
  for (let j = 0; j < data.length; j += 1024) data[j] = i + j;
  return { name: `layer${i}/kernel`, dtype: "float32", shape: [data.length], data };
}

/** Tensors made as the encoder asks for them and dropped after: memory stays bounded. */
async function* lazy() {
  for (let i = 0; i < count; i++) yield tensor(i);
}

function peakRss() {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

let seconds;
if (op === "save") {
  const tensors = Array.from({ length: count }, (_, i) => tensor(i));
  const t0 = performance.now();
  await saveCheckpoint(path, { metadata: { step: 1 }, tensors });
  seconds = (performance.now() - t0) / 1000;
} else if (op === "load") {
  const t0 = performance.now();
  const back = await loadCheckpoint(path);
  seconds = (performance.now() - t0) / 1000;
  if (back.tensors.length !== count) throw new Error(`loaded ${back.tensors.length} tensors, expected ${count}`);
} else if (op === "lazy") {
  const t0 = performance.now();
  await saveCheckpoint(path, { metadata: { step: 1 }, tensors: lazy() });
  seconds = (performance.now() - t0) / 1000;
} else {
  throw new Error(`unknown operation ${op}`);
}
console.log(JSON.stringify({ seconds, peakRss: peakRss() }));
