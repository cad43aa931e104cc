// The two-tier manager against the real RGW, through the fault-injecting proxy: replication with
// its own retention, resets and 503s, the mirror unreachable for a whole run and coming back,
// catch-up after a restart, recovery from the mirror (local directory lost, newest local copy
// damaged) bit for bit, and incremental blobs uploaded once.
import assert from "node:assert/strict";
import type { TensorInput } from "../../src/format/types.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { MirroredManager, type MirroredManagerOptions } from "../../src/manager/mirror.ts";
import { s3Test, type TestBucket } from "../_s3.ts";
import { FaultProxy, type SeenRequest } from "../storage/_fault_proxy.ts";
import { exact, makeCheckpoint, withDir } from "./_helpers.ts";

/** The tensors `makeCheckpoint(step)` saves, as an array. */
const expected = (step: number) => makeCheckpoint(step).tensors as TensorInput[];

const FAST = { retryDelay: 20, maxRetryDelay: 200, closeTimeout: 5000 };

/** A mirror store on `bucket` through `proxy`, with few, quick retries. */
const mirrorStore = (b: TestBucket, endpoint: string) =>
  b.store({ endpoint, prefix: "run", retries: 1, timeout: 2000, partSize: 5 * 1024 * 1024 });

/** Bit-for-bit equality of two tensor lists, without a diff of megabytes when they differ. */
function assertSame(actual: readonly TensorInput[], wanted: readonly TensorInput[], what: string): void {
  const a = exact(actual) as { bits: Uint8Array }[];
  const w = exact(wanted) as { bits: Uint8Array }[];
  const summary = (x: { bits: Uint8Array }[]) => x.map((t) => ({ ...t, bits: t.bits.length }));
  assert.deepEqual(summary(a), summary(w), what);
  a.forEach((t, i) => assert.ok(t.bits.every((byte, j) => byte === w[i]!.bits[j]), `${what}: tensor ${i} differs`));
}

function options(warnings: string[], extra: MirroredManagerOptions = {}): MirroredManagerOptions {
  return { ...FAST, onWarning: (m) => warnings.push(m), ...extra };
}

/** Every checkpoint the mirror's index lists loads and verifies; nothing else is there but blobs. */
async function assertMirrorSound(b: TestBucket, trained = 64): Promise<number[]> {
  const mirror = await CheckpointManager.open(b.store({ prefix: "run" }), { readOnly: true });
  const steps: number[] = [];
  for (const e of await mirror.list()) {
    const loaded = await mirror.load(e.step); // verifies every digest
    assertSame(loaded.tensors, makeCheckpoint(e.step, { trained }).tensors as TensorInput[], `step ${e.step}`);
    steps.push(e.step);
  }
  await mirror.close();
  assert.deepEqual(await b.store().uploads(), [], "no multipart upload left open");
  return steps;
}

s3Test("MirroredManager replicates every committed checkpoint to RGW, with the mirror's own retention", async (b) => {
  await withDir(async (dir) => {
    const warnings: string[] = [];
    const m = await MirroredManager.open(
      dir,
      mirrorStore(b, b.endpoint.endpoint),
      options(warnings, {
        local: { maxToKeep: 2 },
        mirror: { maxToKeep: 2, keepEvery: 30 },
      }),
    );
    for (let step = 10; step <= 80; step += 10) await m.save(makeCheckpoint(step));
    assert.ok(await m.mirrored(20_000), JSON.stringify(m.status()));
    const listed = await m.list();
    assert.deepEqual(listed.filter((c) => c.local).map((c) => c.step), [70, 80]);
    assert.deepEqual(listed.filter((c) => c.mirror).map((c) => c.step), [30, 60, 70, 80]);
    assert.deepEqual(m.status(), { url: m.status().url, reachable: true, newest: 80, behind: [], failures: 0 });
    await m.close();
    assert.deepEqual(await assertMirrorSound(b), [30, 60, 70, 80]);
    assert.deepEqual(warnings, []);
  });
});

