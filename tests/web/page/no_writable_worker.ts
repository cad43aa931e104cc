// A module worker for the "without createWritable" test: takes createWritable away if its URL asks
// (`?remove=1`, as Safari before 26 has it), then saves and loads a checkpoint on OPFS and posts
// what happened. (Asked by URL, not by a message: one posted while the module still loads is lost.)
import { loadCheckpoint, saveCheckpoint } from "../../../mod.ts";

type Handle = { prototype: Record<string, unknown> };

async function run(remove: boolean): Promise<void> {
  const proto = (globalThis as unknown as { FileSystemFileHandle: Handle }).FileSystemFileHandle.prototype;
  if (remove) delete proto.createWritable;
  const writable = typeof proto.createWritable === "function";
  const sync = typeof proto.createSyncAccessHandle === "function";
  try {
    const data = new Float32Array(300_000).map((_, i) => (i % 251) / 7);
    await saveCheckpoint("opfs:///nowritable/worker.ckpt", {
      metadata: { step: 3 },
      tensors: [{ name: "w", dtype: "float32", shape: [data.length], data }],
    });
    const back = await loadCheckpoint("opfs:///nowritable/worker.ckpt");
    const got = back.tensors[0]!.data as Float32Array;
    const same = got.length === data.length && got.every((x, i) => x === data[i]);
    postMessage({ error: "", same, step: back.metadata.step, writable, sync });
  } catch (err) {
    postMessage({ error: `${(err as Error).name}: ${(err as Error).message}`, writable, sync });
  }
}

await run(new URL(import.meta.url).searchParams.get("remove") === "1");
