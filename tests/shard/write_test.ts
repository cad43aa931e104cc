import assert from "node:assert/strict";
import { loadCheckpoint, readCheckpointIndex } from "../../mod.ts";
import {
  commitShards,
  listShardLeftovers,
  readShardManifest,
  removeShardLeftovers,
  saveShard,
  saveSharded,
  ShardConflictError,
  ShardDeadlineError,
  ShardWriterError,
} from "../../src/shard/mod.ts";
import { assertSameCheckpoint, withDir } from "../_util.ts";
import { replica, SPLIT } from "./_fixture.ts";

const CHILD = new URL("./_writer_child.ts", import.meta.url).pathname;
const WORKER = new URL("./_writer_worker.ts", import.meta.url).href;

/** Starts a writer process; `lines` resolves with what it printed once it exits. */
function writerProcess(args: Record<string, unknown>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CHILD, JSON.stringify(args)],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const done = child.output().then((o) => ({
    code: o.code,
    signal: o.signal,
    lines: new TextDecoder().decode(o.stdout).trim().split("\n"),
    stderr: new TextDecoder().decode(o.stderr),
  }));
  return { child, done };
}

Deno.test("saveSharded round trips bit for bit with 1, 2 and 4 writers, and every part is an ordinary checkpoint", async () => {
  await withDir(async (dir) => {
    for (const writers of [1, 2, 4]) {
      for (const seed of [1, 2, 3]) {
        const c = replica(seed);
        const address = `${dir}/w${writers}-s${seed}.ckpt`;
        const { digest, manifest } = await saveSharded(address, c, { writers, splitBytes: SPLIT });
        assert.equal(manifest.parts.length, writers);
        const embed = manifest.tensors.find((t) => t.name === "embed")!;
        assert.equal(embed.slices.length, writers, "the large tensor is split across every writer");
        const back = await loadCheckpoint(address, { sha256: digest });
        assertSameCheckpoint(back, c);
        // Each part opens on its own, and says where its slices belong.
        for (const [i, p] of manifest.parts.entries()) {
          const partPath = `${address}.parts/${manifest.saveId}/${p.name}`;
          const part = await loadCheckpoint(partPath);
          const shard = part.metadata.custom!.ckptShard as { part: number; parts: number; slices: unknown[] };
          assert.equal(shard.part, i);
          assert.equal(shard.parts, writers);
          assert.equal(part.tensors.length, shard.slices.length);
          assert.equal((await readCheckpointIndex(partPath)).streamSha256, p.digest);
        }
      }
    }
  });
});

Deno.test("saveShard from worker threads: each writes its part, writer 0 commits (done records in the store, or over a BroadcastChannel)", async () => {
  await withDir(async (dir) => {
    for (const [writers, channel] of [[2, false], [4, false], [2, true], [4, true]] as const) {
      const address = `${dir}/threads-${writers}-${channel}.ckpt`;
      const workers: Worker[] = [];
      const results = await Promise.all(
        Array.from(
          { length: writers },
          (_, writer) =>
            new Promise<{ bytes?: number; digest?: string; error?: string }>((resolve) => {
              // Workers stay up until every writer reported, as a job's threads do: a writer's
              // channel answers a committer that asks late only while its thread lives.
              const w = new Worker(WORKER, { type: "module" });
              workers.push(w);
              w.onmessage = (e) => resolve(e.data);
              w.postMessage({ address, writer, writers, saveId: `t${writers}-${channel}`, seed: 11, channel });
            }),
        ),
      );
      for (const w of workers) w.terminate();
      for (const r of results) assert.equal(r.error, undefined);
      assert.match(results[0]!.digest!, /^[0-9a-f]{64}$/);
      assertSameCheckpoint(await loadCheckpoint(address, { sha256: results[0]!.digest! }), replica(11));
      const done = [...Deno.readDirSync(`${address}.parts/t${writers}-${channel}`)].filter((e) =>
        e.name.startsWith("done-")
      );
      assert.equal(done.length, channel ? 0 : writers, "done records in the store only without a channel");
    }
  });
});

