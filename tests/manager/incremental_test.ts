import assert from "node:assert/strict";
import { join } from "node:path";
import { ChecksumMismatchError } from "../../mod.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { exact, makeCheckpoint, names, warnings, withDir } from "./_helpers.ts";

const quiet = { onWarning: () => {} };

async function blobFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const shard of Deno.readDir(join(dir, "blobs"))) {
    for await (const f of Deno.readDir(join(dir, "blobs", shard.name))) out.push(`${shard.name}/${f.name}`);
  }
  return out.sort();
}

Deno.test("an incremental checkpoint loads exactly the tensors a full checkpoint of the same state does", async () => {
  await withDir(async (dir) => {
    const full = await CheckpointManager.open(join(dir, "full"), quiet);
    const inc = await CheckpointManager.open(join(dir, "inc"), { incremental: true, ...quiet });
    for (const step of [1, 2]) {
      await full.save(makeCheckpoint(step));
      await inc.save(makeCheckpoint(step));
      const a = await full.load(step);
      const b = await inc.load(step);
      assert.deepEqual(b.metadata, a.metadata);
      assert.deepEqual(exact(b.tensors), exact(a.tensors));
      assert.deepEqual(b.tensors.map((t) => t.data.constructor), a.tensors.map((t) => t.data.constructor));
    }
    await full.close();
    await inc.close();
  });
});

Deno.test("tensors whose bytes did not change are not written again", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true, ...quiet });
    const frozen = 4096, trained = 4096; // floats
    const first = await manager.save(makeCheckpoint(1, { frozen, trained }));
    const second = await manager.save(makeCheckpoint(2, { frozen, trained }));
    const manifest2 = (await Deno.stat(second.path)).size;
    assert.equal(first.kind, "incremental");
    assert.ok(first.path.endsWith("step-000000001.ckpt.manifest.json"));
    // Step 2 wrote the trained kernel and the optimizer counter, the frozen half and the buffer were reused.
    assert.equal(second.bytesWritten, trained * 4 + 8 + manifest2);
    assert.equal(first.bytesWritten - (await Deno.stat(first.path)).size, frozen * 4 + trained * 4 + 16 + 8);
    assert.equal(second.bytes, frozen * 4 + trained * 4 + 16 + 8 + manifest2);
    assert.equal((await blobFiles(dir)).length, 4 + 2);
    await manager.close();
  });
});

Deno.test("retention deletes a blob only when no kept checkpoint references it", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true, maxToKeep: 2, ...quiet });
    for (const step of [1, 2, 3]) await manager.save(makeCheckpoint(step));
    // Kept: steps 2 and 3. Blobs: frozen, buffer (shared), kernel and iter of 2 and of 3.
    assert.equal((await blobFiles(dir)).length, 2 + 2 * 2);
    assert.deepEqual((await names(dir)).filter((n) => n.endsWith(".json") && n !== "index.json"), [
      "step-000000002.ckpt.manifest.json",
      "step-000000003.ckpt.manifest.json",
    ]);
    for (const step of [2, 3]) {
      assert.deepEqual(exact((await manager.load(step)).tensors), exact(makeCheckpoint(step).tensors as never));
    }
    await manager.close();
  });
});

Deno.test("deleting older incremental checkpoints never breaks a newer one", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true, maxToKeep: Infinity, ...quiet });
    for (const step of [1, 2, 3, 4]) await manager.save(makeCheckpoint(step));
    await manager.delete(1);
    await manager.delete(3);
    await manager.delete(2);
    assert.deepEqual(exact((await manager.load(4)).tensors), exact(makeCheckpoint(4).tensors as never));
    assert.equal((await blobFiles(dir)).length, 4);
    await manager.close();
    const again = await CheckpointManager.open(dir, quiet);
    assert.deepEqual((await again.list()).map((e) => [e.step, e.status]), [[4, "ok"]]);
    await again.close();
  });
});

Deno.test("gzip-compressed blobs round-trip and are smaller for compressible tensors", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true, compression: "gzip", ...quiet });
    const input = makeCheckpoint(1, { frozen: 1 << 14 });
    (input.tensors as { data: Float32Array }[])[0]!.data.fill(0.5);
    const entry = await manager.save(input);
    assert.ok(entry.bytes < (1 << 14) * 4 / 4, `${entry.bytes} bytes`);
    assert.ok((await blobFiles(dir)).every((f) => f.endsWith(".gz")));
    assert.deepEqual(exact((await manager.load(1)).tensors), exact(input.tensors as never));
    await manager.close();
  });
});

