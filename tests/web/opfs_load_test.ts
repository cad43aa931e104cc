// A load of an OPFS object read by the hash worker through a sync access handle (Chromium,
// Firefox), or by slices of its Blob where the engine refuses (WebKit) or the object's lock is
// held: the same tensors bit for bit, the same error for a damaged byte, and a save or delete
// that meets a load waits for it instead of failing on the file's lock.
import assert from "node:assert/strict";
import { join } from "node:path";
import { encodeCheckpoint, loadCheckpoint } from "../../mod.ts";
import { sha256 } from "../../src/format/_hash.ts";
import { browserTest } from "./_browser.ts";

type Lib = typeof import("./page/opfs_load_entry.ts");
declare const m: Lib;

const n = 2 ** 20; // 4 MiB of float32 per tensor: more than one 16 MiB piece in all
const tensors = (step: number) =>
  Array.from({ length: 6 }, (_, k) => ({
    name: `layer${k}`,
    dtype: "float32" as const,
    shape: [n],
    data: new Float32Array(n).map((_, i) => (i % 997) * 0.5 + k + step),
  }));

async function bytesOf(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(s).arrayBuffer());
}

browserTest("OPFS loads", { entries: { opfs: "tests/web/page/opfs_load_entry.ts" } }, async (t, ctx) => {
  const { page, filesDir, engine } = ctx;
  const good = await bytesOf(encodeCheckpoint({ metadata: { step: 1 }, tensors: tensors(1) }));
  const bad = good.slice();
  bad[good.byteLength - 2 ** 21]! ^= 1; // inside the last tensor's body
  await Deno.writeFile(join(filesDir, "good.ckpt"), good);
  await Deno.writeFile(join(filesDir, "bad.ckpt"), bad);
  await Deno.writeFile(
    join(filesDir, "next.ckpt"),
    await bytesOf(encodeCheckpoint({ metadata: { step: 2 }, tensors: tensors(2) })),
  );
  const expected = await loadCheckpoint(bad).then(() => "no error", (e: Error) => e.message);
  const hashes = (step: number) =>
    tensors(step).map((x) => sha256().update(new Uint8Array(x.data.buffer)).digest("hex"));
  // Chromium and Firefox give sync access handles in workers; WebKitGTK cannot post the handle there.
  const handles = engine !== "webkit";

  /** Loads `key` in the page (with `lockHeld`, while the object's Web Lock is held as by a commit). */
  const load = (key: string, lockHeld = false) =>
    page.evaluate(
      async (key: string, lockHeld: boolean) => {
        const store = await m.OpfsStore.open("opfs-load");
        const hex = async (data: ArrayBufferView) =>
          [...new Uint8Array(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>))]
            .map((b) => b.toString(16).padStart(2, "0")).join("");
        const before = m.opfsHandleReadsForTests();
        const run = async () => {
          try {
            const back = await m.loadCheckpoint({ store, key });
            return { step: back.metadata.step, hashes: await Promise.all(back.tensors.map((x) => hex(x.data))) };
          } catch (e) {
            return { error: `${e instanceof m.ChecksumMismatchError}: ${(e as Error).message}` };
          }
        };
        const locks = (navigator as unknown as { locks: { request<T>(name: string, f: () => Promise<T>): Promise<T> } })
          .locks;
        const out = lockHeld ? await locks.request(`ckpt-opfs:${store.url}${key}`, run) : await run();
        return { ...out, handle: m.opfsHandleReadsForTests() - before };
      },
      key,
      lockHeld,
    );

  await page.evaluate(async () => {
    const store = await m.OpfsStore.open("opfs-load");
    for (const name of ["good.ckpt", "bad.ckpt", "next.ckpt"]) {
      await store.put(name, new Uint8Array(await (await fetch(`/files/${name}`)).arrayBuffer()));
    }
  });
  // Removed at the end (finally, below): Firefox counts every origin of a site against one quota
  // group, and every test file's origin is 127.0.0.1 on some port, so 75 MB left here would count
  // in a later file's estimate, where ckpt's own count of that origin's files cannot see them.
  try {
    await t.step(
      "read through a sync access handle where the engine gives one: Deno's tensors bit for bit",
      async () => {
        const r = await load("good.ckpt");
        assert.deepEqual(r, { step: 1, hashes: hashes(1), handle: handles ? 1 : 0 });
      },
    );

    await t.step("a damaged byte is Deno's ChecksumMismatchError, naming the tensor and its offset", async () => {
      const r = await load("bad.ckpt");
      assert.deepEqual(r, { error: `true: ${expected}`, handle: handles ? 1 : 0 });
      assert.match(expected, /layer5/);
    });

    await t.step("while a commit holds the object's lock, the load reads the Blob: the same tensors", async () => {
      const r = await load("good.ckpt", true);
      assert.deepEqual(r, { step: 1, hashes: hashes(1), handle: 0 });
    });

    await t.step(
      "while another holds the file's handle, the load reads the Blob; the next load uses a handle again",
      async () => {
        // A worker of the test's own holds a read-write handle (exclusive in every engine that gives one).
        const held = await page.evaluate(async () => {
          const code = `let h; onmessage = async (e) => {
        try { if (e.data) { h = await e.data.createSyncAccessHandle(); postMessage("held"); } else { h?.close(); postMessage("closed"); } }
        catch (err) { postMessage(err.name); }
      };`;
          const w = new Worker(URL.createObjectURL(new Blob([code], { type: "text/javascript" })));
          (globalThis as unknown as { holder: Worker }).holder = w;
          interface Dir {
            getDirectoryHandle(name: string): Promise<Dir>;
            getFileHandle(name: string): Promise<unknown>;
          }
          const storage = (navigator as unknown as { storage: { getDirectory(): Promise<Dir> } }).storage;
          const dir = await (await storage.getDirectory()).getDirectoryHandle("opfs-load");
          const file = await dir.getFileHandle("good.ckpt");
          return await new Promise<string>((resolve) => {
            w.onmessage = (e) => resolve(e.data);
            try {
              w.postMessage(file);
            } catch (e) {
              resolve((e as Error).name); // WebKitGTK cannot post the handle
            }
          });
        });
        assert.equal(held === "held", handles, held);
        const during = await load("good.ckpt");
        await page.evaluate(async () => {
          const w = (globalThis as unknown as { holder: Worker }).holder;
          await new Promise((resolve) => {
            w.onmessage = resolve;
            w.postMessage(null);
          });
          w.terminate();
        });
        const after = await load("good.ckpt");
        assert.deepEqual(during, { step: 1, hashes: hashes(1), handle: 0 });
        assert.deepEqual(after, { step: 1, hashes: hashes(1), handle: handles ? 1 : 0 });
      },
    );

    await t.step("a save over the object and a delete during a load wait for it: neither fails", async () => {
      const r = await page.evaluate(async () => {
        const store = await m.OpfsStore.open("opfs-load");
        const name = `ckpt-opfs:${store.url}race.ckpt`;
        const locks = (navigator as unknown as {
          locks: { query(): Promise<{ held: { name: string; mode: string }[] }> };
        }).locks;
        await store.put("race.ckpt", new Uint8Array(await (await fetch("/files/good.ckpt")).arrayBuffer()));
        const next = new Uint8Array(await (await fetch("/files/next.ckpt")).arrayBuffer());
        const outcome = (p: Promise<unknown>) => p.then(() => "ok", (e: Error) => `${e.name}: ${e.message}`);
        /** Starts a load, and once it holds the object's lock (or has ended), runs `change` beside it. */
        const during = async (change: () => Promise<unknown>) => {
          let ended = false;
          const loading = m.loadCheckpoint({ store, key: "race.ckpt" }).then(
            (back) => `step ${back.metadata.step}`,
            (e: Error) => `${e.name}: ${e.message}`,
          ).finally(() => ended = true);
          let held = false;
          while (!ended && !held) {
            held = (await locks.query()).held.some((l) => l.name === name && l.mode === "shared");
            await new Promise((r) => setTimeout(r, 0));
          }
          const changed = await outcome(change());
          return { held, changed, loaded: await loading };
        };
        const save = await during(() => store.put("race.ckpt", next));
        const after = (await m.loadCheckpoint({ store, key: "race.ckpt" })).metadata.step;
        const removal = await during(() => store.delete("race.ckpt"));
        return { save, after, removal, left: await store.head("race.ckpt") };
      });
      assert.deepEqual(r.save, { held: handles, changed: "ok", loaded: "step 1" });
      assert.equal(r.after, 2);
      assert.deepEqual(r.removal, { held: handles, changed: "ok", loaded: "step 2" });
      assert.equal(r.left, undefined);
    });
  } finally {
    await page.evaluate(async () => {
      const storage = (navigator as unknown as {
        storage: { getDirectory(): Promise<{ removeEntry(name: string, o: { recursive: boolean }): Promise<void> }> };
      }).storage;
      await (await storage.getDirectory()).removeEntry("opfs-load", { recursive: true });
    });
  }
});
