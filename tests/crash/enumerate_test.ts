// The crash-state model itself, on a hand-written recording: how many states each crash point
// has, what a state materializes to, and the seeded sample above the cap.

import assert from "node:assert/strict";
import type { Op, Recording } from "./_record.ts";
import { choose, crashStates, describe, materialize } from "./_enumerate.ts";

/** Write a temporary file (3 blocks), maybe fsync it, rename it to `f`, fsync the directory. */
function recording(fsync: boolean): Recording {
  const bytes = new Uint8Array(10_000).map((_, i) => i % 251 + 1);
  const ops: Op[] = [
    { op: "create", dir: 0, name: "t", id: 1 },
    { op: "write", id: 1, offset: 0, bytes },
  ];
  if (fsync) ops.push({ op: "fsync", id: 1, covers: 2 });
  ops.push({ op: "rename", fromDir: 0, fromName: "t", dir: 0, name: "f", id: 1 });
  ops.push({ op: "dirsync", id: 0, covers: ops.length });
  return {
    before: { kinds: new Map([[0, "dir"]]), data: new Map(), entries: new Map([[0, new Map()]]) },
    ops,
    nodes: 2,
    kinds: new Map([[0, "dir"], [1, "file"]]),
  };
}

Deno.test("crash states: each point's pending directory subsets times each pending write's choices", () => {
  // k=0: 1; k=1: create or not (2); k=2: 2 × the write's 9 choices (3 blocks: 8 subsets, or its
  // size only); k=3 (fsynced): 2; k=4: {}, {create}, {create, rename} (a rename needs its source): 3;
  // k=5 (directory fsynced): 1.
  assert.equal(crashStates(recording(true)).count, 1 + 2 + 18 + 2 + 3 + 1);
  assert.equal(crashStates(recording(true)).last, 1);
});

Deno.test("crash states: without the fsync, the renamed file can persist empty, torn or zero-filled", () => {
  const rec = recording(false);
  const states = crashStates(rec);
  const trees = new Set<string>();
  for (let i = 0; i < states.count; i++) {
    const s = states.at(i);
    if (s.k !== rec.ops.length) continue;
    const [f] = materialize(rec, s);
    assert.equal(f!.path, "f");
    trees.add(`${f!.bytes!.byteLength}:${f!.bytes!.filter((b) => b === 0).length}`);
  }
  // Lost (0 bytes); every block subset (the last block ends the file); size only (all zeros).
  assert.ok(trees.has("0:0"), [...trees].join(" "));
  assert.ok(trees.has("10000:10000"), [...trees].join(" "));
  assert.ok(trees.has("10000:0"), [...trees].join(" "));
  assert.ok(trees.has("4096:0"), [...trees].join(" "));
  assert.ok(trees.has("10000:4096"), [...trees].join(" ")); // middle block missing
  const lost = states.at(states.count - 9);
  assert.match(describe(rec, lost), /^crash after op 4 of 4; blocks 000 #1 write node 1 @0 \+10000$/);
});

Deno.test("crash states above the cap: a seeded sample, the same every run, the last point's states in it", () => {
  const a = choose(1000, 40, 7, 12);
  assert.equal(a.length, 40);
  assert.deepEqual(a, choose(1000, 40, 7, 12));
  assert.notDeepEqual(a, choose(1000, 40, 8, 12));
  for (let i = 990; i < 1000; i++) assert.ok(a.includes(i), `state ${i} of the last point not sampled`);
  assert.deepEqual(choose(5, 40, 7, 2), [0, 1, 2, 3, 4]);
});
