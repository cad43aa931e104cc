// bench/_strace.ts: what bench/peer_facts.ts reads from an strace log, from literal log lines.
import assert from "node:assert/strict";
import { flushedPaths, syncEvents } from "../../bench/_strace.ts";

Deno.test("syncEvents joins a flush another thread interrupted with the line that resumes it", () => {
  const log = [
    "26375 fsync(17</c/tmp/d/1647e2> <unfinished ...>",
    '26377  rename("/c/tmp/x.__lock", "/c/tmp/x") = 0',
    "26375 <... fsync resumed>) = 0",
  ].join("\n");
  assert.deepEqual(syncEvents(log), [
    { kind: "rename", from: "/c/tmp/x.__lock", to: "/c/tmp/x" },
    { kind: "sync", call: "fsync", path: "/c/tmp/d/1647e2" },
  ]);
});

Deno.test("syncEvents leaves out failed calls and reads every flush and rename form", () => {
  const log = [
    "1 fsync(3</a/f>) = -1 EIO (Input/output error)",
    "1 fdatasync(4</a/g>) = 0",
    "1 sync_file_range(4</a/g>, 0, 4096, SYNC_FILE_RANGE_WRITE) = 0",
    "1 syncfs(5</a>) = 0",
    '1 renameat(AT_FDCWD</home/u>, "rel.tmp", AT_FDCWD</home/u>, "rel") = 0',
    '1 renameat2(7</a/dir>, "b.tmp", 7</a/dir>, "/abs/b", RENAME_NOREPLACE) = 0',
    '1 rename("/a/x", "/a/y") = -1 ENOENT (No such file or directory)',
    "not a line of strace",
  ].join("\n");
  assert.deepEqual(syncEvents(log), [
    { kind: "sync", call: "fdatasync", path: "/a/g" },
    { kind: "sync", call: "sync_file_range", path: "/a/g" },
    { kind: "sync", call: "syncfs", path: "/a" },
    { kind: "rename", from: "/home/u/rel.tmp", to: "/home/u/rel" },
    { kind: "rename", from: "/a/dir/b.tmp", to: "/abs/b" },
  ]);
});

Deno.test("flushedPaths follows a file through the renames after its flush, not before", () => {
  const events = syncEvents([
    '9 rename("/c/old", "/c/older") = 0',
    "9 fsync(3</c/ckpt.tmp-1/d/data>) = 0",
    "9 fsync(4</c/ckpt.tmp-1>) = 0",
    '9 rename("/c/ckpt.tmp-1", "/c/ckpt") = 0',
    "9 fsync(5</c/ckpt-other>) = 0",
  ].join("\n"));
  assert.deepEqual(flushedPaths(events).map((s) => [s.path, s.finalPath]), [
    ["/c/ckpt.tmp-1/d/data", "/c/ckpt/d/data"],
    ["/c/ckpt.tmp-1", "/c/ckpt"],
    ["/c/ckpt-other", "/c/ckpt-other"],
  ]);
});