s3Test(
  "MirroredManager rides out resets and 503s: local saves never fail, the mirror catches up and holds only verified checkpoints",
  async (b) => {
    const proxy = new FaultProxy(b.endpoint.endpoint);
    try {
      await withDir(async (dir) => {
        const warnings: string[] = [];
        let n = 0;
        // Every third write to the mirror is cut mid-body, every fifth answered 503.
        proxy.rule = (r: SeenRequest) =>
          r.method === "PUT" || r.method === "POST" ? (++n % 3 === 0 ? "reset" : n % 5 === 0 ? "503" : "pass") : "pass";
        // The local tier keeps them all: a checkpoint its retention removes before the mirror
        // answers again is not replicated (docs/manager.md).
        const m = await MirroredManager.open(
          dir,
          mirrorStore(b, proxy.endpoint),
          options(warnings, {
            local: { maxToKeep: Infinity },
            mirror: { maxToKeep: Infinity },
          }),
        );
        for (let step = 1; step <= 12; step++) {
          const entry = await m.save(makeCheckpoint(step, { trained: 64 * 1024 }));
          assert.equal(entry.step, step);
        }
        assert.ok(await m.mirrored(60_000), JSON.stringify(m.status()));
        await m.close();
        assert.ok(proxy.count("reset") + proxy.count("503") > 0, "faults were injected");
        proxy.rule = () => "pass";
        const steps = await assertMirrorSound(b, 64 * 1024);
        assert.deepEqual(steps, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
      });
    } finally {
      await proxy.close();
    }
  },
);

s3Test(
  "MirroredManager with the mirror unreachable for a whole run trains on, says what is behind, and catches up after a restart",
  async (b) => {
    await withDir(async (dir) => {
      const warnings: string[] = [];
      // A port nothing listens on.
      const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const dead = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
      listener.close();
      const m = await MirroredManager.open(dir, mirrorStore(b, dead), options(warnings, { closeTimeout: 300 }));
      for (const step of [1, 2, 3]) await m.save(makeCheckpoint(step));
      const status = m.status();
      assert.equal(status.reachable, false);
      assert.deepEqual(status.behind, [1, 2, 3]);
      assert.ok(status.failures > 0 && status.lastError, JSON.stringify(status));
      assert.equal((await m.latest())?.metadata.step, 3, "resumes from the local tier meanwhile");
      await m.close();
      assert.ok(warnings.some((w) => /is unreachable .*training and local saves go on/.test(w)), warnings.join("\n"));
      assert.ok(
        warnings.some((w) => /is behind by 3 checkpoint\(s\) \(steps 1, 2, 3\): the next open catches up/.test(w)),
      );
      assert.ok(warnings.every((w) => !/Cannot undefined/.test(w)), warnings.join("\n"));
      assert.deepEqual(await assertMirrorSound(b), []);

      // The next run reaches the mirror: it catches up with what the last one left behind.
      const again = await MirroredManager.open(dir, mirrorStore(b, b.endpoint.endpoint), options(warnings));
      assert.ok(await again.mirrored(20_000), JSON.stringify(again.status()));
      await again.close();
      assert.deepEqual(await assertMirrorSound(b), [1, 2, 3]);
    });
  },
);

s3Test("MirroredManager: a mirror that comes back mid-run is caught up without a restart", async (b) => {
  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    await withDir(async (dir) => {
      const warnings: string[] = [];
      proxy.rule = () => "503";
      const m = await MirroredManager.open(
        dir,
        mirrorStore(b, proxy.endpoint),
        options(warnings, { mirror: { maxToKeep: 10 } }),
      );
      for (const step of [1, 2]) await m.save(makeCheckpoint(step));
      assert.equal(m.status().reachable, false);
      proxy.rule = () => "pass"; // back
      for (const step of [3, 4]) await m.save(makeCheckpoint(step));
      assert.ok(await m.mirrored(20_000), JSON.stringify(m.status()));
      assert.equal(m.status().reachable, true);
      await m.close();
      assert.ok(warnings.some((w) => /answers again: catching up/.test(w)), warnings.join("\n"));
      assert.deepEqual(await assertMirrorSound(b), [1, 2, 3, 4]);
    });
  } finally {
    await proxy.close();
  }
});

s3Test(
  "MirroredManager resumes from the mirror bit for bit when the local directory is gone, and copies it back",
  async (b) => {
    await withDir(async (dir) => {
      const warnings: string[] = [];
      const m = await MirroredManager.open(dir, mirrorStore(b, b.endpoint.endpoint), options(warnings));
      for (const step of [5, 10]) await m.save(makeCheckpoint(step));
      await m.close();
      await Deno.remove(dir, { recursive: true });
      const again = await MirroredManager.open(dir, mirrorStore(b, b.endpoint.endpoint), options(warnings));
      const latest = await again.latest();
      assert.equal(latest?.metadata.step, 10);
      assertSame(latest!.tensors as TensorInput[], expected(10), "step 10");
      assert.deepEqual((await again.local.list()).map((e) => e.step), [10], "copied back into the local tier");
      await again.close();
    });
  },
);

s3Test(
  "MirroredManager resumes from the mirror's copy of the same step when the newest local one is damaged",
  async (b) => {
    await withDir(async (dir) => {
      const warnings: string[] = [];
      const m = await MirroredManager.open(dir, mirrorStore(b, b.endpoint.endpoint), options(warnings));
      for (const step of [5, 10]) await m.save(makeCheckpoint(step));
      const entry = (await m.local.list()).at(-1)!;
      await m.close();
      const bytes = await Deno.readFile(entry.path);
      const original = bytes.slice();
      bytes[bytes.length - 200]! ^= 0x10; // inside the last tensor's data
      await Deno.writeFile(entry.path, bytes);

      const again = await MirroredManager.open(dir, mirrorStore(b, b.endpoint.endpoint), options(warnings));
      const latest = await again.latest();
      assert.equal(latest?.metadata.step, 10);
      assertSame(latest!.tensors as TensorInput[], expected(10), "step 10");
      assert.ok(warnings.some((w) => /Skipping checkpoint step 10 .*moved aside/.test(w)), warnings.join("\n"));
      assert.ok(warnings.some((w) => /resuming from step 10 on the mirror/.test(w)), warnings.join("\n"));
      await again.close();
      assert.deepEqual(await Deno.readFile(entry.path), original, "the copy back is the original file, bit for bit");
    });
  },
);

