import assert from "node:assert/strict";
import { join } from "node:path";
import { ChecksumMismatchError, loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import type { CheckpointInput, SaveOptions, SaveResult } from "../../mod.ts";
import { BackgroundWriter } from "../../src/background/writer.ts";
import {
  type CheckpointEntry,
  type CheckpointFileWriter,
  CheckpointManager,
  DirectoryLockedError,
  INFERENCE_PRESET,
  TRAINING_PRESET,
} from "../../src/manager/mod.ts";
import { exact, makeCheckpoint, names, warnings, withDir } from "./_helpers.ts";

const quiet = { onWarning: () => {} };

Deno.test("save commits a checkpoint that loads back bit for bit, with its entry", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, quiet);
    const input = makeCheckpoint(7);
    const entry = await manager.save(input);
    assert.equal(entry.step, 7);
    assert.equal(entry.kind, "full");
    assert.equal(entry.path, join(dir, "step-000000007.ckpt"));
    assert.equal(entry.bytes, (await Deno.stat(entry.path)).size);
    assert.equal(entry.bytesWritten, entry.bytes);
    assert.equal(entry.tensorCount, 4);
    assert.deepEqual(entry.metadata, input.metadata);
    assert.ok(!Number.isNaN(Date.parse(entry.savedAt)));
    const back = await loadCheckpoint(entry.path, { sha256: entry.sha256 });
    assert.deepEqual(exact(back.tensors), exact(input.tensors as never));
    assert.deepEqual(exact((await manager.load(7)).tensors), exact(input.tensors as never));
    assert.deepEqual(exact((await manager.latest())!.tensors), exact(input.tensors as never));
    assert.deepEqual(await names(dir), ["ckpt.lock", "index.json", "step-000000007.ckpt"]);
    await manager.close();
    assert.deepEqual(await names(dir), ["index.json", "step-000000007.ckpt"]);
  });
});

Deno.test("maxToKeep keeps the newest checkpoints and deletes the files of the others", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { maxToKeep: 2, ...quiet });
    for (const step of [1, 2, 3, 4]) await manager.save(makeCheckpoint(step));
    assert.deepEqual((await manager.list()).map((e) => e.step), [3, 4]);
    assert.deepEqual((await names(dir)).filter((n) => n.endsWith(".ckpt")), [
      "step-000000003.ckpt",
      "step-000000004.ckpt",
    ]);
    await manager.close();
  });
});

Deno.test("maxToKeep defaults to 5 and Infinity keeps everything", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(join(dir, "a"), quiet);
    for (let step = 1; step <= 7; step++) await manager.save(makeCheckpoint(step, { trained: 1 }));
    assert.deepEqual((await manager.list()).map((e) => e.step), [3, 4, 5, 6, 7]);
    await manager.close();
    const all = await CheckpointManager.open(join(dir, "b"), { maxToKeep: Infinity, ...quiet });
    for (let step = 1; step <= 7; step++) await all.save(makeCheckpoint(step, { trained: 1 }));
    assert.equal((await all.list()).length, 7);
    await all.close();
  });
});

Deno.test("keepEvery keeps every K-th step forever besides the newest", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { maxToKeep: 1, keepEvery: 3, ...quiet });
    for (let step = 1; step <= 8; step++) await manager.save(makeCheckpoint(step, { trained: 1 }));
    const listed = await manager.list();
    assert.deepEqual(listed.map((e) => [e.step, e.keptBy]), [[3, ["every"]], [6, ["every"]], [8, ["recent"]]]);
    await manager.close();
  });
});

Deno.test("best keeps the best K by a metric; NaN and missing metrics never count", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, {
      maxToKeep: 1,
      best: { metric: "acc", mode: "max", keep: 2 },
      ...quiet,
    });
    const accs: Record<number, number | undefined> = { 1: 0.5, 2: 0.9, 3: NaN, 4: undefined, 5: 0.7, 6: 0.1 };
    for (const [step, acc] of Object.entries(accs)) {
      await manager.save({
        metadata: { step: Number(step), metrics: acc === undefined ? {} : { acc } },
        tensors: [],
      });
    }
    const listed = await manager.list();
    assert.deepEqual(
      listed.map((e) => [e.step, e.best, e.bestRank, e.keptBy]),
      [[2, true, 1, ["best"]], [5, true, 2, ["best"]], [6, false, undefined, ["recent"]]],
    );
    await manager.close();
  });
});

