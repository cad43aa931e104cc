// Background saving in a page with the TF.js adapter, in Chromium, Firefox and WebKit: CheckpointWriter
// snapshots the model on the page's thread and commits it through a CheckpointManager on OPFS
// whose files its Web Worker encodes, hashes and writes (the worker opens OPFS itself) while
// training steps go on; the newest checkpoint restores bit for bit into a fresh model. On the cpu
// and wasm backends, and on webgpu where the browser offers an adapter (SwiftShader here). A save
// that fails in the worker rejects with an error naming the step, the address and the cause.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { basename, join } from "node:path";
import { browserTest } from "./_browser.ts";

/** TF.js's WebAssembly binaries, served to the page from the test's /files/. */
async function serveWasm(filesDir: string): Promise<void> {
  const require = createRequire(import.meta.url);
  for (const f of ["tfjs-backend-wasm.wasm", "tfjs-backend-wasm-simd.wasm", "tfjs-backend-wasm-threaded-simd.wasm"]) {
    const src = require.resolve(`@tensorflow/tfjs-backend-wasm/dist/${f}`);
    await Deno.copyFile(src, join(filesDir, basename(src)));
  }
}

type Lib = typeof import("./page/tfjs_entry.ts");
declare const m: Lib;

/** What the page reports: why it skipped, or what it saw. */
type Outcome = { skipped: string } | {
  workers: string[];
  stepsWhileSaving: number;
  bytes: number;
  atSave: string[];
  afterTraining: string[];
  directState: string[];
  restored: string[];
  committed: number[];
  latestStep: number;
  onOpfs: string[];
  iterations: number[];
  missing: string[];
  mismatched: number;
};

