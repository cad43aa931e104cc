import assert from "node:assert/strict";
import { FileStore } from "../../src/storage/file.ts";
import { ObjectNotFoundError } from "../../src/storage/types.ts";
import { bytesOf, randomBytes, testObjectStore } from "./_contract.ts";

testObjectStore("FileStore", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-filestore-" });
  const store = new FileStore(dir);
  return {
    store,
    seed: async (key, bytes) => void await store.put(key, bytes),
    close: () => Deno.remove(dir, { recursive: true }),
  };
}, { backslashKeys: Deno.build.os !== "windows" });

async function withStore(fn: (store: FileStore, dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-filestore-" });
  try {
    await fn(new FileStore(dir), dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("FileStore maps keys to paths below its root and names objects by file: URL", async () => {
  await withStore(async (store, dir) => {
    assert.equal(store.root, await Deno.realPath(dir).catch(() => dir));
    assert.ok(store.url.startsWith("file:///") && store.url.endsWith("/"));
    assert.equal(store.path("a/b.ckpt"), `${store.root}/a/b.ckpt`);
    assert.throws(() => store.path("../escape"), TypeError);
    await store.put("a/b c.ckpt", new Uint8Array([1]));
    assert.deepEqual(await Deno.readFile(`${dir}/a/b c.ckpt`), new Uint8Array([1]));
    const e = await store.get("a/missing").then(() => undefined, (e) => e);
    assert.ok(e instanceof ObjectNotFoundError);
    assert.equal(e.url, `${store.url}a/missing`);
    assert.deepEqual(new FileStore(new URL(store.url)).root, store.root);
    assert.throws(() => new FileStore(new URL("https://x/")), TypeError);
  });
});

Deno.test("FileStore takes directWrites as a boolean only; a store without direct writes has no address for a worker", () => {
  for (const bad of ["no", 0, {}]) {
    assert.throws(
      () => new FileStore("/tmp", { directWrites: bad as unknown as boolean }),
      (e: Error) => e instanceof TypeError && e.message === "Cannot open a FileStore: directWrites must be a boolean",
    );
  }
  assert.equal(new FileStore("/tmp", { directWrites: true }).address, new FileStore("/tmp").url);
  assert.equal(new FileStore("/tmp", { directWrites: false }).address, undefined);
});

Deno.test("FileStore refuses directories and pipes with a TypeError, without blocking on the pipe", async () => {
  await withStore(async (store, dir) => {
    await Deno.mkdir(`${dir}/sub`);
    await assert.rejects(() => store.get("sub"), TypeError, "not a regular file (a directory)");
    await assert.rejects(() => store.head("sub"), /not a regular file \(a directory\)/);
    await assert.rejects(() => store.put("sub", new Uint8Array(1)), /not a regular file/);
    const mk = await new Deno.Command("mkfifo", { args: [`${dir}/fifo`] }).output();
    assert.ok(mk.success);
    await assert.rejects(
      () => store.get("fifo"),
      /Cannot read file:\/\/.*\/fifo: not a regular file \(a device, socket or pipe\)/,
    );
    assert.deepEqual(await Array.fromAsync(store.list(), (o) => o.key), []);
  });
});

Deno.test("FileStore reads links to files but does not follow links to directories when listing", async () => {
  await withStore(async (store, dir) => {
    await store.put("real/a", new Uint8Array([5]));
    await Deno.symlink(`${dir}/real/a`, `${dir}/link-a`);
    await Deno.symlink(`${dir}/real`, `${dir}/link-dir`);
    assert.deepEqual(await bytesOf((await store.get("link-a")).body), new Uint8Array([5]));
    assert.deepEqual(await Array.fromAsync(store.list(), (o) => o.key), ["link-a", "real/a"]);
  });
});

Deno.test("FileStore writes through a temporary file beside the target, which list hides and sweep removes", async () => {
  await withStore(async (store, dir) => {
    const w = await store.writer("run/x.ckpt");
    await w.write(randomBytes(9 * 2 ** 20, 20)); // more than one staging buffer: bytes reach the file
    const names = (await Array.fromAsync(Deno.readDir(`${dir}/run`))).map((e) => e.name);
    assert.equal(names.length, 1);
    assert.match(names[0]!, /^\.x\.ckpt\.tmp-\d+-[0-9a-f]{8}$/);
    assert.deepEqual(await Array.fromAsync(store.list()), []);
    await w.close();
    assert.deepEqual((await Array.fromAsync(Deno.readDir(`${dir}/run`))).map((e) => e.name), ["x.ckpt"]);
    // A leftover from a killed process.
    await Deno.writeFile(`${dir}/run/.y.ckpt.tmp-123-abcdef01`, new Uint8Array(10));
    await Deno.writeFile(`${dir}/.z.tmp-1-00000000`, new Uint8Array(10));
    assert.deepEqual(await Array.fromAsync(store.list(), (o) => o.key), ["run/x.ckpt"]);
    assert.equal(await store.sweep("run/"), 1);
    assert.equal(await store.sweep(), 1);
    assert.equal(await store.sweep(), 0);
    assert.deepEqual((await Array.fromAsync(Deno.readDir(`${dir}/run`))).map((e) => e.name), ["x.ckpt"]);
  });
});

Deno.test("FileStore writer with reuse recycles the old file in place and truncates it to the new length", async () => {
  await withStore(async (store, dir) => {
    await store.put("step-1.ckpt", randomBytes(5 * 2 ** 20, 21));
    const oldIno = (await Deno.stat(`${dir}/step-1.ckpt`)).ino;
    const w = await store.writer("step-3.ckpt", { reuse: "step-1.ckpt" });
    assert.equal(await store.head("step-1.ckpt"), undefined); // gone once the writer exists
    const data = randomBytes(2 * 2 ** 20 + 7, 22);
    await w.write(data);
    const info = await w.close();
    const st = await Deno.stat(`${dir}/step-3.ckpt`);
    assert.equal(st.ino, oldIno);
    assert.equal(st.size, data.byteLength);
    assert.equal(info.size, data.byteLength);
    assert.deepEqual(await Deno.readFile(`${dir}/step-3.ckpt`), data);
    await assert.rejects(() => store.writer("a", { reuse: "a" }), TypeError);
    await assert.rejects(() => store.writer("a", { reuse: "../b" }), TypeError);
  });
});

Deno.test("FileStore versions differ after a same-size rewrite", async () => {
  await withStore(async (store) => {
    const a = await store.put("v", new Uint8Array([1]));
    const b = await store.put("v", new Uint8Array([2]));
    assert.notEqual(a.version, b.version);
    assert.match(a.version, /^\d+-\d+-1-\d+$/);
  });
});

Deno.test("FileStore: a writer killed with SIGKILL leaves the previous object, and sweep cleans up after it", async () => {
  await withStore(async (store, dir) => {
    const old = randomBytes(100_000, 23);
    await store.put("k/obj.ckpt", old);
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-read",
        "--allow-write",
        new URL("./_file_child.ts", import.meta.url).pathname,
        dir,
        "k/obj.ckpt",
      ],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let said = "";
    while (!said.includes("writing")) {
      const r = await reader.read();
      if (r.done) break;
      said += r.value;
    }
    assert.match(said, /writing/);
    child.kill("SIGKILL");
    await child.status;
    await reader.cancel();
    assert.deepEqual(await bytesOf((await store.get("k/obj.ckpt")).body), old);
    assert.deepEqual(await Array.fromAsync(store.list(), (o) => o.key), ["k/obj.ckpt"]);
    assert.equal((await Array.fromAsync(Deno.readDir(`${dir}/k`))).length, 2);
    assert.equal(await store.sweep(), 1);
    assert.deepEqual((await Array.fromAsync(Deno.readDir(`${dir}/k`))).map((e) => e.name), ["obj.ckpt"]);
  });
});
