// Failing disks under Node: a save into a directory it may not write (EACCES, run as `nobody`
// since root ignores file modes) and a save that fills the disk (ENOSPC, on a 1 MiB tmpfs) fail
// with a clear error naming the step, leave no partial file, and keep the earlier checkpoint.
// Both need root (to drop to `nobody`, to mount a tmpfs): elsewhere they skip, in CI they fail.
import assert from "node:assert/strict";
import { chmod, cp, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { componentTest, runChild, SCRATCH } from "./_util.mjs";

const isRoot = process.getuid?.() === 0;

function run(file, args, options = {}) {
  return runChild(file, args, options);
}

/** A world-readable copy of the installed package and the child, for a process running as `nobody`. */
async function nobodyProject() {
  const work = await mkdtemp(join(tmpdir(), "ckpt-node-denied-"));
  await chmod(work, 0o755);
  await cp(join(SCRATCH, "node_modules"), join(work, "node_modules"), { recursive: true, dereference: true });
  await cp(join(SCRATCH, "tests", "_errors_child.mjs"), join(work, "_errors_child.mjs"));
  await cp(join(SCRATCH, "package.json"), join(work, "package.json"));
  return work;
}

for (const mode of ["full", "incremental"]) {
  componentTest(
    `${mode}: permission denied during a save under Node: a clear error, the earlier checkpoint intact, no partial files`,
    isRoot ? undefined : "needs root, to run the save as nobody",
    async () => {
      const work = await nobodyProject();
      try {
        const dir = join(work, "ckpt");
        await mkdir(dir);
        await run("chown", ["-R", "65534:65534", dir]);
        const r = await run(process.execPath, ["_errors_child.mjs", dir, "denied", mode], {
          cwd: work,
          uid: 65534,
          gid: 65534,
          env: { PATH: process.env.PATH, HOME: work },
        });
        assert.equal(r.code, 0, r.stderr);
        const out = JSON.parse(r.stdout);
        assert.notEqual(out.uid, 0);
        assert.ok(out.error, "the save into a read-only directory must fail");
        assert.equal(out.error.name, "PermissionDenied");
        assert.equal(out.error.code, "EACCES");
        assert.match(out.error.message, /^Cannot save checkpoint step 2/);
        assert.match(out.error.message, /permission denied/i);
        assert.deepEqual(out.after, out.before);
        assert.equal(out.latest, 1);
      } finally {
        await rm(work, { recursive: true, force: true });
      }
    },
  );
}

componentTest(
  "disk full during a save under Node: ENOSPC named, the earlier checkpoint intact, no partial files",
  isRoot ? undefined : "needs root, to mount a 1 MiB tmpfs",
  async () => {
    const dir = await mkdtemp(join(tmpdir(), "ckpt-node-full-"));
    const mounted = await run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir]);
    assert.equal(mounted.code, 0, `mount: ${mounted.stderr}`);
    try {
      const r = await run(process.execPath, [
        join(SCRATCH, "tests", "_errors_child.mjs"),
        join(dir, "ckpt"),
        "full",
        "full",
      ], {
        cwd: SCRATCH,
      });
      assert.equal(r.code, 0, r.stderr);
      const out = JSON.parse(r.stdout);
      assert.ok(out.error, "the save that does not fit must fail");
      assert.equal(out.error.code, "ENOSPC");
      assert.match(out.error.message, /^Cannot save checkpoint step 2/);
      assert.match(out.error.message, /no space left on device/i);
      assert.deepEqual(out.after, out.before);
      assert.equal(out.latest, 1);
    } finally {
      await run("umount", [dir]);
      await rm(dir, { recursive: true, force: true });
    }
  },
);