Deno.test("saveShard from separate processes, 2 and 4 writers, commits one checkpoint that loads bit for bit", async () => {
  await withDir(async (dir) => {
    for (const writers of [2, 4]) {
      const address = `${dir}/procs-${writers}.ckpt`;
      const procs = Array.from(
        { length: writers },
        (_, writer) => writerProcess({ address, writer, writers, saveId: `p${writers}`, seed: 21 }),
      );
      const outs = await Promise.all(procs.map((p) => p.done));
      for (const o of outs) assert.equal(o.code, 0, o.stderr);
      const committed = outs[0]!.lines.find((l) => l.startsWith("committed "))!.slice(10);
      assertSameCheckpoint(await loadCheckpoint(address, { sha256: committed }), replica(21));
      assert.deepEqual(await listShardLeftovers(address), []);
    }
  });
});

Deno.test("two committers racing for one save: exactly one wins, the other gets ShardConflictError", async () => {
  await withDir(async (dir) => {
    const address = `${dir}/race.ckpt`;
    const c = replica(5);
    for (let round = 0; round < 5; round++) {
      const a = `${address}-${round}`;
      await Promise.all(
        [0, 1].map((writer) => saveShard(a, c, { writer, writers: 2, saveId: "r", splitBytes: SPLIT, commit: false })),
      );
      const results = await Promise.allSettled([1, 2, 3].map(() => commitShards(a, { saveId: "r", writers: 2 })));
      const won = results.filter((r) => r.status === "fulfilled");
      const lost = results.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
      assert.equal(won.length, 1);
      assert.equal(lost.length, 2);
      for (const l of lost) {
        assert.ok(l.reason instanceof ShardConflictError, String(l.reason));
        assert.match(l.reason.message, /another committer's manifest is already there \(save "r" not committed\)/);
      }
      const { digest } = await readShardManifest(a);
      assert.equal(digest, (won[0] as PromiseFulfilledResult<{ digest: string }>).value.digest);
      assertSameCheckpoint(await loadCheckpoint(a), c);
    }
  });
});

Deno.test("a writer that never finishes fails the save after the deadline, naming it; nothing is committed", async () => {
  await withDir(async (dir) => {
    const address = `${dir}/late.ckpt`;
    const c = replica(6);
    // Writers 0 and 2 of 3 write; writer 1 never does.
    const w2 = saveShard(address, c, { writer: 2, writers: 3, saveId: "d", splitBytes: SPLIT });
    await assert.rejects(
      saveShard(address, c, { writer: 0, writers: 3, saveId: "d", splitBytes: SPLIT, deadline: 500, poll: 20 }),
      (e) =>
        e instanceof ShardDeadlineError && e.missing.length === 1 && e.missing[0] === 1 &&
        /writer 1 of 3 \(part-00002-of-00003\.ckpt\) wrote no done record within 500 ms; nothing was committed/.test(
          e.message,
        ) && e.message.includes(address),
    );
    await w2;
    await assert.rejects(Deno.stat(address), Deno.errors.NotFound);
    await assert.rejects(loadCheckpoint(address), Deno.errors.NotFound);
    const left = await listShardLeftovers(address);
    assert.deepEqual(left.map((k) => k.split("/").pop()).sort(), [
      "done-00001-of-00003.json",
      "done-00003-of-00003.json",
      "part-00001-of-00003.ckpt",
      "part-00003-of-00003.ckpt",
    ]);
    assert.equal(await removeShardLeftovers(address), 4);
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  });
});

Deno.test("saveSharded: a writer that fails fails the save at once, and nothing is committed", async () => {
  await withDir(async (dir) => {
    const bad = {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float32" as const, shape: [2], data: new Float32Array(3) }],
    };
    await assert.rejects(saveSharded(`${dir}/x.ckpt`, bad, { writers: 2 }), RangeError);
    await assert.rejects(Deno.stat(`${dir}/x.ckpt`), Deno.errors.NotFound);
  });
});

Deno.test("saveShard refuses bad options before writing anything", async () => {
  await withDir(async (dir) => {
    const c = replica(1);
    const a = `${dir}/o.ckpt`;
    await assert.rejects(
      saveShard(a, c, { writer: 2, writers: 2, saveId: "s" }),
      /writer must be an integer from 0 to 1/,
    );
    await assert.rejects(saveShard(a, c, { writer: 0, writers: 0, saveId: "s" }), RangeError);
    await assert.rejects(saveShard(a, c, { writer: 0, writers: 1, saveId: "../s" }), TypeError);
    await assert.rejects(
      saveShard(a, c, { writer: 0, writers: 1, saveId: "s", dedline: 5 } as never),
      /unknown option "dedline"/,
    );
    const sliced = {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "uint8" as const, shape: [4], rows: [0, 2] as const, data: new Uint8Array(2) }],
    };
    await assert.rejects(saveShard(a, sliced, { writer: 0, writers: 2, saveId: "s" }), /pass plan/);
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  });
});

