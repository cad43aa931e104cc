// A module worker for the "without createWritable" test: takes createWritable away if its URL asks
// (`?remove=1`, as Safari before 26 has it), then saves and loads a checkpoint on OPFS and posts
// what happened, with how often each way of writing was asked for; then a save over it that fails
// half way, which must leave the first file whole and no temporary file behind. (Asked by URL, not by a message: one posted while the module still loads is lost.)
import { loadCheckpoint, saveCheckpoint } from "../../../mod.ts";

type Handle = { prototype: Record<string, unknown> };

async function run(remove: boolean): Promise<void> {
  const proto = (globalThis as unknown as { FileSystemFileHandle: Handle }).FileSystemFileHandle.prototype;
  if (remove) delete proto.createWritable;
  const writable = typeof proto.createWritable === "function";
  const sync = typeof proto.createSyncAccessHandle === "function";
  // Which of the two wrote the checkpoint: each call counted.
  const calls = { sync: 0, writable: 0 };
  for (const [method, key] of [["createSyncAccessHandle", "sync"], ["createWritable", "writable"]] as const) {
    const real = proto[method] as ((...args: unknown[]) => unknown) | undefined;
    if (real) {
      proto[method] = function (this: unknown, ...args: unknown[]) {
        calls[key]++;
        return real.apply(this, args);
      };
    }
  }
  try {
    const data = new Float32Array(300_000).map((_, i) => (i % 251) / 7);
    await saveCheckpoint("opfs:///nowritable/worker.ckpt", {
      metadata: { step: 3 },
      tensors: [{ name: "w", dtype: "float32", shape: [data.length], data }],
    });
    // A save over it that fails half way (its second tensor throws, after the first was
    // written in place into the temporary file): the previous file stays whole, nothing is left.
    let failed = "";
    await saveCheckpoint("opfs:///nowritable/worker.ckpt", {
      metadata: { step: 4 },
      tensors: (async function* () {
        yield { name: "w", dtype: "float32" as const, shape: [data.length], data: data.map((x) => x + 1) };
        throw new Error("the second tensor failed");
      })(),
    }).catch((e) => failed = (e as Error).message);
    const temp = await (await (await navigator.storage.getDirectory()).getDirectoryHandle("nowritable"))
      .getDirectoryHandle(".ckpt-tmp", { create: true }) as unknown as { keys(): AsyncIterable<string> };
    const leftovers: string[] = [];
    for await (const name of temp.keys()) leftovers.push(name);
    const back = await loadCheckpoint("opfs:///nowritable/worker.ckpt");
    const got = back.tensors[0]!.data as Float32Array;
    const same = got.length === data.length && got.every((x, i) => x === data[i]);
    postMessage({ error: "", same, step: back.metadata.step, writable, sync, calls, failed, leftovers });
  } catch (err) {
    postMessage({ error: `${(err as Error).name}: ${(err as Error).message}`, writable, sync, calls });
  }
}

await run(new URL(import.meta.url).searchParams.get("remove") === "1");
