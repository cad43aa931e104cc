import assert from "node:assert/strict";
import { join } from "node:path";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { names } from "./_helpers.ts";
import { jsonChild } from "../_util.ts";
import { componentTest } from "../_ci.ts";
import { withArticle } from "../../src/format/_article.ts";

const quiet = { onWarning: () => {} };
const root = Deno.uid() === 0;

/**
 * Root ignores file modes, so as root the save runs in a child process as `nobody` (uid 65534):
 * the child gets a copy of the sources and of the deno binary in a directory it can read, its
 * own DENO_DIR, and a checkpoint directory it owns, which it makes read-only itself.
 */
async function runDenied(mode: "full" | "incremental"): Promise<{
  uid: number;
  error?: { name: string; message: string; code?: string };
  before: string[];
  after: string[];
  latest?: number;
}> {
  const work = await Deno.makeTempDir({ prefix: "ckpt-denied-" });
  try {
    const repo = new URL("../../", import.meta.url).pathname;
    let deno = Deno.execPath();
    let child = join(repo, "tests/manager/_denied_child.ts");
    if (root) {
      await Deno.chmod(work, 0o755);
      const copy = new Deno.Command("cp", { args: ["-r", join(repo, "src"), join(work, "src")] });
      assert.equal((await copy.output()).code, 0);
      await Deno.mkdir(join(work, "tests/manager"), { recursive: true });
      await Deno.copyFile(child, join(work, "tests/manager/_denied_child.ts"));
      child = join(work, "tests/manager/_denied_child.ts");
      await Deno.copyFile(deno, join(work, "deno"));
      await Deno.chmod(join(work, "deno"), 0o755);
      deno = join(work, "deno");
    }
    const dir = join(work, "ckpt");
    const home = join(work, "home");
    await Deno.mkdir(dir);
    await Deno.mkdir(home);
    if (root) {
      await Deno.chown(dir, 65534, 65534);
      await Deno.chown(home, 65534, 65534);
    }
    const out = await new Deno.Command(deno, {
      args: ["run", "-A", "--no-config", child, dir, mode],
      env: { DENO_DIR: join(home, "deno"), HOME: home, NO_COLOR: "1" },
      // A working directory `nobody` can enter: the checkout's may not be (a clone inside a 0700 temp dir).
      cwd: work,
      ...(root ? { uid: 65534, gid: 65534 } : {}),
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, stderr);
    return JSON.parse(new TextDecoder().decode(out.stdout));
  } finally {
    await Deno.remove(work, { recursive: true });
  }
}

for (const mode of ["full", "incremental"] as const) {
  Deno.test(`permission denied during ${withArticle(mode)} save: a clear error, the earlier checkpoint intact, no partial files`, async () => {
    const r = await runDenied(mode);
    assert.notEqual(r.uid, 0, "the save must run without root, or modes are not enforced");
    assert.ok(r.error, "the save into a read-only directory must fail");
    assert.equal(r.error.name, "PermissionDenied");
    assert.match(r.error.message, /^Cannot save checkpoint step 2/);
    assert.match(r.error.message, /Permission denied/);
    assert.deepEqual(r.after, r.before);
    assert.equal(r.latest, 1);
  });
}

/** Mounts a 1 MiB tmpfs, or says why it cannot. */
async function smallTmpfs(): Promise<{ path: string; unmount(): Promise<void> } | string> {
  if (Deno.build.os !== "linux") return `tmpfs needs Linux (this is ${Deno.build.os})`;
  const path = await Deno.makeTempDir({ prefix: "ckpt-full-" });
  try {
    const out = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=1m", "tmpfs", path],
      stdout: "null",
      stderr: "piped",
    }).output();
    if (out.code !== 0) {
      await Deno.remove(path);
      return `mount -t tmpfs failed: ${new TextDecoder().decode(out.stderr).trim()}`;
    }
  } catch (e) {
    await Deno.remove(path);
    return `mount could not run: ${(e as Error).message}`;
  }
  return {
    path,
    async unmount() {
      await new Deno.Command("umount", { args: [path] }).output();
      await Deno.remove(path, { recursive: true });
    },
  };
}

const probe = await smallTmpfs();
if (typeof probe !== "string") await probe.unmount();
/** Why the disk-full tests cannot run here (they mount a 1 MiB tmpfs: root), or undefined. */
const noTmpfs = typeof probe === "string" ? `cannot mount a 1 MiB tmpfs here (${probe})` : undefined;