Deno.test("the committer refuses a part that is missing or not the one its done record names; nothing is committed", async () => {
  await withDir(async (dir) => {
    const c = replica(7);
    for (const damage of ["swap", "truncate", "remove"] as const) {
      const address = `${dir}/${damage}.ckpt`;
      await Promise.all(
        [0, 1].map((writer) =>
          saveShard(address, c, { writer, writers: 2, saveId: "v", splitBytes: SPLIT, commit: false })
        ),
      );
      const part = `${address}.parts/v/part-00002-of-00002.ckpt`;
      if (damage === "swap") {
        // Another save's part of the same size in its place.
        await saveShard(`${dir}/other.ckpt`, replica(8), {
          writer: 1,
          writers: 2,
          saveId: "v",
          splitBytes: SPLIT,
          commit: false,
        });
        const other = await Deno.readFile(`${dir}/other.ckpt.parts/v/part-00002-of-00002.ckpt`);
        const mine = await Deno.readFile(part);
        const same = new Uint8Array(mine.byteLength);
        same.set(other.subarray(0, mine.byteLength));
        same.set(other.subarray(other.byteLength - 48), mine.byteLength - 48); // its footer, at the end
        await Deno.writeFile(part, same);
      } else if (damage === "truncate") await Deno.truncate(part, 100);
      else await Deno.remove(part);
      await assert.rejects(
        commitShards(address, { saveId: "v", writers: 2, deadline: 1000 }),
        damage === "swap"
          ? /holds stream digest [0-9a-f]{64}, its done record says/
          : /is (100 bytes|missing) in the store/,
      );
      await assert.rejects(Deno.stat(address), Deno.errors.NotFound);
    }
  });
});

Deno.test("writers whose replicas differ make plans that disagree: the committer refuses to commit", async () => {
  await withDir(async (dir) => {
    const address = `${dir}/a.ckpt`;
    const c = replica(3);
    const fewer = { metadata: c.metadata, tensors: c.tensors.filter((t) => t.name !== "embed") };
    const results = await Promise.allSettled([
      saveShard(address, c, { writer: 0, writers: 2, saveId: "x", splitBytes: SPLIT, deadline: 5000 }),
      saveShard(address, fewer, { writer: 1, writers: 2, saveId: "x", splitBytes: SPLIT, commit: false }),
    ]);
    assert.equal(results[0]!.status, "rejected");
    assert.match(String((results[0] as PromiseRejectedResult).reason), /do not make a valid manifest/);
    await assert.rejects(Deno.stat(address), Deno.errors.NotFound);
  });
});

Deno.test("a writer that fails says so in its done record: the committer fails at once, naming it, long before its deadline", async () => {
  await withDir(async (dir) => {
    const address = `${dir}/fail.ckpt`;
    const c = replica(4);
    // Writer 1 holds a tensor whose data does not match its shape: its save fails.
    const broken = {
      metadata: c.metadata,
      tensors: c.tensors.map((t) => t.name === "embed" ? { ...t, data: new Float32Array(3) } : t),
    };
    const started = performance.now();
    const [committer, failing] = await Promise.allSettled([
      saveShard(address, c, { writer: 0, writers: 2, saveId: "f", splitBytes: SPLIT, deadline: 60_000, poll: 20 }),
      saveShard(address, broken, { writer: 1, writers: 2, saveId: "f", splitBytes: SPLIT }),
    ]);
    assert.equal(failing.status, "rejected");
    assert.equal(committer.status, "rejected");
    const e = (committer as PromiseRejectedResult).reason;
    assert.ok(e instanceof ShardWriterError, String(e));
    assert.equal(e.writer, 1);
    assert.match(e.message, /writer 1 of 2 failed \(RangeError: .*\); nothing was committed/);
    assert.ok(performance.now() - started < 30_000, "the committer did not wait for its deadline");
    await assert.rejects(Deno.stat(address), Deno.errors.NotFound);
  });
});