Deno.test("best with mode min keeps the lowest; on a tie the newer step wins", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, {
      maxToKeep: 1,
      best: { metric: "loss", mode: "min" },
      ...quiet,
    });
    for (const [step, loss] of [[1, 0.2], [2, 0.2], [3, 0.5], [4, 0.9]] as const) {
      await manager.save({ metadata: { step, metrics: { loss } }, tensors: [] });
    }
    assert.deepEqual((await manager.list()).map((e) => [e.step, e.best]), [[2, true], [4, false]]);
    await manager.close();
  });
});

Deno.test("latest is the highest step in the index, whatever the files' modification times", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, quiet);
    await manager.save(makeCheckpoint(1));
    const second = await manager.save(makeCheckpoint(2));
    const first = join(dir, "step-000000001.ckpt");
    await Deno.utime(first, new Date(2100, 0, 1), new Date(2100, 0, 1));
    await Deno.utime(second.path, new Date(2000, 0, 1), new Date(2000, 0, 1));
    assert.equal((await manager.latest())!.metadata.step, 2);
    await manager.close();
    const again = await CheckpointManager.open(dir, quiet);
    assert.equal((await again.latest())!.metadata.step, 2);
    await again.close();
  });
});

Deno.test("save refuses a step that is not above every committed step, until newer ones are deleted", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, quiet);
    await manager.save(makeCheckpoint(10));
    await manager.save(makeCheckpoint(20));
    await assert.rejects(
      () => manager.save(makeCheckpoint(20)),
      /step 20 is already committed and steps must increase/,
    );
    await assert.rejects(() => manager.save(makeCheckpoint(15)), RangeError);
    await manager.delete(20);
    await manager.save(makeCheckpoint(15));
    assert.deepEqual((await manager.list()).map((e) => e.step), [10, 15]);
    await manager.flush().catch(() => {}); // the rejected saves were listened to: nothing to report
    await manager.close();
  });
});

Deno.test("save rejects invalid metadata and duplicate names without touching the directory", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, quiet);
    await manager.save(makeCheckpoint(1));
    const before = await names(dir);
    await assert.rejects(() => manager.save({ metadata: { step: -1 }, tensors: [] }), TypeError);
    await assert.rejects(() => manager.save(null as unknown as CheckpointInput), TypeError);
    const t = { name: "w", dtype: "float32" as const, shape: [1], data: new Float32Array(1) };
    await assert.rejects(() => manager.save({ metadata: { step: 2 }, tensors: [t, t] }), /w/);
    assert.deepEqual(await names(dir), before);
    assert.deepEqual((await manager.list()).map((e) => e.step), [1]);
    await manager.close();
  });
});

Deno.test("delete removes a checkpoint from the index and the disk; an unknown step is a RangeError", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, quiet);
    await manager.save(makeCheckpoint(1));
    const two = await manager.save(makeCheckpoint(2));
    await manager.delete(2);
    await assert.rejects(() => Deno.stat(two.path), Deno.errors.NotFound);
    await assert.rejects(() => manager.delete(2), /no committed checkpoint for step 2/);
    await assert.rejects(() => manager.load(2), RangeError);
    assert.equal((await manager.latest())!.metadata.step, 1);
    await manager.close();
  });
});

Deno.test("the filename pattern names the files; {step:N} pads with zeros", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { filename: "model.{step:4}.bin", ...quiet });
    const entry = await manager.save(makeCheckpoint(12));
    assert.equal(entry.path, join(dir, "model.0012.bin"));
    await manager.save(makeCheckpoint(123456));
    assert.ok((await names(dir)).includes("model.123456.bin"));
    await manager.close();
  });
});

