// A BackgroundWriter's worker runs below the calling thread's priority (nice BACKGROUND_NICE on
// Linux), and so do the threads that do its save's work; `priority: "normal"` leaves them.
// The nice values are read from the kernel (ps, /proc/<pid>/task), not from the writer.

import assert from "node:assert/strict";
import { BACKGROUND_NICE, BackgroundWriter } from "../../src/background/writer.ts";
import { CheckpointWriter } from "../../src/tfjs/checkpoint_writer.ts";
import type { TensorInput } from "../../src/format/types.ts";

const linux = Deno.build.os === "linux";

interface Thread {
  tid: number;
  nice: number;
  name: string;
}

/** This process's threads as the kernel lists them. */
async function threads(): Promise<Thread[]> {
  const out = await new Deno.Command("ps", { args: ["-L", "-o", "tid=,ni=,comm=", "-p", String(Deno.pid)] }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).trim().split("\n").map((line) => {
    const [tid, nice, ...name] = line.trim().split(/\s+/);
    return { tid: Number(tid), nice: Number(nice), name: name.join(" ") };
  });
}

function tensors(mib: number): TensorInput[] {
  const data = new Float32Array(mib * 2 ** 18).map((_, i) => i % 1000);
  return [{ name: "w", dtype: "float32", shape: [data.length], data }];
}