browserTest(
  "CheckpointWriter in a page: a Web Worker writes a manager's checkpoints to OPFS while training goes on",
  { entries: { tfjs: "tests/web/page/tfjs_entry.ts" } },
  async (t, ctx) => {
    await serveWasm(ctx.filesDir);
    await t.step("a BackgroundWriter's save posted as its worker starts is written to OPFS", async () => {
      // The worker is still loading (its SHA-256 compiles WebAssembly at the top level) when the
      // request arrives: it must not be lost.
      const r = await ctx.page.evaluate(async () => {
        const writer = new m.BackgroundWriter();
        const data = new Float32Array(1024).map((_, i) => i);
        const saved = await Promise.race([
          writer.save("opfs:///background/first.ckpt", {
            metadata: { step: 1 },
            tensors: [{ name: "w", dtype: "float32", shape: [1024], data }],
          }),
          new Promise<undefined>((r) => setTimeout(() => r(undefined), 60_000)),
        ]);
        if (!saved) return { error: "the save did not settle within 60 s" }; // (close() would wait for it)
        await writer.close();
        const back = await m.loadCheckpoint("opfs:///background/first.ckpt", { sha256: saved.digest });
        return { error: "", sum: (back.tensors[0]!.data as Float32Array).reduce((a, b) => a + b, 0) };
      });
      assert.deepEqual(r, { error: "", sum: (1023 * 1024) / 2 });
    });

    await t.step(
      "a save that fails in the worker rejects clearly; a store the worker cannot open throws at once",
      async () => {
        const r = await ctx.page.evaluate(async () => {
          const store = await m.OpfsStore.open("background/failing");
          await store.put("blocked", new Uint8Array([1])); // a file where the save needs a directory
          const writer = new m.BackgroundWriter();
          const checkpoint = (step: number) => ({
            metadata: { step },
            tensors: [{ name: "w", dtype: "float32" as const, shape: [2], data: new Float32Array([1, 2]) }],
          });
          const said = (e: unknown) => `${(e as Error).name}: ${(e as Error).message}`;
          let failed = "";
          let cause = "";
          try {
            await writer.save({ store, key: "blocked/step-5.ckpt" }, checkpoint(5));
          } catch (e) {
            failed = said(e);
            cause = said((e as Error).cause);
          }
          // An OpfsStore on a handle of the page's own has no address: the worker could not open it.
          type Dir = { getDirectoryHandle(name: string, o: { create: boolean }): Promise<unknown> };
          const root = await (navigator as unknown as { storage: { getDirectory(): Promise<Dir> } }).storage
            .getDirectory();
          const own = new m.OpfsStore(await root.getDirectoryHandle("background", { create: true }) as never);
          let atOnce = "";
          try {
            writer.save({ store: own, key: "a.ckpt" }, checkpoint(6));
          } catch (e) {
            atOnce = said(e);
          }
          const later = await writer.save({ store, key: "ok/step-7.ckpt" }, checkpoint(7)); // the writer goes on
          await writer.close(); // the failure was awaited above: not reported again
          return { failed, cause, atOnce, later: later.bytes > 0 };
        });
        assert.match(
          r.failed,
          /^Error: Cannot save checkpoint \(step 5\) to "opfs:\/\/\/background\/failing\/blocked\/step-5\.ckpt": /,
        );
        assert.match(r.failed, /: TypeMismatchError: /, r.failed);
        assert.match(r.cause, /TypeMismatchError/, r.cause);
        assert.match(
          r.atOnce,
          /^TypeError: Cannot save checkpoint in the background to opfs:\/\/\/background\/a\.ckpt: a worker cannot open that store/,
        );
        assert.ok(r.later);
      },
    );

    for (const backend of ["cpu", "wasm", "webgpu"]) {
      await t.step(backend, async () => {
        if (backend === "cpu" && ctx.engine === "webkit") {
          // Each of the page's own steps of a save (the manager's OPFS calls) waits for a training
          // step to end, and TF.js's cpu backend takes seconds a step in JavaScriptCore here.
          return console.log(
            "cpu skipped in WebKit: TF.js's cpu backend trains this model too slowly there (wasm runs)",
          );
        }
        const r: Outcome = await ctx.page.evaluate(async (backend: string): Promise<Outcome> => {
          const { tf } = m;
          if (backend === "webgpu") {
            const gpu = (navigator as { gpu?: { requestAdapter(): Promise<unknown> } }).gpu;
            if (!gpu) return { skipped: "this browser has no navigator.gpu" };
            if (!(await gpu.requestAdapter())) return { skipped: "navigator.gpu.requestAdapter() gave no adapter" };
          }
          if (backend === "wasm") m.setWasmPaths("/files/");
          if (!(await tf.setBackend(backend))) throw new Error(`tf.setBackend("${backend}") failed`);
          await tf.ready();
          const build = () => {
            const init = (n: number) => tf.initializers.glorotUniform({ seed: n });
            const model = tf.sequential({
              layers: [
                tf.layers.dense({
                  name: "fc1",
                  units: 512,
                  inputShape: [512],
                  activation: "relu",
                  kernelInitializer: init(1),
                }),
                tf.layers.dense({ name: "fc2", units: 512, activation: "relu", kernelInitializer: init(2) }),
                tf.layers.dense({ name: "out", units: 1, kernelInitializer: init(3) }),
              ],
            });
            const optimizer = tf.train.adam(0.001);
            model.compile({ optimizer, loss: "meanSquaredError" });
            return { model, optimizer };
          };
          const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");
          const digests = async (ts: { data(): Promise<ArrayLike<number>> }[]) => {
            const out = [];
            for (const x of ts) {
              const d = (await x.data()) as Float32Array;
              out.push(hex(await crypto.subtle.digest("SHA-256", d.slice())));
            }
            return out;
          };
          const state = async (s: ReturnType<typeof build>) => [
            ...await digests(s.model.getWeights()),
            ...await digests((await s.optimizer.getWeights()).map((w) => w.tensor)),
          ];
          const x = tf.randomNormal([32, 512], 0, 1, "float32", 7);
          const y = tf.randomNormal([32, 1], 0, 1, "float32", 8);
          const a = build();
          for (let i = 0; i < 3; i++) await a.model.trainOnBatch(x, y);
          const atSave = await state(a);

          const workers: string[] = [];
          const RealWorker = globalThis.Worker;
          globalThis.Worker = class extends RealWorker {
            constructor(u: string | URL, o?: WorkerOptions) {
              workers.push(String(u));
              super(u, o);
            }
          };
          const writer = new m.CheckpointWriter();
          globalThis.Worker = RealWorker;
          // The manager names, indexes and prunes; its files are written by the writer's worker.
          const manager = await m.CheckpointManager.open(`opfs:///background/${backend}`, {
            maxToKeep: 2,
            writer: writer.fileWriter,
          });
          let saved = false;
          const saving = writer.save(manager, { model: a.model, optimizer: a.optimizer, step: 3 });
          saving.then(() => saved = true, () => saved = true);
          // Training goes on while the worker encodes, hashes and writes.
          let stepsWhileSaving = 0;
          const giveUp = performance.now() + 120_000; // a hung worker fails the test, not the protocol
          while (!saved) {
            if (performance.now() > giveUp) {
              throw new Error(`no answer from the worker after ${stepsWhileSaving} steps`);
            }
            await a.model.trainOnBatch(x, y);
            stepsWhileSaving++;
            await new Promise((r) => setTimeout(r, 0)); // lets the worker's reply in
          }
          const entry = await saving;
          // A save to a path streams its snapshot to the worker (in a page, the staging buffer whole).
          const directUrl = `opfs:///background/${backend}-direct.ckpt`;
          const direct = await writer.save(directUrl, { model: a.model, optimizer: a.optimizer, step: 9 });
          await writer.close();
          const afterTraining = await state(a);
          const directBack = await m.loadCheckpoint(directUrl, { sha256: direct.digest });
          const directState: string[] = [];
          for (const t of directBack.tensors) {
            const view = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
            directState.push(hex(await crypto.subtle.digest("SHA-256", view.slice())));
          }

          const committed = (await manager.list()).map((e) => e.step);
          const latest = (await manager.latest())!; // every digest checked, the file's too
          await manager.close();
          const onOpfs: string[] = [];
          for await (const o of (await m.OpfsStore.open(`background/${backend}`)).list()) onOpfs.push(o.key);
          const b = build();
          const report = await m.restore(latest, { model: b.model, optimizer: b.optimizer });
          const restored = await state(b);
          const iterations = [a.optimizer.iterations, b.optimizer.iterations];
          a.model.dispose();
          b.model.dispose();
          x.dispose();
          y.dispose();
          return {
            workers,
            stepsWhileSaving,
            bytes: entry.bytes,
            atSave,
            afterTraining,
            directState,
            restored,
            committed,
            latestStep: latest.metadata.step,
            onOpfs,
            iterations,
            missing: report.missing,
            mismatched: report.mismatched.length,
          };
        }, backend);
        if ("skipped" in r) {
          console.log(`${backend} skipped: ${r.skipped}`);
          return;
        }
        assert.equal(r.workers.length, 1);
        assert.match(r.workers[0]!, /\/ckpt-worker\.js$/, "the built worker, beside the page's chunks");
        assert.ok(r.stepsWhileSaving >= 1, "training steps ran while the worker wrote");
        assert.deepEqual(r.directState, r.afterTraining, "a save to a path writes the state at its call");
        assert.ok(r.bytes > 3 * 4 * 2 * 512 * 512, `${r.bytes} bytes: weights and both Adam moments`);
        assert.deepEqual([r.committed, r.latestStep], [[3], 3], "committed through the manager");
        assert.equal(r.onOpfs.filter((k) => k.endsWith(".ckpt")).length, 1, `objects: ${r.onOpfs.join(", ")}`);
        assert.deepEqual([r.missing, r.mismatched], [[], 0]);
        assert.deepEqual(r.restored, r.atSave, "the restored model and optimizer are the state at save(), bit for bit");
        assert.notDeepEqual(r.afterTraining, r.atSave, "training moved on after the snapshot");
        assert.deepEqual(r.iterations, [3 + r.stepsWhileSaving, 3]);
      });
    }
  },
);