Deno.test("bad options are TypeErrors naming the option", async () => {
  await withDir(async (dir) => {
    const cases: [object, RegExp][] = [
      [{ maxToKeep: 0 }, /maxToKeep: 0 is not a positive integer/],
      [{ maxToKeep: 1.5 }, /maxToKeep/],
      [{ keepEvery: -3 }, /keepEvery/],
      [{ best: { metric: "loss", mode: "lowest" } }, /best.mode/],
      [{ best: { metric: "", mode: "min" } }, /best/],
      [{ best: { metric: "loss", mode: "min", keep: 0 } }, /best.keep/],
      [{ compression: "zstd" }, /compression/],
      [{ codec: "msgpack" }, /Unknown codec/],
      [{ filename: "step.ckpt" }, /must contain \{step\}/],
      [{ filename: "sub/{step}.ckpt" }, /no path separators/],
      [{ filename: ".{step}" }, /reserved for temporary files/],
      [{ filename: "{step}{step}" }, /exactly once/],
      [{ filename: "x{step}.manifest.json" }, /reserved for manifests/],
      [{ groups: "params" }, /groups/],
      [{ writer: {} }, /writer/],
      [{ incremental: true, writer: { save: () => Promise.resolve({ bytes: 0, sha256: "" }) } }, /writer is not used/],
      [{ onWarning: "log" }, /onWarning/],
    ];
    for (const [options, message] of cases) {
      await assert.rejects(() => CheckpointManager.open(dir, options), (e: Error) => {
        assert.ok(e instanceof TypeError, `${JSON.stringify(options)}: ${e}`);
        assert.match(e.message, message);
        return true;
      });
    }
    // Nothing was left locked by the failed opens.
    await (await CheckpointManager.open(dir, quiet)).close();
  });
});

Deno.test("open refuses a path that is a file", async () => {
  await withDir(async (dir) => {
    await Deno.writeTextFile(join(dir, "f"), "x");
    await assert.rejects(() => CheckpointManager.open(join(dir, "f")), /Cannot (create|open) checkpoint directory/);
  });
});

Deno.test("latest skips a corrupt newest checkpoint with a warning and quarantines it; load(step) names the problem", async () => {
  await withDir(async (dir) => {
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    await manager.save(makeCheckpoint(1));
    const two = await manager.save(makeCheckpoint(2));
    const bytes = await Deno.readFile(two.path);
    bytes[Math.floor(bytes.length / 2)]! ^= 0x01; // one flipped bit, same size
    await Deno.writeFile(two.path, bytes);
    await assert.rejects(() => manager.load(2), ChecksumMismatchError); // asking for a step does not quarantine
    const latest = await manager.latest();
    assert.equal(latest!.metadata.step, 1);
    assert.equal(w.list.length, 1);
    assert.match(w.list[0]!, /Skipping checkpoint step 2 .*moved aside .*falling back to an older one/);
    await assert.rejects(() => manager.load(2), /no committed checkpoint for step 2|not committed/);
    assert.equal((await manager.load()).metadata.step, 1);
    await manager.close();
  });
});

Deno.test("a missing file is reported on open, skipped by latest, and listed as missing", async () => {
  await withDir(async (dir) => {
    const first = await CheckpointManager.open(dir, quiet);
    await first.save(makeCheckpoint(1));
    const two = await first.save(makeCheckpoint(2));
    await first.close();
    await Deno.remove(two.path);
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    assert.equal(w.list.length, 1);
    assert.match(w.list[0]!, /step 2 .* is damaged: its file .*step-000000002.ckpt is missing/);
    const listed = await manager.list();
    assert.deepEqual(listed.map((e) => [e.step, e.status]), [[1, "ok"], [2, "missing"]]);
    assert.match(listed[1]!.problem!, /step-000000002\.ckpt is missing/);
    await assert.rejects(() => manager.load(2), Deno.errors.NotFound);
    assert.equal((await manager.latest())!.metadata.step, 1);
    assert.match(w.list[1]!, /Skipping checkpoint step 2 .*missing.*; no longer committed/);
    assert.deepEqual((await manager.list()).map((e) => e.step), [1]);
    await manager.close();
  });
});

