// Test child for "permission denied": run as an unprivileged user (the test drops root to
// `nobody`, since root ignores file modes). Saves step 1, makes the directory read-only, tries
// step 2, and prints what happened as JSON.
import { join } from "node:path";
import { CheckpointManager } from "../../src/manager/mod.ts";

const [dir, mode] = Deno.args as [string, "full" | "incremental"];

async function files(d: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(d)) {
    if (e.isDirectory) out.push(...await files(join(d, e.name), `${prefix}${e.name}/`));
    else out.push(prefix + e.name);
  }
  return out.sort();
}

const tensors = (step: number) => [
  { name: "a", dtype: "float32" as const, shape: [1024], data: new Float32Array(1024).fill(step) },
  { name: "b", dtype: "float32" as const, shape: [4], data: new Float32Array([1, 2, 3, 4]) },
];
const manager = await CheckpointManager.open(dir, { incremental: mode === "incremental", onWarning: () => {} });
await manager.save({ metadata: { step: 1 }, tensors: tensors(1) });
const before = await files(dir);
await Deno.chmod(dir, 0o555);
let error: { name: string; message: string; code?: string } | undefined;
try {
  await manager.save({ metadata: { step: 2 }, tensors: tensors(2) });
} catch (e) {
  error = { name: (e as Error).name, message: (e as Error).message, code: (e as { code?: string }).code };
}
const after = await files(dir);
const latest = await manager.latest();
await Deno.chmod(dir, 0o755);
await manager.close();
console.log(JSON.stringify({ uid: Deno.uid(), error, before, after, latest: latest?.metadata.step }));