for (const mode of ["full", "incremental"] as const) {
  componentTest({
    name: `disk full during ${withArticle(mode)} save: a clear error, the earlier checkpoint intact, no partial files`,
    async fn() {
      const fs = await smallTmpfs();
      if (typeof fs === "string") throw new Error(fs);
      let manager: CheckpointManager | undefined;
      try {
        manager = await CheckpointManager.open(fs.path, { incremental: mode === "incremental", ...quiet });
        const small = { name: "a", dtype: "float32" as const, shape: [1000], data: new Float32Array(1000).fill(1) };
        await manager.save({ metadata: { step: 1 }, tensors: [small] });
        const before = await names(fs.path);
        const blobsBefore = mode === "incremental" ? await Array.fromAsync(Deno.readDir(join(fs.path, "blobs"))) : [];
        // 300 KB that fits, then 2 MB that does not.
        const fits = { name: "b", dtype: "float32" as const, shape: [75_000], data: new Float32Array(75_000).fill(2) };
        const huge = {
          name: "c",
          dtype: "float32" as const,
          shape: [500_000],
          data: new Float32Array(500_000).fill(3),
        };
        await assert.rejects(() => manager!.save({ metadata: { step: 2 }, tensors: [fits, huge] }), (e: Error) => {
          assert.equal((e as { code?: string }).code, "ENOSPC");
          assert.match(e.message, /^Cannot save checkpoint step 2/);
          assert.match(e.message, /No space left on device/);
          return true;
        });
        assert.deepEqual(await names(fs.path), before);
        if (mode === "incremental") {
          const shards = await Array.fromAsync(Deno.readDir(join(fs.path, "blobs")));
          let blobs = 0;
          for (const s of shards) blobs += (await Array.fromAsync(Deno.readDir(join(fs.path, "blobs", s.name)))).length;
          assert.equal(blobs, 1, "only the blob of step 1 remains");
          assert.deepEqual(
            shards.map((d) => d.name),
            blobsBefore.map((d) => d.name),
            "no empty shard directory is left",
          );
        }
        const back = await manager.latest();
        assert.equal(back?.metadata.step, 1);
        assert.deepEqual(back!.tensors[0]!.data, small.data);
        // Space is free again for a save that fits.
        await manager.save({ metadata: { step: 3 }, tensors: [small] });
        await manager.close();
      } finally {
        await manager?.close().catch(() => {});
        await fs.unmount();
      }
    },
  }, noTmpfs);
}

componentTest({
  name:
    "disk full during a save written around the page cache (FFI granted, in a child): the same clear error, the earlier checkpoint intact, no partial files",
  async fn() {
    const fs = await smallTmpfs();
    if (typeof fs === "string") throw new Error(fs);
    try {
      const child = new URL("./_full_child.ts", import.meta.url).pathname;
      const r = await jsonChild<{
        error?: { name: string; code?: string; message: string };
        before: string[];
        after: string[];
        intact: boolean;
        last: number;
      }>(child, ["-A"], [fs.path]);
      assert.ok(r.error, "the save that does not fit must fail");
      assert.equal(r.error.code, "ENOSPC");
      assert.match(r.error.message, /^Cannot save checkpoint step 2/);
      assert.match(r.error.message, /No space left on device/);
      assert.deepEqual(r.after, r.before);
      assert.equal(r.intact, true);
      assert.ok(r.last > 0);
    } finally {
      await fs.unmount();
    }
  },
}, noTmpfs);

Deno.test("a save whose directory is gone fails naming the file once, and why", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const manager = await CheckpointManager.open(join(dir, "run"), quiet);
    await Deno.remove(join(dir, "run"), { recursive: true });
    const file = join(dir, "run", "step-000000002.ckpt");
    const tensors = [{ name: "w", dtype: "float32" as const, shape: [1], data: new Float32Array(1) }];
    await assert.rejects(manager.save({ metadata: { step: 2 }, tensors }), (e: Error) => {
      assert.ok(e instanceof Deno.errors.NotFound, e.name);
      assert.equal(
        e.message,
        `Cannot save checkpoint step 2 to ${file}: directory ${JSON.stringify(join(dir, "run"))} does not exist`,
      );
      return true;
    });
    await manager.close().catch(() => {}); // its lock went with the directory
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
