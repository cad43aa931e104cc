// CheckpointManager.copyFrom: the committed file copied as it is (same bytes, same digest),
// checked against the digest the source's index recorded; a file damaged since its commit is
// refused and leaves nothing behind; a destination that encodes differently re-encodes.
import assert from "node:assert/strict";
import { ChecksumMismatchError } from "../../src/format/errors.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { exact, makeCheckpoint, names, withDir } from "./_helpers.ts";
import { jsonChild } from "../_util.ts";
import { s3Ignore } from "../_s3.ts";

Deno.test("copyFrom copies the committed file byte for byte and commits it", async () => {
  await withDir(async (dir) => {
    const local = await CheckpointManager.open(`${dir}/local`);
    await local.save(makeCheckpoint(1));
    const saved = await local.save(makeCheckpoint(2, { trained: 5000 }));
    const remote = await CheckpointManager.open(`${dir}/remote`, { maxToKeep: 1 });
    await remote.copyFrom(local, 1);
    const copied = await remote.copyFrom(local, 2);
    assert.equal(copied.sha256, saved.sha256);
    assert.equal(copied.bytes, saved.bytes);
    assert.deepEqual(copied.metadata, saved.metadata);
    assert.deepEqual(await Deno.readFile(copied.path), await Deno.readFile(saved.path));
    assert.deepEqual((await remote.list()).map((e) => e.step), [2], "the destination's retention applies");
    assert.deepEqual(exact((await remote.load(2)).tensors), exact(makeCheckpoint(2, { trained: 5000 }).tensors as []));
    await assert.rejects(() => remote.copyFrom(local, 1), RangeError, "steps only go up");
    await assert.rejects(() => remote.copyFrom(local, 3), /no committed checkpoint for step 3/);
    await remote.close();
    await local.close();
  });
});

Deno.test("copyFrom refuses a file damaged since it was committed: nothing is published or committed", async () => {
  await withDir(async (dir) => {
    const local = await CheckpointManager.open(`${dir}/local`);
    const saved = await local.save(makeCheckpoint(3, { trained: 300_000 })); // more than one read
    const original = await Deno.readFile(saved.path);
    const bytes = original.slice();
    bytes[bytes.length >> 1]! ^= 0x01; // inside the trained tensor's data: same size
    await Deno.writeFile(saved.path, bytes);
    const remote = await CheckpointManager.open(`${dir}/remote`);
    const before = await names(`${dir}/remote`);
    await assert.rejects(() => remote.copyFrom(local, 3), (e) => {
      assert.ok(e instanceof ChecksumMismatchError, String(e));
      assert.match(e.message, /dense\/kernel/, "the damaged tensor is named");
      return true;
    });
    assert.deepEqual(await remote.list(), []);
    assert.deepEqual(await names(`${dir}/remote`), before, "no file and no temporary left");

    await Deno.writeFile(saved.path, original.subarray(0, original.length - 1)); // truncated
    await assert.rejects(() => remote.copyFrom(local, 3), SyntaxError);
    assert.deepEqual(await remote.list(), []);
    await remote.close();
    await local.close();
  });
});

Deno.test("copyFrom into a manager that encodes otherwise loads, verifies and saves again", async () => {
  await withDir(async (dir) => {
    const local = await CheckpointManager.open(`${dir}/local`);
    await local.save(makeCheckpoint(4));
    const remote = await CheckpointManager.open(`${dir}/remote`, { incremental: true });
    const copied = await remote.copyFrom(local, 4);
    assert.equal(copied.kind, "incremental");
    assert.deepEqual(exact((await remote.load(4)).tensors), exact(makeCheckpoint(4).tensors as []));
    await remote.close();
    await local.close();
  });
});

