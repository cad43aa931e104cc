/**
 * Peak memory of a checkpoint on the native `tensorflow` backend (tfjs-node): a model of
 * `--mib` MiB of float32 weights (in `--tensors` equal variables, living in TensorFlow's own
 * memory) is snapshotted and written in the background by a `CheckpointWriter`, in a process of
 * its own; the peak RSS above the RSS before the save (VmHWM, reset through
 * /proc/self/clear_refs) is compared with the model's size. A snapshot holds one copy (1.0x:
 * the copies tfjs-node's `data()` hands out, kept as the snapshot's arrays:
 * src/tfjs/_read_back.ts); beyond it come the writer's buffers.
 *
 * `--mode` picks what the child does after the model is built:
 * - `writer` (default): `CheckpointWriter.save(path, { model, step })`, awaited;
 * - `datasync`: the peer: `dataSync()` of every weight, the arrays kept until all are read (what
 *   copying the tensors out costs without a staging buffer).
 *
 * Run (the lead's quiet run, 256 MiB): `deno run -A --no-lock bench/native_memory.ts --mib 256`
 * (each mode runs in a child with `-A`, which writing /proc/self/clear_refs needs);
 * `--json` prints one line per mode. Needs `deno task setup:native` first.
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { loadTfjsNode } from "../src/tfjs/_tfjs_node.ts";
import { CheckpointWriter } from "../src/tfjs/mod.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mib: { type: "string", default: "256" },
    tensors: { type: "string", default: "16" },
    mode: { type: "string" },
    json: { type: "boolean", default: false },
  },
});
const MIB = Number(values.mib);
const TENSORS = Number(values.tensors);
if (!(MIB > 0) || !Number.isSafeInteger(TENSORS) || TENSORS < 1) {
  throw new RangeError("--mib and --tensors must be > 0");
}

/** What one child measured, in bytes. */
export interface MemoryResult {
  mode: string;
  modelBytes: number;
  baseRss: number;
  peakRss: number;
  /** (peak - base) / model size. */
  ratio: number;
}

function status(field: string): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(Deno.readTextFileSync("/proc/self/status"));
  return Number(m![1]) * 1024;
}

async function child(mode: string): Promise<MemoryResult> {
  await loadTfjsNode();
  tf.env().set("PROD", true);
  const elements = Math.floor((MIB * 2 ** 20) / 4 / TENSORS);
  const model: Record<string, tf.Variable> = {};
  for (let i = 0; i < TENSORS; i++) {
    // Made by TensorFlow ops (tile, add), as after a training step: the values live in its memory
    // and no tensor-sized JS array is made (tfjs-core's random ops fill JS arrays, whose freed
    // pages malloc would reuse during the measurement).
    const values = tf.tidy(() => {
      const piece = tf.randomUniform([Math.min(elements, 1024)], -1, 1, "float32", i);
      return tf.add(tf.slice(tf.tile(piece, [Math.ceil(elements / piece.size)]), 0, elements), tf.scalar(i));
    });
    model[`w${i}`] = tf.variable(values, true, `mem_w${i}`);
    values.dispose();
  }
  // No read-back before the measurement, for the same reason. (The ops ran eagerly.)
  const dir = await Deno.makeTempDir({ prefix: "ckpt_native_mem_" });
  const writer = new CheckpointWriter();
  // The worker started, its code loaded and idle: its baseline is not the save's cost.
  await writer.save(`${dir}/warm.ckpt`, { model: { w: tf.variable(tf.zeros([1]), false, "mem_warm") }, step: 0 });
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((r) => setTimeout(r, 100));
  Deno.writeTextFileSync("/proc/self/clear_refs", "5");
  const baseRss = status("VmRSS");
  if (mode === "writer") {
    await writer.save(`${dir}/model.ckpt`, { model, step: 1 });
  } else if (mode === "datasync") {
    const arrays = Object.values(model).map((v) => v.dataSync());
    if (arrays.length !== TENSORS) throw new Error("unreachable");
  } else {
    throw new TypeError(`--mode must be writer or datasync, got ${JSON.stringify(mode)}`);
  }
  const peakRss = status("VmHWM");
  await writer.close();
  await Deno.remove(dir, { recursive: true });
  const modelBytes = elements * 4 * TENSORS;
  return { mode, modelBytes, baseRss, peakRss, ratio: (peakRss - baseRss) / modelBytes };
}

const mib = (n: number) => (n / 2 ** 20).toFixed(1);

if (import.meta.main) {
  if (values.mode) {
    console.log(JSON.stringify(await child(values.mode)));
  } else {
    const results: MemoryResult[] = [];
    for (const mode of ["writer", "datasync"]) {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--no-lock",
          "-A", // writing /proc/self/clear_refs needs all access
          "--v8-flags=--expose-gc",
          fileURLToPath(import.meta.url),
          "--mib",
          String(MIB),
          "--tensors",
          String(TENSORS),
          "--mode",
          mode,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout).trim();
      if (!out.success) throw new Error(`${mode} child failed:\n${text}\n${new TextDecoder().decode(out.stderr)}`);
      results.push(JSON.parse(text.split("\n").at(-1)!));
    }
    if (values.json) { for (const r of results) console.log(JSON.stringify(r)); }
    else {
      console.log(
        `native backend, ${mib(results[0]!.modelBytes)} MiB model in ${TENSORS} tensors, each mode its own process`,
      );
      for (const r of results) {
        console.log(
          `  ${r.mode.padEnd(8)} peak RSS ${mib(r.peakRss)} MiB, ${mib(r.peakRss - r.baseRss)} MiB above the ` +
            `${mib(r.baseRss)} MiB before: ${r.ratio.toFixed(2)}x the model`,
        );
      }
    }
  }
}
