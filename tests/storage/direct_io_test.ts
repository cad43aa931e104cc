// Writes and reads around the page cache (`O_DIRECT`, src/storage/_direct_io.ts), on the real kernel in
// child processes run with and without FFI (`deno task test` grants none). How a save uses them
// is in file_sink_test.ts (stand-ins) and file_durability_test.ts (the system calls of a save).
import assert from "node:assert/strict";
import { jsonChild } from "../_util.ts";

const CHILD = new URL("./_direct_io_child.ts", import.meta.url).pathname;

interface Report {
  opened: boolean;
  missing: boolean;
  accepts?: boolean[];
  writes?: number[];
  exact?: boolean;
}

Deno.test({
  name:
    "with FFI granted on Linux, direct writes take whole aligned blocks, refuse anything else with -1 (never a throw), and the file holds their bytes",
  ignore: Deno.build.os !== "linux" || !["x86_64", "aarch64"].includes(Deno.build.arch),
  async fn() {
    const r = await jsonChild<Report>(CHILD, ["-A"]);
    // Deno.makeTempDir's file system takes O_DIRECT here (ext4; tmpfs too since Linux 6.6).
    assert.equal(r.opened, true);
    assert.equal(r.missing, false, "a missing file is not created");
    assert.deepEqual(r.accepts, [true, false]);
    assert.deepEqual(r.writes, [8192, -1, -1, -1]);
    assert.equal(r.exact, true);
  },
});

Deno.test("without FFI granted there are no direct writes: no prompt, no error", async () => {
  const r = await jsonChild<Report>(CHILD, ["-A", "--deny-ffi"]);
  assert.deepEqual(r, { opened: false, missing: false });
});

interface ReadReport {
  opened: boolean;
  missing: boolean;
  accepts?: boolean[];
  reads?: number[];
  exact?: boolean;
}

Deno.test({
  name:
    "with FFI granted on Linux, direct reads fill aligned buffers with the file's bytes, read short only at its end, and refuse anything unaligned with -1",
  ignore: Deno.build.os !== "linux" || !["x86_64", "aarch64"].includes(Deno.build.arch),
  async fn() {
    const r = await jsonChild<ReadReport>(CHILD, ["-A"], ["read"]);
    assert.equal(r.opened, true);
    assert.equal(r.missing, false, "a missing file gives no reader");
    assert.deepEqual(r.accepts, [true, false]);
    const size = 3 * 4096 + 100;
    assert.deepEqual(r.reads, [size, 100, 0, -1, -1, -1]);
    assert.equal(r.exact, true);
  },
});

Deno.test("without FFI granted there are no direct reads: no prompt, no error", async () => {
  const r = await jsonChild<ReadReport>(CHILD, ["-A", "--deny-ffi"], ["read"]);
  assert.deepEqual(r, { opened: false, missing: false });
});

Deno.test({
  name:
    "with FFI granted, FileStore writes files ending inside a block, new or recycling a larger one, bit for bit; a store without direct writes has no address for a worker",
  ignore: Deno.build.os !== "linux",
  async fn() {
    const r = await jsonChild<{ sizes: number[]; exact: boolean[]; noAddress: boolean }>(CHILD, ["-A"], ["store"]);
    assert.deepEqual(r.sizes, [12 * 2 ** 20 + 3 + 4097, 2 * 2 ** 20 + 5]);
    assert.deepEqual(r.exact, [true, true]);
    assert.equal(r.noAddress, true);
  },
});
