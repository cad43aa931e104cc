// keepTimeInterval (Orbax's keep_time_interval): one checkpoint kept per period of save time.
import assert from "node:assert/strict";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { makeCheckpoint, withDir } from "./_helpers.ts";

Deno.test("keepTimeInterval keeps the first checkpoint and then each saved at least the interval after the last kept", async () => {
  await withDir(async (dir) => {
    const interval = 0.15;
    const manager = await CheckpointManager.open(dir, { maxToKeep: 1, keepTimeInterval: interval });
    const savedAt = new Map<number, number>();
    for (let step = 1; step <= 8; step++) {
      const entry = await manager.save(makeCheckpoint(step));
      savedAt.set(step, Date.parse(entry.savedAt));
      await new Promise((r) => setTimeout(r, 60));
    }
    const listed = await manager.list();
    const byTime = listed.filter((e) => e.keptBy.includes("time")).map((e) => e.step);
    assert.equal(byTime[0], 1, "the first is kept");
    assert.ok(byTime.length >= 2 && byTime.length < 8, `some, not all, kept by time: ${byTime}`);
    // The rule, whatever the machine's timing: kept ones are at least the interval apart, and every
    // checkpoint deleted came within the interval of the last one kept before it.
    for (let i = 1; i < byTime.length; i++) {
      assert.ok(savedAt.get(byTime[i]!)! - savedAt.get(byTime[i - 1]!)! >= interval * 1000);
    }
    const kept = new Set(listed.map((e) => e.step));
    for (const [step, at] of savedAt) {
      if (kept.has(step)) continue;
      const before = byTime.filter((s) => s < step).at(-1)!;
      assert.ok(at - savedAt.get(before)! < interval * 1000, `step ${step} was deleted within the interval`);
    }
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