Deno.test("latest resolves undefined and load() throws when no checkpoint is loadable", async () => {
  await withDir(async (dir) => {
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    assert.equal(await manager.latest(), undefined);
    await assert.rejects(() => manager.load(), /holds no loadable checkpoint/);
    const one = await manager.save(makeCheckpoint(1));
    await Deno.writeFile(one.path, new Uint8Array(0));
    assert.equal(await manager.latest(), undefined);
    assert.equal(w.list.length, 1);
    await manager.close();
  });
});

Deno.test("list reports sizes, digests, metrics and tensors without reading tensor data, and damage as status", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { best: { metric: "loss", mode: "min" }, ...quiet });
    const a = await manager.save(makeCheckpoint(1, { loss: 0.5 }));
    const b = await manager.save(makeCheckpoint(2, { loss: 0.7 }));
    const listed = await manager.list();
    assert.equal(listed[0]!.sha256, a.sha256);
    assert.equal(listed[1]!.bytes, b.bytes);
    assert.deepEqual(listed.map((e) => [e.step, e.best, e.metadata.metrics?.loss, e.status]), [
      [1, true, 0.5, "ok"],
      [2, false, 0.7, "ok"],
    ]);
    assert.deepEqual(listed[0]!.tensors!.map((t) => [t.name, t.group, t.shape]), [
      ["embedding/frozen", "params", [64]],
      ["dense/kernel", "params", [64]],
      ["bn/moving_mean", "buffers", [2]],
      ["optimizer/iter", "optimizer", []],
    ]);
    await Deno.truncate(b.path, 100);
    const after = await manager.list();
    assert.equal(after[1]!.status, "damaged");
    assert.match(after[1]!.problem!, /has 100 bytes, the index says/);
    await manager.close();
  });
});

Deno.test("open removes temporary leftovers and uncommitted checkpoint files, and leaves other files alone", async () => {
  await withDir(async (dir) => {
    const first = await CheckpointManager.open(dir, quiet);
    await first.save(makeCheckpoint(1));
    await first.close();
    // What interrupted saves leave: a temporary file, a renamed but uncommitted checkpoint, a stray index temp.
    await Deno.writeFile(join(dir, ".step-000000002.ckpt.tmp-4242-0badc0de"), new Uint8Array(100));
    await saveCheckpoint(join(dir, "step-000000002.ckpt"), makeCheckpoint(2));
    await Deno.writeTextFile(join(dir, ".index.json.tmp-4242-12345678"), "{");
    await Deno.writeTextFile(join(dir, "notes.txt"), "mine");
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    assert.deepEqual(await names(dir), ["ckpt.lock", "index.json", "notes.txt", "step-000000001.ckpt"]);
    assert.equal(w.list.length, 1);
    assert.match(w.list[0]!, /Removed 3 leftover file\(s\)/);
    assert.deepEqual((await manager.list()).map((e) => e.step), [1]);
    await manager.close();
  });
});

Deno.test("a directory of checkpoint files without an index is adopted after verifying each file", async () => {
  await withDir(async (dir) => {
    for (const step of [5, 10]) {
      await saveCheckpoint(join(dir, `step-${String(step).padStart(9, "0")}.ckpt`), makeCheckpoint(step));
    }
    const bad = join(dir, "step-000000015.ckpt");
    await saveCheckpoint(bad, makeCheckpoint(15));
    await Deno.truncate(bad, 200);
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    assert.deepEqual((await manager.list()).map((e) => [e.step, e.status]), [[5, "ok"], [10, "ok"]]);
    assert.equal((await manager.latest())!.metadata.step, 10);
    assert.ok(w.list.some((m) => /Not adopting .*step-000000015.ckpt/.test(m)));
    assert.ok(w.list.some((m) => /Adopted 2 checkpoint\(s\).*steps 5, 10/.test(m)));
    assert.ok((await names(dir)).includes(".step-000000015.ckpt.unverified"), "the unverifiable file is kept aside");
    await manager.close();
  });
});

