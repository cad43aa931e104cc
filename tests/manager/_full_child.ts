// A save that runs out of space, in a process of its own (run with FFI granted, so a durable
// save writes around the page cache): prints the error and what the directory held before and
// after. Used by errors_test.ts on a 1 MiB tmpfs.
import { CheckpointManager } from "../../src/manager/mod.ts";
import { names } from "./_helpers.ts";

const [dir] = Deno.args as [string];
const manager = await CheckpointManager.open(dir, { onWarning: () => {} });
const small = { name: "a", dtype: "float32" as const, shape: [1000], data: new Float32Array(1000).fill(1) };
await manager.save({ metadata: { step: 1 }, tensors: [small] });
const before = await names(dir);
// 300 KB that fits, then 2 MB that does not.
const fits = { name: "b", dtype: "float32" as const, shape: [75_000], data: new Float32Array(75_000).fill(2) };
const huge = { name: "c", dtype: "float32" as const, shape: [500_000], data: new Float32Array(500_000).fill(3) };
let error: { name: string; code?: string; message: string } | undefined;
try {
  await manager.save({ metadata: { step: 2 }, tensors: [fits, huge] });
} catch (e) {
  error = { name: (e as Error).name, code: (e as { code?: string }).code, message: (e as Error).message };
}
const after = await names(dir);
const latest = await manager.latest();
const intact = latest?.metadata.step === 1 && (latest.tensors[0]!.data as Float32Array).every((v) => v === 1);
await manager.save({ metadata: { step: 3 }, tensors: [small] }); // space is free again
await manager.close();
console.log(JSON.stringify({ error, before, after, intact, last: (await names(dir)).length }));
