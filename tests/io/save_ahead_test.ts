import assert from "node:assert/strict";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import type { ObjectStore, ObjectWriter, WriteOptions } from "../../src/storage/types.ts";
import type { TensorInput } from "../../src/format/types.ts";

const MiB = 2 ** 20;

/** A MemoryStore whose writes take a few milliseconds each, logging when each starts and ends. */
function slowStore(log: string[], fail?: number): ObjectStore {
  const inner = new MemoryStore();
  return new Proxy(inner, {
    get(target, prop) {
      if (prop !== "writer") {
        const v = Reflect.get(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      }
      return async (key: string, options?: WriteOptions): Promise<ObjectWriter> => {
        const w = await target.writer(key, options);
        let n = 0;
        return {
          ...w,
          write: async (chunk: Uint8Array) => {
            const i = n++;
            log.push(`write ${i} start`);
            await new Promise((r) => setTimeout(r, 5));
            if (i === fail) throw new Error(`write ${i} failed`);
            await w.write(chunk);
            log.push(`write ${i} end`);
          },
          close: () => w.close(),
          abort: (reason?: unknown) => w.abort(reason),
        };
      };
    },
  });
}

function tensorsLogged(log: string[], count: number): AsyncIterable<TensorInput> {
  return (async function* () {
    for (let i = 0; i < count; i++) {
      log.push(`tensor ${i}`);
      const data = new Float32Array(MiB / 4).map((_, j) => i * 1000 + j);
      yield { name: `t${i}`, dtype: "float32", shape: [MiB / 4], data };
    }
  })();
}

Deno.test("saveCheckpoint to a store encodes the next chunk while one is written, bit for bit", async () => {
  const log: string[] = [];
  const store = slowStore(log);
  const r = await saveCheckpoint({ store, key: "a.ckpt" }, { metadata: { step: 1 }, tensors: tensorsLogged(log, 4) });
  // Each tensor after the first is asked for while the write of the chunk before it is in flight.
  for (let i = 1; i < 4; i++) {
    const at = log.indexOf(`tensor ${i}`);
    const started = log.slice(0, at).filter((e) => e.endsWith("start")).length;
    const ended = log.slice(0, at).filter((e) => e.endsWith("end")).length;
    assert.equal(started, ended + 1, `tensor ${i} was asked for with no write in flight: ${log.join(", ")}`);
  }
  const back = await loadCheckpoint({ store, key: "a.ckpt" }, { sha256: r.digest });
  assert.equal(back.tensors.length, 4);
  for (const [i, t] of back.tensors.entries()) {
    assert.deepEqual(t.data, new Float32Array(MiB / 4).map((_, j) => i * 1000 + j));
  }
});

Deno.test("saveCheckpoint to a store: a failed write is the save's error, and the encoder read ahead stops", async () => {
  const log: string[] = [];
  const store = slowStore(log, 3);
  await assert.rejects(
    saveCheckpoint({ store, key: "a.ckpt" }, { metadata: { step: 1 }, tensors: tensorsLogged(log, 8) }),
    /write 3 failed/,
  );
  // Nothing was asked for after the failure.
  assert.ok(!log.includes("tensor 7"), log.join(", "));
  assert.equal(await store.head("a.ckpt"), undefined);
});