Deno.test("a corrupt index is rebuilt from the checkpoint files with a warning", async () => {
  await withDir(async (dir) => {
    const first = await CheckpointManager.open(dir, quiet);
    await first.save(makeCheckpoint(1));
    await first.save(makeCheckpoint(2));
    await first.close();
    await Deno.writeTextFile(join(dir, "index.json"), '{"format":"ckpt-manager-index","version":1,"checkpoints":[{');
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    assert.match(w.list[0]!, /Cannot read checkpoint index .*index.json: not valid UTF-8 JSON.*rebuilding it/);
    assert.deepEqual((await manager.list()).map((e) => e.step), [1, 2]);
    await manager.close();
    // A read-only view reports the damage and shows what a writer would rebuild, writing nothing.
    await Deno.writeTextFile(join(dir, "index.json"), "[]");
    const seen = warnings();
    const view = await CheckpointManager.open(dir, { readOnly: true, onWarning: seen.onWarning });
    assert.match(seen.list[0]!, /index.*(not a version|format is undefined).*would rebuild.*nothing is rewritten/);
    assert.deepEqual((await view.list()).map((e) => e.step), [1, 2]);
    await view.close();
    assert.equal(await Deno.readTextFile(join(dir, "index.json")), "[]");
  });
});

Deno.test("an index entry with a hostile field is refused with the entry named", async () => {
  await withDir(async (dir) => {
    const m = await CheckpointManager.open(dir, quiet);
    await m.save(makeCheckpoint(1));
    await m.close();
    const index = JSON.parse(await Deno.readTextFile(join(dir, "index.json")));
    index.checkpoints[0].file = "../../etc/passwd";
    await Deno.writeTextFile(join(dir, "index.json"), JSON.stringify(index));
    // Refused as a damaged index (a read-only view then lists the files a writer would adopt).
    const w = warnings();
    const view = await CheckpointManager.open(dir, { readOnly: true, onWarning: w.onWarning });
    assert.match(w.list[0]!, /entry 0: file is missing or malformed/);
    assert.deepEqual((await view.list()).map((e) => e.path), [join(dir, "step-000000001.ckpt")]);
    await view.close();
  });
});

Deno.test("a second manager on the same directory gets DirectoryLockedError naming the owner's pid", async () => {
  await withDir(async (dir) => {
    const first = await CheckpointManager.open(dir, quiet);
    await assert.rejects(() => CheckpointManager.open(dir, quiet), (e: unknown) => {
      assert.ok(e instanceof DirectoryLockedError);
      assert.equal(e.pid, Deno.pid);
      assert.match(e.message, new RegExp(`locked by pid ${Deno.pid}`));
      assert.match(e.message, /ckpt.lock/);
      return true;
    });
    // A read-only view is allowed meanwhile, and sees what the writer commits.
    const view = await CheckpointManager.open(dir, { readOnly: true });
    assert.deepEqual(await view.list(), []);
    await first.save(makeCheckpoint(3));
    assert.deepEqual((await view.list()).map((e) => e.step), [3]);
    assert.throws(() => view.save(makeCheckpoint(4)), /opened readOnly/);
    await assert.rejects(() => view.delete(3), /opened readOnly/);
    await first.close();
    await (await CheckpointManager.open(dir, quiet)).close();
  });
});

Deno.test("a manager in another process holding the directory locks this one out", async () => {
  await withDir(async (dir) => {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_hold_lock.ts", import.meta.url).pathname, dir],
      stdout: "piped",
      stdin: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!out.includes("\n")) out += (await reader.read()).value ?? "";
    assert.equal(out.trim(), `locked ${child.pid}`);
    await assert.rejects(() => CheckpointManager.open(dir, quiet), (e: unknown) => {
      assert.ok(e instanceof DirectoryLockedError);
      assert.equal(e.pid, child.pid);
      return true;
    });
    await child.stdin.close();
    assert.equal((await child.status).code, 0);
    reader.releaseLock();
    await child.stdout.cancel().catch(() => {});
    await (await CheckpointManager.open(dir, quiet)).close();
  });
});