Deno.test("a corrupted blob fails its digest: load throws, latest falls back with a warning and quarantines", async () => {
  await withDir(async (dir) => {
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { incremental: true, onWarning: w.onWarning });
    await manager.save(makeCheckpoint(1));
    await manager.save(makeCheckpoint(2));
    const manifest = JSON.parse(await Deno.readTextFile(join(dir, "step-000000002.ckpt.manifest.json")));
    const kernel = manifest.tensors.find((t: { name: string }) => t.name === "dense/kernel").blob as string;
    const path = join(dir, "blobs", kernel.slice(0, 2), kernel);
    const bytes = await Deno.readFile(path);
    bytes[3]! ^= 0x80;
    await Deno.writeFile(path, bytes);
    await assert.rejects(() => manager.load(2), (e: unknown) => {
      assert.ok(e instanceof ChecksumMismatchError);
      assert.equal(e.expected, kernel);
      assert.match(e.message, /blob .* of tensor "dense\/kernel"/);
      return true;
    });
    await Deno.remove(path);
    await assert.rejects(() => manager.load(2), /its blob .* is missing/);
    const listed = await manager.list();
    assert.deepEqual(listed.map((e) => e.status), ["ok", "missing"]);
    assert.equal((await manager.latest())!.metadata.step, 1);
    assert.match(
      w.list[0]!,
      /Skipping checkpoint step 2 .*moved aside to .*\.step-000000002\.ckpt\.manifest\.json\.damaged/,
    );
    assert.deepEqual((await manager.list()).map((e) => e.status), ["ok"]);
    await manager.close();
  });
});

Deno.test("a tampered manifest fails the digest recorded in the index", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true, ...quiet });
    const entry = await manager.save(makeCheckpoint(1));
    const text = await Deno.readTextFile(entry.path);
    await Deno.writeTextFile(entry.path, text.replace('"shape":[64]', '"shape":[16,4]'));
    await assert.rejects(() => manager.load(1), ChecksumMismatchError);
    assert.equal((await manager.list())[0]!.status, "damaged");
    await manager.close();
  });
});

Deno.test("open removes orphan blobs and temporary blob files left by an interrupted save", async () => {
  await withDir(async (dir) => {
    const first = await CheckpointManager.open(dir, { incremental: true, ...quiet });
    await first.save(makeCheckpoint(1));
    await first.close();
    const kept = await blobFiles(dir);
    const orphan = "ab".padEnd(64, "0");
    await Deno.mkdir(join(dir, "blobs", "ab"), { recursive: true });
    await Deno.writeFile(join(dir, "blobs", "ab", orphan), new Uint8Array(8));
    await Deno.writeFile(join(dir, "blobs", "ab", `.${orphan}.tmp-99-abcdef01`), new Uint8Array(8));
    await Deno.writeTextFile(join(dir, "step-000000002.ckpt.manifest.json"), "{}");
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { incremental: true, onWarning: w.onWarning });
    assert.deepEqual(await blobFiles(dir), kept);
    assert.ok(!(await names(dir)).includes("step-000000002.ckpt.manifest.json"));
    assert.match(w.list[0]!, /Removed 3 leftover file/);
    await manager.close();
  });
});

Deno.test("an incremental save that fails midway removes the blobs it wrote", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true, ...quiet });
    await manager.save(makeCheckpoint(1));
    const before = await blobFiles(dir);
    const input = makeCheckpoint(2);
    async function* failing() {
      yield* (input.tensors as never[]).slice(0, 2);
      throw new Error("the snapshot went away");
    }
    await assert.rejects(() => manager.save({ metadata: input.metadata, tensors: failing() }), /snapshot went away/);
    assert.deepEqual(await blobFiles(dir), before);
    assert.deepEqual((await manager.list()).map((e) => e.step), [1]);
    await manager.close();
  });
});

Deno.test("a manifest with a shape that disagrees with its byte count is refused", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true, ...quiet });
    await manager.save(makeCheckpoint(1));
    await manager.close();
    // Forge a consistent index for a manifest whose tensor declares the wrong size.
    const path = join(dir, "step-000000001.ckpt.manifest.json");
    const manifest = JSON.parse(await Deno.readTextFile(path));
    manifest.tensors[1].shape = [65];
    const bytes = new TextEncoder().encode(JSON.stringify(manifest) + "\n");
    await Deno.writeFile(path, bytes);
    const index = JSON.parse(await Deno.readTextFile(join(dir, "index.json")));
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    index.checkpoints[0].sha256 = [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
    await Deno.writeTextFile(join(dir, "index.json"), JSON.stringify(index));
    const reopened = await CheckpointManager.open(dir, quiet);
    await assert.rejects(() => reopened.load(1), (e: unknown) => {
      assert.ok(e instanceof SyntaxError);
      assert.match(e.message, /tensor "dense\/kernel" declares 256 bytes, its shape and dtype need 260/);
      return true;
    });
    await reopened.close();
  });
});

Deno.test("a stored blob that has gone missing is written again rather than referenced", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { incremental: true, ...quiet });
    await manager.save(makeCheckpoint(1));
    const manifest = JSON.parse(await Deno.readTextFile(join(dir, "step-000000001.ckpt.manifest.json")));
    const frozen = manifest.tensors[0].blob as string;
    await Deno.remove(join(dir, "blobs", frozen.slice(0, 2), frozen));
    const second = await manager.save(makeCheckpoint(2));
    assert.ok(second.bytesWritten > 64 * 4, "the frozen tensor was written again");
    assert.deepEqual(exact((await manager.load(2)).tensors), exact(makeCheckpoint(2).tensors as never));
    await manager.close();
  });
});
