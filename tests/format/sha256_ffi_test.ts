// SHA-256 on the native thread (libcrypto through Deno's FFI, src/runtime/_sha256_ffi.ts): checked
// in child processes run with and without FFI granted (`deno task test` grants none).
import assert from "node:assert/strict";
import { jsonChild } from "../_util.ts";
import { componentTest } from "../_ci.ts";

const CHILD = new URL("./_sha256_ffi_child.ts", import.meta.url).pathname;

function child(flags: string[]) {
  return jsonChild<{
    available: boolean;
    digests: boolean[];
    iterables: boolean[];
    concurrent: boolean;
    loads: Record<string, { exact: boolean; corruptNamed: boolean }>;
    saves: boolean;
    damaged: number;
    disagreements: string[];
  }>(CHILD, flags);
}

/**
 * Whether the dynamic linker knows a libcrypto.so.3 (OpenSSL 3) here. `ldconfig` lives in
 * /sbin, which a user's PATH often lacks (Debian's, for anyone but root): spawning it by name
 * there throws at once, so each place is tried in turn.
 */
async function hasLibcrypto(): Promise<boolean> {
  if (Deno.build.os !== "linux") return false;
  for (const ldconfig of ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"]) {
    try {
      const out = await new Deno.Command(ldconfig, { args: ["-p"], stdout: "piped", stderr: "null" }).output();
      return new TextDecoder().decode(out.stdout).includes("libcrypto.so.3");
    } catch {
      // not at this place: the next
    }
  }
  return false;
}

const everyLoad = { none: { exact: true, corruptNamed: true }, bytegroup: { exact: true, corruptNamed: true } };

/** The checks with FFI granted, where libcrypto is there. */
async function withLibcrypto() {
  const r = await child(["-A"]);
  assert.equal(r.available, true);
  assert.deepEqual(r.digests, [true, true, true, true, true, true]);
  assert.deepEqual(r.iterables, [true, true, true, true, true, true, true]);
  assert.equal(r.concurrent, true);
  assert.deepEqual(r.loads, everyLoad);
  assert.equal(r.saves, true);
  // 80 damaged files (flipped bits, cuts): the same tensors or the same error as a load on one thread.
  assert.equal(r.damaged, 80);
  assert.deepEqual(r.disagreements, []);
}

componentTest({
  name:
    "with FFI granted, libcrypto hashes on the native thread: digests equal node:crypto's (parts at once or from an async iterable), loads bit for bit, byte-grouped saves byte for byte, damage reported as on one thread by loads and verifies",
  fn: withLibcrypto,
}, await hasLibcrypto() ? undefined : "the dynamic linker knows no libcrypto.so.3 (OpenSSL 3) here");

Deno.test("without FFI granted there is no native thread: no prompt, no error, loads as before", async () => {
  const r = await child(["-A", "--deny-ffi"]);
  assert.equal(r.available, false);
  assert.deepEqual(r.digests, []);
  assert.deepEqual(r.iterables, []);
  assert.deepEqual(r.loads, everyLoad);
});

Deno.test("with FFI granted, ckpt's system libraries are opened as it is imported: deno test -A finds none loaded inside a test", async () => {
  // A byte-grouped save through a BackgroundWriter's Worker, then the stores' manager suite: run
  // together under `deno test -A`, the libraries opened lazily inside the suite's first tests
  // were reported by the resource sanitizer as leaks ("A dynamic library was loaded during the
  // test, but not unloaded").
  const files = ["../manager/bytegroup_test.ts", "../manager/store_test.ts"].map((f) =>
    new URL(f, import.meta.url).pathname
  );
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--no-check", ...files],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.doesNotMatch(text, /Leaks detected|dynamic library/);
  assert.ok(out.success, text.slice(-2000));
});