Deno.test("a stale lock of a dead process is taken over with a warning", async () => {
  await withDir(async (dir) => {
    // A pid that is certainly not running: a child that has exited.
    const exited = new Deno.Command("true").spawn();
    await exited.status;
    const pid = exited.pid;
    await Deno.writeTextFile(join(dir, "ckpt.lock"), JSON.stringify({ pid, since: "2026-01-01T00:00:00.000Z" }));
    const w = warnings();
    const manager = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    assert.equal(w.list.length, 1);
    // "is no longer running" where /proc can be read (deno -A), "no longer holds it" where only the
    // flock tells (Deno asks --allow-all for /proc): both take the lock over.
    assert.match(
      w.list[0]!,
      new RegExp(`Taking over stale lock .*ckpt.lock: pid ${pid} .*(is no longer running|no longer holds it)`),
    );
    assert.equal(JSON.parse(await Deno.readTextFile(join(dir, "ckpt.lock"))).pid, Deno.pid);
    await manager.close();
  });
});

Deno.test("the training preset keeps every group uncompressed; the inference preset keeps params, gzipped", async () => {
  await withDir(async (dir) => {
    const training = await CheckpointManager.open(join(dir, "t"), { ...TRAINING_PRESET, ...quiet });
    const t = await training.save(makeCheckpoint(1));
    assert.deepEqual([...(await Deno.readFile(t.path)).subarray(0, 4)], [0x89, 0x43, 0x4b, 0x50]);
    assert.deepEqual((await training.load(1)).tensors.map((x) => x.group), [
      "params",
      "params",
      "buffers",
      "optimizer",
    ]);
    await training.close();
    const inference = await CheckpointManager.open(join(dir, "i"), { ...INFERENCE_PRESET, ...quiet });
    const i = await inference.save(makeCheckpoint(1));
    assert.deepEqual([...(await Deno.readFile(i.path)).subarray(0, 2)], [0x1f, 0x8b]);
    assert.equal(i.tensorCount, 3);
    const back = await inference.load(1);
    assert.deepEqual(back.tensors.map((x) => x.name), ["embedding/frozen", "dense/kernel", "bn/moving_mean"]);
    assert.deepEqual(exact(back.tensors), exact((makeCheckpoint(1).tensors as never[]).slice(0, 3)));
    const [listed] = await inference.list();
    assert.equal(listed!.status, "ok");
    assert.equal(listed!.tensors, undefined, "a gzip file has no index to read without decompressing");
    await inference.close();
  });
});

Deno.test("the json codec and tensors given as an async iterable work", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { codec: "json", groups: ["params", "buffers"], ...quiet });
    const input = makeCheckpoint(4);
    async function* lazily() {
      yield* input.tensors as never[];
    }
    const entry = await manager.save({ metadata: input.metadata, tensors: lazily() });
    assert.equal(entry.tensorCount, 3);
    assert.deepEqual(exact((await manager.load(4)).tensors), exact((input.tensors as never[]).slice(0, 3)));
    await manager.close();
  });
});

Deno.test("a save whose index cannot be written fails clearly and leaves no new file behind", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, quiet);
    await manager.save(makeCheckpoint(1));
    // Make index.json unreplaceable: a non-empty directory cannot be renamed over.
    await Deno.remove(join(dir, "index.json"));
    await Deno.mkdir(join(dir, "index.json", "x"), { recursive: true });
    await assert.rejects(
      () => manager.save(makeCheckpoint(2)),
      /Cannot save checkpoint step 2 in .*: the index could not be written/,
    );
    assert.deepEqual(await names(dir), ["ckpt.lock", "index.json", "step-000000001.ckpt"]);
    assert.equal((await manager.latest())!.metadata.step, 1);
    await Deno.remove(join(dir, "index.json"), { recursive: true });
    await manager.close().catch(() => {});
  });
});

/** A writer that takes its time, counting how many saves overlap. */
function slowWriter(delay: number): CheckpointFileWriter & { maxInFlight: number; calls: number[] } {
  let inFlight = 0;
  const w = {
    maxInFlight: 0,
    calls: [] as number[],
    async save(path: string, checkpoint: CheckpointInput, options: SaveOptions): Promise<SaveResult> {
      w.calls.push(checkpoint.metadata.step);
      inFlight++;
      w.maxInFlight = Math.max(w.maxInFlight, inFlight);
      try {
        await new Promise((r) => setTimeout(r, delay));
        if (checkpoint.metadata.custom?.fail) throw new Deno.errors.PermissionDenied("simulated");
        return await saveCheckpoint(path, checkpoint, options);
      } finally {
        inFlight--;
      }
    },
  };
  return w;
}