Deno.test({
  name: "BackgroundWriter runs its worker at nice BACKGROUND_NICE by default, and the calling thread stays as it was",
  ignore: !linux,
  async fn() {
    const dir = await Deno.makeTempDir();
    const writer = new BackgroundWriter();
    try {
      await writer.save(`${dir}/a.ckpt`, { metadata: { step: 1 }, tensors: tensors(4) });
      const all = await threads();
      const worker = all.filter((t) => t.name.startsWith("worker-") && t.nice === BACKGROUND_NICE);
      assert.ok(worker.length >= 1, `no worker thread at nice ${BACKGROUND_NICE}: ${JSON.stringify(all)}`);
      assert.equal(all.find((t) => t.tid === Deno.pid)!.nice, 0, "the main thread was lowered too");
    } finally {
      await writer.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: 'BackgroundWriter with priority "normal" lowers no thread',
  ignore: !linux,
  async fn() {
    const dir = await Deno.makeTempDir();
    // A worker of an earlier test may still be ending: only threads made from here on count.
    const earlier = new Set((await threads()).map((t) => t.tid));
    const writer = new BackgroundWriter({ priority: "normal" });
    try {
      await writer.save(`${dir}/a.ckpt`, { metadata: { step: 1 }, tensors: tensors(4) });
      const made = (await threads()).filter((t) => !earlier.has(t.tid));
      assert.ok(made.some((t) => t.name.startsWith("worker-")), `no worker thread: ${JSON.stringify(made)}`);
      assert.deepEqual(made.filter((t) => t.nice !== 0), [], "a thread runs below normal priority");
    } finally {
      await writer.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("BackgroundWriter and CheckpointWriter refuse a misspelt priority", async () => {
  assert.throws(
    () => new BackgroundWriter({ priority: "low" as never }),
    (e: unknown) =>
      e instanceof TypeError && e.message === 'Invalid option priority: "low", expected "background" or "normal"',
  );
  assert.throws(() => new BackgroundWriter({ priorty: "normal" } as never), TypeError);
  assert.throws(() => new CheckpointWriter({ priority: "idle" as never }), /Invalid option priority: "idle"/);
  const writer = new CheckpointWriter({ priority: "normal" }); // a valid value is taken
  await writer.close();
});

Deno.test({
  name: 'CheckpointWriter hands its priority to its worker: lowered by default, not with priority "normal"',
  ignore: !linux,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      for (const [priority, nice] of [[undefined, BACKGROUND_NICE], ["normal", 0]] as const) {
        const earlier = new Set((await threads()).map((t) => t.tid));
        const writer = new CheckpointWriter(priority ? { priority } : {});
        try {
          await writer.fileWriter.save(`${dir}/a.ckpt`, { metadata: { step: 1 }, tensors: tensors(1) }, {});
          const workers = (await threads()).filter((t) => !earlier.has(t.tid) && t.name.startsWith("worker-"));
          assert.ok(workers.length >= 1, "no worker thread");
          assert.deepEqual(workers.map((t) => t.nice), workers.map(() => nice), `priority ${priority}`);
        } finally {
          await writer.close();
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "a background save still finishes while two threads at normal priority keep both cores busy",
  ignore: !linux,
  async fn() {
    // Two spinning workers until the save is written. At nice 10 the save gets about a tenth of a
    // core, so 4 MiB takes well under a second here; the bound only says it is not starved.
    const stop = new Int32Array(new SharedArrayBuffer(4));
    const spin =
      `self.onmessage = (e) => { const stop = e.data; while (Atomics.load(stop, 0) === 0); self.postMessage("done"); };`;
    const spinners = [0, 1].map(() =>
      new Worker(`data:text/javascript,${encodeURIComponent(spin)}`, { type: "module" })
    );
    const stopped = spinners.map((w) => new Promise((resolve) => w.onmessage = resolve));
    for (const w of spinners) w.postMessage(stop);
    const dir = await Deno.makeTempDir();
    const writer = new BackgroundWriter();
    try {
      const t0 = performance.now();
      const { bytes } = await writer.save(`${dir}/a.ckpt`, { metadata: { step: 1 }, tensors: tensors(4) });
      assert.ok(bytes > 4 * 2 ** 20);
      assert.ok(performance.now() - t0 < 60_000, "the save was starved");
    } finally {
      Atomics.store(stop, 0, 1);
      await Promise.all(stopped);
      for (const w of spinners) w.terminate();
      await writer.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/**
 * In a process given every permission (so the worker may read /proc/self/task): the threads that
 * did CPU work while 4 saves of 16 MiB ran, with their nice values and clock ticks.
 */
async function busyThreadsOfSaves(priority: "background" | "normal"): Promise<Thread[]> {
  const writerUrl = new URL("../../src/background/writer.ts", import.meta.url).href;
  const dir = await Deno.makeTempDir();
  try {
    const script = `${dir}/script.ts`;
    await Deno.writeTextFile(
      script,
      `import { BackgroundWriter } from ${JSON.stringify(writerUrl)};
      const ticks = () => new Map([...Deno.readDirSync("/proc/self/task")].map((e) => {
        const stat = Deno.readTextFileSync("/proc/self/task/" + e.name + "/stat");
        const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        return [Number(e.name), { name, nice: Number(f[16]), cpu: Number(f[11]) + Number(f[12]) }];
      }));
      const writer = new BackgroundWriter({ priority: ${JSON.stringify(priority)}, idleTimeout: Infinity });
      const data = Array.from({ length: 4 }, () => new Float32Array(4 * 2 ** 20).map((_, i) => i % 1000));
      const before = ticks();
      for (const [i, d] of data.entries()) {
        await writer.save(${JSON.stringify(dir)} + "/" + i + ".ckpt", {
          metadata: { step: i }, tensors: [{ name: "w", dtype: "float32", shape: [d.length], data: d }],
        });
      }
      const after = ticks();
      await writer.close();
      const busy = [...after].filter(([tid, t]) => tid !== Deno.pid && t.cpu > (before.get(tid)?.cpu ?? 0))
        .map(([tid, t]) => ({ tid, nice: t.nice, name: t.name, ticks: t.cpu - (before.get(tid)?.cpu ?? 0) }));
      console.log(JSON.stringify(busy));`,
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", script],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(60_000),
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name: "with --allow-all, the threads that encode, hash and write a background save all run at the lowered priority",
  ignore: !linux,
  async fn() {
    // The worker, and the blocking-pool threads of its runtime that hash (FFI) and write,
    // including those its runtime made before the worker's first line ran.
    const busy = (await busyThreadsOfSaves("background")).filter((t) => !t.name.startsWith("V8 "));
    assert.ok(busy.some((t) => t.name.startsWith("worker-")), JSON.stringify(busy));
    assert.ok(busy.some((t) => t.name.startsWith("tokio")), `no pool thread did work: ${JSON.stringify(busy)}`);
    assert.deepEqual(busy.filter((t) => t.nice !== BACKGROUND_NICE), [], "a thread of the save was not lowered");
    // The same saves at normal priority: the same kinds of threads, none lowered.
    const normal = (await busyThreadsOfSaves("normal")).filter((t) => !t.name.startsWith("V8 "));
    assert.deepEqual(normal.filter((t) => t.nice !== 0), []);
  },
});