s3Test(
  "MirroredManager never commits a local checkpoint damaged before its replication: the upload is aborted, a warning says so",
  async (b) => {
    await withDir(async (dir) => {
      // Committed locally while no mirror was there, then damaged (same size) before catch-up.
      const local = await CheckpointManager.open(dir);
      for (const step of [5, 10, 15]) await local.save(makeCheckpoint(step, { trained: 2_000_000 })); // 8 MB: two parts
      const damaged = (await local.list()).find((e) => e.step === 10)!;
      await local.close();
      const bytes = await Deno.readFile(damaged.path);
      bytes[bytes.length >> 1]! ^= 0x10; // inside the trained tensor's data
      await Deno.writeFile(damaged.path, bytes);

      const warnings: string[] = [];
      const m = await MirroredManager.open(dir, mirrorStore(b, b.endpoint.endpoint), options(warnings));
      assert.ok(await m.mirrored(20_000), JSON.stringify(m.status()));
      await m.close();
      assert.ok(
        warnings.some((w) => /Cannot replicate step 10: the local copy does not verify .*Checksum mismatch/.test(w)),
        warnings.join("\n"),
      );
      assert.deepEqual(await assertMirrorSound(b, 2_000_000), [5, 15]);
      const keys = await Array.fromAsync(b.store({ prefix: "run" }).list(), (o) => o.key);
      assert.ok(!keys.some((k) => /step-0+10/.test(k)), `no object of step 10 on the mirror:\n${keys.join("\n")}`);
    });
  },
);

s3Test("MirroredManager with an incremental mirror uploads each blob once", async (b) => {
  const proxy = new FaultProxy(b.endpoint.endpoint);
  try {
    await withDir(async (dir) => {
      const m = await MirroredManager.open(
        dir,
        mirrorStore(b, proxy.endpoint),
        options([], {
          mirror: { maxToKeep: 3, incremental: true },
        }),
      );
      for (const step of [1, 2, 3, 4]) await m.save(makeCheckpoint(step));
      assert.ok(await m.mirrored(20_000));
      await m.close();
      const blobPuts = proxy.log.filter((l) => l.request.method === "PUT" && l.request.target.includes("/blobs/"))
        .map((l) => l.request.target.split("?")[0]);
      assert.equal(new Set(blobPuts).size, blobPuts.length, `no blob uploaded twice:\n${blobPuts.join("\n")}`);
      // The frozen tensor, buffers: once; the trained tensor and the step counter: once per step.
      assert.ok(blobPuts.length < 4 * 4, `${blobPuts.length} blob uploads for 4 steps`);
      proxy.rule = () => "pass";
      const mirror = await CheckpointManager.open(b.store({ prefix: "run" }), { readOnly: true });
      assertSame((await mirror.load(4)).tensors as TensorInput[], expected(4), "step 4");
      await mirror.close();
    });
  } finally {
    await proxy.close();
  }
});

s3Test(
  "MirroredManager sends a committed file of many parts from a few reused buffers: byte for byte, and a part damaged late is never published",
  async (b) => {
    await withDir(async (dir) => {
      const local = await CheckpointManager.open(dir);
      for (const step of [1, 2]) await local.save(makeCheckpoint(step, { trained: 1_000_000 })); // 4 MB
      const [good, damaged] = await local.list();
      await local.close();
      const bytes = await Deno.readFile(damaged!.path);
      bytes[Math.floor(bytes.length * 0.95)]! ^= 0x04; // the trained tensor's data, in the 15th part
      await Deno.writeFile(damaged!.path, bytes);

      const warnings: string[] = [];
      // Parts of 256 KiB: 16 of them, through the 6 buffers of the copy.
      const store = b.store({ prefix: "run", partSize: 256 * 1024 });
      const m = await MirroredManager.open(dir, store, options(warnings, { mirror: { maxToKeep: 5 } }));
      assert.ok(await m.mirrored(20_000), JSON.stringify(m.status()));
      await m.close();
      assert.ok(
        warnings.some((w) => /Cannot replicate step 2: the local copy does not verify/.test(w)),
        warnings.join("\n"),
      );
      const mirror = await CheckpointManager.open(b.store({ prefix: "run" }), { readOnly: true });
      const listed = await mirror.list();
      assert.deepEqual(listed.map((e) => e.step), [1]);
      await mirror.close();
      const key = listed[0]!.path.slice(store.url.length);
      const sent = new Uint8Array(await new Response((await store.get(key)).body).arrayBuffer());
      assert.deepEqual(sent, await Deno.readFile(good!.path), "the same bytes");
      assert.deepEqual(await b.store().uploads(), [], "no multipart upload left open");
    });
  },
);