Deno.test("saves are handed to the writer one at a time, in order, and flush waits for them", async () => {
  await withDir(async (dir) => {
    const writer = slowWriter(20);
    const manager = await CheckpointManager.open(dir, { writer, maxToKeep: 10, ...quiet });
    const promises: Promise<CheckpointEntry>[] = [];
    for (let step = 1; step <= 4; step++) promises.push(manager.save(makeCheckpoint(step)));
    assert.deepEqual(writer.calls, [1], "the first save reaches the writer before save() returns");
    assert.ok(manager.pending);
    await manager.flush();
    assert.ok(!manager.pending);
    assert.equal(writer.maxInFlight, 1);
    assert.deepEqual(writer.calls, [1, 2, 3, 4]);
    assert.deepEqual((await Promise.all(promises)).map((e) => e.step), [1, 2, 3, 4]);
    assert.deepEqual((await manager.list()).map((e) => e.step), [1, 2, 3, 4]);
    await manager.close();
  });
});

Deno.test("a failed save nobody awaited is reported by flush, once; an awaited one is not reported again", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { writer: slowWriter(5), ...quiet });
    await manager.save(makeCheckpoint(1));
    const failing = makeCheckpoint(2);
    failing.metadata.custom = { fail: true };
    manager.save(failing); // not awaited
    manager.save(makeCheckpoint(3)); // goes on after the failure
    await assert.rejects(() => manager.flush(), (e: Error) => {
      assert.ok(e instanceof Deno.errors.PermissionDenied);
      assert.match(e.message, /Cannot save checkpoint step 2 to .*step-000000002.ckpt: simulated/);
      return true;
    });
    await manager.flush();
    failing.metadata.step = 4;
    await assert.rejects(() => manager.save(failing), Deno.errors.PermissionDenied);
    await manager.flush();
    assert.deepEqual((await manager.list()).map((e) => e.step), [1, 3]);
    await manager.close();
  });
});

Deno.test("close waits for pending saves and reports an unobserved failure after releasing the lock", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, { writer: slowWriter(10), ...quiet });
    const failing = makeCheckpoint(1);
    failing.metadata.custom = { fail: true };
    manager.save(failing);
    manager.save(makeCheckpoint(2));
    await assert.rejects(() => manager.close(), Deno.errors.PermissionDenied);
    assert.throws(() => manager.save(makeCheckpoint(3)), /closed/);
    const again = await CheckpointManager.open(dir, quiet);
    assert.deepEqual((await again.list()).map((e) => e.step), [2]);
    await again.close();
  });
});

Deno.test("the real BackgroundWriter saves for the manager: buffers handed off at save(), checkpoints verified", async () => {
  await withDir(async (dir) => {
    await using writer = new BackgroundWriter();
    const manager = await CheckpointManager.open(dir, { writer, maxToKeep: 2, ...quiet });
    const expected = [];
    const promises = [];
    for (let step = 1; step <= 3; step++) {
      expected.push(exact(makeCheckpoint(step).tensors as never));
      const input = makeCheckpoint(step, { trained: 4096 });
      expected[step - 1] = exact(input.tensors as never);
      promises.push(manager.save(input));
      if (step === 1) {
        // Nothing was in flight, so the tensors were moved to the worker before save() returned.
        assert.equal((input.tensors as { data: Float32Array }[])[1]!.data.length, 0);
      }
    }
    await manager.flush();
    const entries = await Promise.all(promises);
    assert.deepEqual(entries.map((e) => e.step), [1, 2, 3]);
    assert.deepEqual((await manager.list()).map((e) => e.step), [2, 3]);
    assert.deepEqual(exact((await manager.load(3)).tensors), expected[2]);
    assert.deepEqual(exact((await manager.load(2)).tensors), expected[1]);
    await manager.close();
  });
});

