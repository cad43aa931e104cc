// Loaded tensors in huge pages (as numpy asks for its arrays), where the process was granted FFI:
// checked in child processes run with and without it, on the real kernel.
import assert from "node:assert/strict";
import { jsonChild } from "../_util.ts";
import { componentTest } from "../_ci.ts";
import { adviseHugePages, freshBuffer, HUGE_PAGE_MIN } from "../../src/storage/_huge_pages.ts";

const CHILD = new URL("./_huge_pages_child.ts", import.meta.url).pathname;

function child(flags: string[]) {
  return jsonChild<{
    advised: boolean;
    exact: boolean;
    hugeBefore: number;
    hugeAfter: number;
    mode: string;
  }>(CHILD, flags);
}

Deno.test({
  name: "without FFI granted, buffers are left as the runtime allocates them: no prompt, no error",
  // `deno task test` runs without --allow-ffi; under -A this case is the child's below.
  ignore: Deno.permissions.querySync({ name: "ffi" }).state === "granted",
}, () => {
  assert.equal(adviseHugePages(new Uint8Array(HUGE_PAGE_MIN)), false);
  const b = freshBuffer(HUGE_PAGE_MIN);
  assert.equal(b.byteLength, HUGE_PAGE_MIN);
  assert.ok(b.every((x) => x === 0));
});

/**
 * The kernel's transparent huge page mode ("always", "madvise", "never"; "" where there is none),
 * read by `cat`: Deno lets only `-A` read /sys.
 */
function thpMode(): string {
  try {
    const out = new Deno.Command("cat", { args: ["/sys/kernel/mm/transparent_hugepage/enabled"], stderr: "null" })
      .outputSync();
    return /\[(\w+)\]/.exec(new TextDecoder().decode(out.stdout))?.[1] ?? "";
  } catch {
    return "";
  }
}

Deno.test({
  name:
    "with FFI granted, a load's tensor buffers are advised into huge pages where the kernel takes advice, and load bit for bit",
  ignore: Deno.build.os !== "linux",
  async fn() {
    const without = await child(["-A", "--deny-ffi"]);
    assert.deepEqual([without.exact, without.advised], [true, false]);
    const withFfi = await child(["-A"]);
    assert.equal(withFfi.exact, true);
    if (withFfi.mode === "always" || withFfi.mode === "madvise") assert.equal(withFfi.advised, true);
  },
});

const mode = Deno.build.os === "linux" ? thpMode() : "";
componentTest({
  name: "with FFI granted, tensor buffers are backed by huge pages",
  async fn() {
    const without = await child(["-A", "--deny-ffi"]);
    const withFfi = await child(["-A"]);
    assert.equal(withFfi.advised, true);
    // Three 8 MiB tensors: the kernel backs at least some of their 2 MiB pages with huge pages
    // (all of them, unless it has no free 2 MiB block left to give).
    const gained = withFfi.hugeAfter - withFfi.hugeBefore;
    console.log(
      `AnonHugePages grew by ${gained / 2 ** 20} MiB (thp ${withFfi.mode}; without FFI: ${
        (without.hugeAfter - without.hugeBefore) / 2 ** 20
      } MiB)`,
    );
    assert.ok(gained >= 2 * 2 ** 20, `AnonHugePages grew by ${gained} bytes`);
  },
}, mode === "always" || mode === "madvise" ? undefined : `transparent huge pages are ${mode || "absent"} here`);