Deno.test("copyFrom of an entry whose index was rebuilt (the file's SHA-256 recorded) verifies it as a load does", async () => {
  await withDir(async (dir) => {
    let local = await CheckpointManager.open(`${dir}/local`);
    const saved = await local.save(makeCheckpoint(5));
    await local.close();
    await Deno.remove(`${dir}/local/index.json`);
    local = await CheckpointManager.open(`${dir}/local`, { onWarning: () => {} });
    const adopted = (await local.list())[0]!;
    assert.notEqual(adopted.sha256, saved.sha256, "the rebuilt index records the file's SHA-256");
    const remote = await CheckpointManager.open(`${dir}/remote`);
    const copied = await remote.copyFrom(local, 5);
    assert.deepEqual(await Deno.readFile(copied.path), await Deno.readFile(saved.path));
    assert.deepEqual(
      await names(`${dir}/remote`),
      ["ckpt.lock", "index.json", "step-000000005.ckpt"],
      "no aborted copy left",
    );
    await remote.close();
    await local.close();
  });
});

Deno.test("copyFrom's pace is awaited before each chunk: the copy waits while it holds", async () => {
  await withDir(async (dir) => {
    const local = await CheckpointManager.open(`${dir}/local`);
    await local.save(makeCheckpoint(6, { trained: 2_500_000 })); // 10 MB: three chunks
    const remote = await CheckpointManager.open(`${dir}/remote`);
    let calls = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => release = r);
    const copying = remote.copyFrom(local, 6, {
      pace: async () => {
        if (++calls === 2) await held;
      },
    });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(calls, 2, "stopped at the second chunk");
    assert.deepEqual(await remote.list(), [], "nothing committed while the pace holds");
    release();
    assert.equal((await copying).step, 6);
    assert.ok(calls >= 3, `${calls} calls`);
    assert.throws(() => remote.copyFrom(local, 6, { pase: async () => {} } as never), /Invalid option pase/);
    await remote.close();
    await local.close();
  });
});

Deno.test("copyFrom reuses its few buffers: a file of many chunks arrives byte for byte, and damage in a late chunk is refused", async () => {
  await withDir(async (dir) => {
    const local = await CheckpointManager.open(`${dir}/local`);
    const saved = await local.save(makeCheckpoint(7, { trained: 7_000_000 })); // 28 MB: 7 chunks, 3 buffers
    const remote = await CheckpointManager.open(`${dir}/remote`);
    const copied = await remote.copyFrom(local, 7);
    const original = await Deno.readFile(saved.path);
    assert.ok((await Deno.readFile(copied.path)).every((b, i) => b === original[i]), "the same bytes");
    assert.equal(copied.sha256, saved.sha256);

    const late = await CheckpointManager.open(`${dir}/late`);
    const before = await names(`${dir}/late`);
    const bytes = original.slice();
    bytes[Math.floor(bytes.length * 0.95)]! ^= 0x01; // the trained tensor's data, in the 7th chunk
    await Deno.writeFile(saved.path, bytes);
    await assert.rejects(() => late.copyFrom(local, 7), ChecksumMismatchError);
    assert.deepEqual(await late.list(), []);
    assert.deepEqual(await names(`${dir}/late`), before, "no file and no temporary left");
    await late.close();
    await remote.close();
    await local.close();
  });
});

Deno.test({
  name:
    "with FFI granted, copyFrom reads the committed file around the page cache into its part buffers: byte for byte to a directory and to S3 (parts on the block grid and off it), and damage is refused",
  // Needs S3 as every s3Test does: skipped without an endpoint, a failure in CI.
  ignore: Deno.build.os !== "linux" || !["x86_64", "aarch64"].includes(Deno.build.arch) || s3Ignore,
  async fn() {
    const r = await jsonChild<{
      direct: boolean;
      offGrid: boolean;
      arrived: Record<string, boolean>;
      refused: Record<string, boolean>;
    }>(new URL("./_copy_direct_child.ts", import.meta.url).pathname, ["-A"]);
    assert.equal(r.direct, true, "the test directory's file system takes O_DIRECT reads");
    assert.equal(r.offGrid, true, "the file ends inside a block");
    assert.deepEqual(r.arrived, { local: true, [`s3 ${5 * 2 ** 20}`]: true, [`s3 ${5 * 2 ** 20 + 1}`]: true });
    assert.deepEqual(r.refused, { s3: true, s3Empty: true, local: true, localEmpty: true });
  },
});