Deno.test("a read-only view shows which checkpoints are best by the rules the writer recorded", async () => {
  await withDir(async (dir) => {
    const writer = await CheckpointManager.open(dir, {
      maxToKeep: 1,
      keepEvery: 4,
      best: { metric: "loss", mode: "min" },
      ...quiet,
    });
    for (const [step, loss] of [[2, 0.1], [4, 0.5], [5, 0.9]] as const) {
      await writer.save({ metadata: { step, metrics: { loss } }, tensors: [] });
    }
    const view = await CheckpointManager.open(dir, { readOnly: true });
    assert.deepEqual((await view.list()).map((e) => [e.step, e.best, e.keptBy]), [
      [2, true, ["best"]],
      [4, false, ["every"]],
      [5, false, ["recent"]],
    ]);
    // Options given to the view win over the recorded ones.
    const other = await CheckpointManager.open(dir, { readOnly: true, best: { metric: "loss", mode: "max" } });
    assert.deepEqual((await other.list()).map((e) => e.best), [false, false, true]);
    await writer.close();
  });
});

Deno.test("verify checks the whole file's recorded SHA-256 on load; verify: false relies on the codec's digests", async () => {
  await withDir(async (dir) => {
    const manager = await CheckpointManager.open(dir, quiet);
    const entry = await manager.save(makeCheckpoint(1));
    await manager.close();
    // Replace the file by another valid checkpoint of the same step: every digest inside it is right.
    await saveCheckpoint(entry.path, makeCheckpoint(1, { trained: 8 }));
    const verified = await CheckpointManager.open(dir, quiet);
    await assert.rejects(() => verified.load(1), (e: unknown) => {
      assert.ok(e instanceof ChecksumMismatchError);
      assert.equal(e.expected, entry.sha256);
      return true;
    });
    await verified.close();
    const trusting = await CheckpointManager.open(dir, { verify: false, ...quiet });
    assert.equal((await trusting.load(1)).tensors[1]!.shape[0], 8);
    await trusting.close();
  });
});

Deno.test("latest() quarantines damaged entries so the steps after the one it resumes from can be saved again", async () => {
  await withDir(async (dir) => {
    const w = warnings();
    const m = await CheckpointManager.open(dir, { maxToKeep: 5, onWarning: w.onWarning });
    for (const step of [1, 2, 3]) await m.save(makeCheckpoint(step));
    const [, second, third] = await m.list();
    await Deno.truncate(second!.path, 50);
    const bytes = await Deno.readFile(third!.path);
    bytes[bytes.length - 70]! ^= 0xff;
    await Deno.writeFile(third!.path, bytes);

    // A read-only view only skips.
    const view = await CheckpointManager.open(dir, { readOnly: true, onWarning: () => {} });
    assert.equal((await view.latest())?.metadata.step, 1);
    assert.deepEqual((await view.list()).map((e) => e.step), [1, 2, 3]);
    await view.close();

    assert.equal((await m.latest())?.metadata.step, 1);
    assert.equal(w.list.length, 2, w.list.join("\n"));
    for (const [i, step] of [[0, 3], [1, 2]] as const) {
      assert.match(
        w.list[i]!,
        new RegExp(
          `^Skipping checkpoint step ${step} in .*: .*; moved aside to .*/\\.step-00000000${step}\\.ckpt\\.damaged and no longer committed; falling back to an older one$`,
        ),
      );
    }
    assert.deepEqual((await m.list()).map((e) => e.step), [1]);
    const files = await names(dir);
    assert.ok(
      files.includes(".step-000000002.ckpt.damaged") && files.includes(".step-000000003.ckpt.damaged"),
      files.join(),
    );
    assert.ok(!files.includes("step-000000002.ckpt") && !files.includes("step-000000003.ckpt"), files.join());
    await m.save(makeCheckpoint(2)); // refused before: step 3 was still committed
    assert.equal((await m.latest())?.metadata.step, 2);
    await m.close();

    // Reopening leaves the quarantined files alone, and the index lists what verifies.
    const again = await CheckpointManager.open(dir, { onWarning: w.onWarning });
    assert.deepEqual((await again.list()).map((e) => e.step), [1, 2]);
    assert.ok((await Deno.stat(join(dir, ".step-000000003.ckpt.damaged"))).isFile);
    await again.close();
  });
});
