// The CheckpointManager on the Origin Private File System, in Chromium, Firefox and WebKit:
// retention, best-by-metric, latest() that verifies and falls back, checkpoints that survive a
// reload, and a page closed in the middle of a save, then reopened.
import assert from "node:assert/strict";
import { browserTest } from "./_browser.ts";

type Lib = typeof import("./page/core_entry.ts");
declare const m: Lib;

browserTest(
  "CheckpointManager on OPFS",
  { entries: { core: "tests/web/page/core_entry.ts" } },
  async (t, ctx) => {
    const { page } = ctx;

    await t.step("retention keeps the newest and the best; list shows metrics; latest() loads the newest", async () => {
      const r = await page.evaluate(async () => {
        const store = await m.OpfsStore.open("mgr/retention");
        const mgr = await m.CheckpointManager.open(store, { maxToKeep: 2, best: { metric: "loss", mode: "min" } });
        const losses = [0.9, 0.1, 0.5, 0.7, 0.6];
        for (const [i, loss] of losses.entries()) {
          await mgr.save({
            metadata: { step: (i + 1) * 10, metrics: { loss } },
            tensors: [{ name: "w", dtype: "float32", shape: [4], data: new Float32Array(4).fill(i) }],
          });
        }
        const listed = (await mgr.list()).map((e) => ({
          step: e.step,
          loss: e.metadata.metrics?.loss,
          keptBy: e.keptBy,
          status: e.status,
        }));
        const latest = await mgr.latest();
        await mgr.close();
        const keys = [];
        for await (const o of store.list()) keys.push(o.key);
        return { listed, latestStep: latest?.metadata.step, w: [...latest!.tensors[0]!.data as Float32Array], keys };
      });
      assert.deepEqual(r.listed.map((e) => e.step), [20, 40, 50]);
      assert.deepEqual(r.listed.map((e) => e.keptBy), [["best"], ["recent"], ["recent"]]);
      assert.ok(r.listed.every((e) => e.status === "ok"));
      assert.equal(r.latestStep, 50);
      assert.deepEqual(r.w, [4, 4, 4, 4]);
      assert.equal(r.keys.filter((k) => k.endsWith(".ckpt")).length, 3, `objects: ${r.keys.join(", ")}`);
    });

    await t.step("an opfs: address opens the same store: open, save, load by address", async () => {
      const r = await page.evaluate(async () => {
        const mgr = await m.CheckpointManager.open("opfs:///mgr/by-address", { maxToKeep: 2 });
        await mgr.save({
          metadata: { step: 7 },
          tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
        });
        const [entry] = await mgr.list();
        await mgr.close();
        const store = await m.OpfsStore.open("mgr/by-address");
        const keys = [];
        for await (const o of store.list()) keys.push(o.key);
        const back = await m.loadCheckpoint(entry!.path);
        return { dir: mgr.dir, path: entry!.path, keys, w: [...back.tensors[0]!.data as Float32Array] };
      });
      assert.equal(r.dir, "opfs:///mgr/by-address/");
      assert.match(r.path, /^opfs:\/\/\/mgr\/by-address\/.*\.ckpt$/);
      assert.ok(r.keys.some((k) => r.path.endsWith(k)), `objects: ${r.keys.join(", ")}`);
      assert.deepEqual(r.w, [1, 2]);
    });

    await t.step("the checkpoints survive a reload: the reloaded page's manager lists and loads them", async () => {
      await page.evaluate(async () => {
        const mgr = await m.CheckpointManager.open("opfs:///mgr/reload", { maxToKeep: 3 });
        for (const step of [5, 6]) {
          await mgr.save({
            metadata: { step },
            tensors: [{ name: "w", dtype: "float32", shape: [3], data: new Float32Array([step, 1, 2]) }],
          });
        }
        await mgr.close();
        (globalThis as { beforeReload?: boolean }).beforeReload = true;
      });
      const url = await page.evaluate(() => location.href);
      await page.goto(url);
      await page.waitFor("window.ready === true");
      const r = await page.evaluate(async () => {
        const mgr = await m.CheckpointManager.open("opfs:///mgr/reload", { maxToKeep: 3 });
        const steps = (await mgr.list()).map((e) => e.step);
        const latest = await mgr.latest();
        await mgr.close();
        return { steps, w: [...latest!.tensors[0]!.data as Float32Array], reloaded: !("beforeReload" in globalThis) };
      });
      assert.deepEqual(r, { steps: [5, 6], w: [6, 1, 2], reloaded: true });
    });

    await t.step("latest() verifies: a corrupted newest checkpoint is skipped for the one before", async () => {
      const r = await page.evaluate(async () => {
        const store = await m.OpfsStore.open("mgr/verify");
        const mgr = await m.CheckpointManager.open(store, { maxToKeep: 3, onWarning: () => {} });
        for (const step of [1, 2]) {
          await mgr.save({
            metadata: { step },
            tensors: [{ name: "w", dtype: "float32", shape: [256], data: new Float32Array(256).fill(step) }],
          });
        }
        const newest = (await mgr.list()).at(-1)!;
        const key = newest.path.slice(newest.path.lastIndexOf("/") + 1);
        // Flip one byte in the middle of the newest file, behind the manager's back.
        const got = await store.get(key);
        const bytes = new Uint8Array(await new Response(got.body).arrayBuffer());
        bytes[bytes.byteLength >> 1]! ^= 0x01;
        await store.put(key, bytes);
        let loadError = "";
        try {
          await mgr.load(2);
        } catch (e) {
          loadError = `${(e as Error).name}: ${(e as Error).message}`;
        }
        const latest = await mgr.latest();
        await mgr.close();
        return { latestStep: latest?.metadata.step, loadError };
      });
      assert.equal(r.latestStep, 1);
      assert.match(r.loadError, /^ChecksumMismatchError/);
    });

    await t.step(
      "a page closed in the middle of a save: the reopened manager has every committed checkpoint, no partial one",
      async () => {
        const writer = await ctx.open("core.html");
        // Commit two checkpoints, then start a third save whose object, once its first bytes are in
        // OPFS, is held there (further writes and its publication never finish), and close the page
        // while it is held: the close cuts the save off in the middle, whatever the machine's speed.
        await writer.evaluate(async () => {
          const g = globalThis as { saving?: unknown; cut?: string };
          const opfs = await m.OpfsStore.open("mgr/crash");
          let hold = false;
          const store = new Proxy(opfs, {
            get(target, p) {
              const v = Reflect.get(target, p, target);
              if (p !== "writer") return typeof v === "function" ? v.bind(target) : v;
              return async (key: string, options?: Parameters<typeof opfs.writer>[1]) => {
                const w = await target.writer(key, options);
                if (!hold) return w;
                const never = new Promise<never>(() => {});
                let first = true;
                return {
                  write: async (chunk: Uint8Array) => {
                    if (!first) return await never;
                    first = false;
                    await w.write(chunk);
                    g.cut = key;
                  },
                  close: () => first ? w.close() : never,
                  abort: (reason?: unknown) => w.abort(reason),
                };
              };
            },
          });
          const mgr = await m.CheckpointManager.open(store, { maxToKeep: 5 });
          for (const step of [1, 2]) {
            await mgr.save({
              metadata: { step },
              tensors: [{ name: "w", dtype: "float32", shape: [1024], data: new Float32Array(1024).fill(step) }],
            });
          }
          hold = true;
          const big = new Float32Array(4 * 2 ** 20).fill(3);
          g.saving = mgr.save({
            metadata: { step: 3 },
            tensors: [{ name: "w", dtype: "float32", shape: [big.length], data: big }],
          });
        });
        await writer.waitFor("globalThis.cut");
        const cut = await writer.evaluate(() => (globalThis as { cut?: string }).cut!);
        await writer.close();
        const r = await page.evaluate(async () => {
          const store = await m.OpfsStore.open("mgr/crash");
          const keys: string[] = [];
          for await (const o of store.list()) keys.push(o.key);
          const mgr = await m.CheckpointManager.open(store, { maxToKeep: 5, onWarning: () => {} });
          const steps = (await mgr.list()).map((e) => [e.step, e.status]);
          const latest = await mgr.latest();
          const fill = (latest!.tensors[0]!.data as Float32Array)[0];
          await mgr.close();
          const left = await store.sweep();
          return { keys, steps, latestStep: latest!.metadata.step, fill, left };
        });
        // The cut save left bytes behind (swept now), but nothing a reader sees: its key is not
        // listed, step 3 is absent, and step 2 is still the latest, whole.
        assert.deepEqual(r.steps, [[1, "ok"], [2, "ok"]]);
        assert.equal(r.latestStep, 2);
        assert.equal(r.fill, 2);
        assert.ok(!r.keys.includes(cut), `${cut} is listed: ${r.keys.join(", ")}`);
        assert.ok(r.left >= 1, `the cut save left ${r.left} objects to sweep`);
      },
    );
  },
);
