// A save into a directory that is not there names the directory, in the words the CLI uses,
// keeps the file system's error class, and never shows the temporary name the write goes
// through or a bare "os error".
import assert from "node:assert/strict";
import { CheckpointManager, FileStore, saveCheckpoint } from "../../mod.ts";

const checkpoint = { metadata: { step: 1 }, tensors: [] };

function refused(Class: new (...args: never[]) => Error, message: string) {
  return (e: unknown) => {
    assert.ok(e instanceof Class, `${e}`);
    assert.equal((e as Error).message, message);
    assert.doesNotMatch(message, /\.tmp-|os error/);
    assert.ok((e as Error).cause, "the file system's error is the cause");
    return true;
  };
}

Deno.test("saveCheckpoint into a missing directory names the directory, never a temporary file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(
      () => saveCheckpoint(`${dir}/nonexist/x.ckpt`, checkpoint),
      refused(
        Deno.errors.NotFound,
        `Cannot write "${dir}/nonexist/x.ckpt": directory "${dir}/nonexist" does not exist`,
      ),
    );
    await assert.rejects(
      () => saveCheckpoint(`${dir}/a/b/x.ckpt`, checkpoint),
      refused(Deno.errors.NotFound, `Cannot write "${dir}/a/b/x.ckpt": directory "${dir}/a" does not exist`),
    );
    await Deno.writeTextFile(`${dir}/file`, "");
    await assert.rejects(
      () => saveCheckpoint(`${dir}/file/x.ckpt`, checkpoint),
      refused(Deno.errors.NotADirectory, `Cannot write "${dir}/file/x.ckpt": "${dir}/file" is not a directory`),
    );
    await assert.rejects(
      () => saveCheckpoint(`${dir}/file/sub/x.ckpt`, checkpoint),
      refused(Deno.errors.NotADirectory, `Cannot write "${dir}/file/sub/x.ckpt": "${dir}/file" is not a directory`),
    );
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["file"], "nothing left behind");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FileStore put and writer on a missing root name the directory", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const store = new FileStore(`${dir}/gone`);
    const message = `Cannot write "${dir}/gone/a.bin": directory "${dir}/gone" does not exist`;
    await assert.rejects(() => store.put("a.bin", new Uint8Array(1)), refused(Deno.errors.NotFound, message));
    await assert.rejects(() => store.writer("a.bin"), refused(Deno.errors.NotFound, message));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a directory the process may not write into says so, naming it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    if (Deno.uid() === 0) {
      // root writes anywhere: /proc refuses it instead, in a child with every permission (Deno
      // asks for all of them before it touches /proc)
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "eval",
          `import { saveCheckpoint } from ${JSON.stringify(new URL("../../mod.ts", import.meta.url).href)};
           await saveCheckpoint("/proc/x.ckpt", { metadata: { step: 1 }, tensors: [] }).catch((e) => console.log(e.message));`,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const message = new TextDecoder().decode(out.stdout).trim();
      assert.match(message, /^Cannot write "\/proc\/x\.ckpt": cannot create a file in directory "\/proc": /);
      assert.doesNotMatch(message, /\.tmp-|os error/);
    } else {
      await Deno.chmod(dir, 0o500);
      await assert.rejects(
        () => saveCheckpoint(`${dir}/x.ckpt`, checkpoint),
        refused(
          Deno.errors.PermissionDenied,
          `Cannot write "${dir}/x.ckpt": cannot create a file in directory "${dir}": Permission denied`,
        ),
      );
    }
  } finally {
    await Deno.chmod(dir, 0o700);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a manager's save into a directory removed under it names the directory", async () => {
  const dir = await Deno.makeTempDir();
  const manager = await CheckpointManager.open(`${dir}/run`);
  try {
    await Deno.remove(`${dir}/run`, { recursive: true });
    await assert.rejects(() => manager.save(checkpoint), (e: unknown) => {
      assert.match((e as Error).message, new RegExp(`directory "${dir}/run" does not exist`));
      assert.doesNotMatch((e as Error).message, /\.tmp-|os error/);
      return true;
    });
  } finally {
    await manager.close().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
