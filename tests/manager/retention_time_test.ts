// keepTimeInterval (Orbax's keep_time_interval): one checkpoint kept per period of save time.
import assert from "node:assert/strict";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { makeCheckpoint, withDir } from "./_helpers.ts";

/** Which of `savedAt`'s steps (in order) the rule keeps by time: the first, then each `interval` s after the last kept. */
function keptByTime(savedAt: Map<number, number>, interval: number): number[] {
  const kept: number[] = [];
  for (const [step, at] of savedAt) {
    if (kept.length === 0 || at - savedAt.get(kept.at(-1)!)! >= interval * 1000) kept.push(step);
  }
  return kept;
}

Deno.test("keepTimeInterval keeps the first checkpoint and then each saved at least the interval after the last kept", async () => {
  await withDir(async (dir) => {
    const interval = 2;
    const manager = await CheckpointManager.open(dir, { maxToKeep: 1, keepTimeInterval: interval });
    const savedAt = new Map<number, number>();
    const save = async (step: number) =>
      savedAt.set(step, Date.parse((await manager.save(makeCheckpoint(step))).savedAt));
    // Steps 1-3 at once (within the interval of step 1 unless a tiny save takes 2 s), then steps
    // 4 and 5 once the interval has passed since step 1's commit, by the times the manager recorded.
    for (const step of [1, 2, 3]) await save(step);
    await new Promise((r) => setTimeout(r, Math.max(0, savedAt.get(1)! + interval * 1000 + 10 - Date.now())));
    for (const step of [4, 5]) await save(step);
    const listed = await manager.list();
    const byTime = listed.filter((e) => e.keptBy.includes("time")).map((e) => e.step);
    // The rule, whatever the machine's timing: the kept ones are those it picks from the recorded times.
    assert.deepEqual(byTime, keptByTime(savedAt, interval));
    assert.deepEqual(listed.map((e) => e.step), [...new Set([...byTime, 5])]);
    assert.equal(byTime[0], 1, "the first is kept");
    assert.ok(byTime.length >= 2 && byTime.length < 5, `some, not all, kept by time: ${byTime}`);
    assert.deepEqual(listed.at(-1)!.keptBy.includes("recent"), true);
    await manager.close();
    // The rule is recorded: a read-only view shows the same reasons.
    const view = await CheckpointManager.open(dir, { readOnly: true });
    assert.deepEqual((await view.list()).map((e) => e.keptBy), listed.map((e) => e.keptBy));
    await view.close();
    const index = JSON.parse(await Deno.readTextFile(`${dir}/index.json`));
    assert.equal(index.retention.keepTimeInterval, interval);
  });
});

Deno.test("keepTimeInterval must be a positive number of seconds", async () => {
  await withDir(async (dir) => {
    for (const bad of [0, -1, NaN, Infinity, "1"]) {
      await assert.rejects(
        CheckpointManager.open(dir, { keepTimeInterval: bad as number }),
        /Invalid option keepTimeInterval: .*expected a positive number of seconds/,
      );
    }
  });
});
