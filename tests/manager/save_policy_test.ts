import assert from "node:assert/strict";
import { SavePolicy } from "../../src/manager/save_policy.ts";

Deno.test("SavePolicy saves by step, by wall-clock time, at the last step and at a preemption", () => {
  let now = 1000;
  let preempted = false;
  const policy = new SavePolicy({
    everySteps: 10,
    everySeconds: 5,
    lastStep: 33,
    preemption: { reached: () => preempted },
    now: () => now,
  });
  const said: [number, string | undefined][] = [];
  for (let step = 1; step <= 33; step++) {
    now += 700; // 0.7 s a step: the time interval (5 s) comes every 7 or 8 steps
    if (step === 26) preempted = true;
    said.push([step, policy.shouldSave(step)]);
    if (step === 26) preempted = false;
  }
  assert.deepEqual(said.filter(([, r]) => r !== undefined), [
    [8, "time"],
    [10, "steps"],
    [18, "time"],
    [20, "steps"],
    [26, "preemption"],
    [30, "steps"],
    [33, "last"],
  ]);
});

Deno.test("SavePolicy with only a time interval uses the real clock by default", async () => {
  const policy = new SavePolicy({ everySeconds: 0.05 });
  assert.equal(policy.shouldSave(1), undefined);
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(policy.shouldSave(2), "time");
  assert.equal(policy.shouldSave(3), undefined);
});

Deno.test("SavePolicy rejects bad options with the option's name", () => {
  assert.throws(() => new SavePolicy({ everySteps: 0 }), /Invalid option everySteps: 0/);
  assert.throws(() => new SavePolicy({ everySeconds: -1 }), /Invalid option everySeconds: -1/);
  assert.throws(() => new SavePolicy({ lastStep: 1.5 }), /Invalid option lastStep: 1.5/);
  assert.throws(() => new SavePolicy({ preemption: {} as never }), /Invalid option preemption/);
});
