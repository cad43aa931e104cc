// Preemption under Node.js, through the package: SIGTERM and SIGINT (process.on) save the step
// the loop is at, drain, release the lock and exit 143 / 130; the next run resumes there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdir } from "node:fs/promises";
import { CheckpointManager } from "@ckpt/ckpt";
import { nodeChild, withTempDir } from "./_util.mjs";

const CHILD = new URL("./_preempt_child.mjs", import.meta.url).pathname;

/** Runs the child until it is ready plus a moment, sends `signal`, and resolves with its exit and lines. */
async function stopWith(dir, signal) {
  const lines = [];
  const { done } = nodeChild(CHILD, [dir], (line, child) => {
    lines.push(line);
    if (line.startsWith("ready ")) setTimeout(() => child.kill(signal), 300);
  });
  const { code } = await done;
  return { code, lines };
}

for (const [signal, status] of [["SIGTERM", 143], ["SIGINT", 130]]) {
  test(`Preemption under Node saves the step it is at on ${signal}, exits ${status}, and the next run resumes there`, async () => {
    await withTempDir(async (dir) => {
      const first = await stopWith(dir, signal);
      assert.equal(first.code, status, first.lines.join("\n"));
      const drained = /^drained (\d+) (\d+)$/.exec(first.lines.at(-1) ?? "");
      assert.ok(drained && Number(drained[2]) === status, first.lines.join("\n"));
      assert.ok(!(await readdir(dir)).includes("ckpt.lock"), "the lock is released");
      const second = await stopWith(dir, signal);
      assert.equal(second.lines[0], `ready ${drained[1]}`);
    });
  });
}

const TRAIN_CHILD = new URL("./_preempt_train_child.mjs", import.meta.url).pathname;

test(
  "Preemption.poll under Node sees SIGTERM in a trainOnBatch loop that has no timer, saves that step and exits 143",
  {
    timeout: 120_000,
  },
  async () => {
    await withTempDir(async (dir) => {
      const lines = [];
      const { code } = await nodeChild(TRAIN_CHILD, [dir], (line, child) => {
        lines.push(line);
        if (line === "step 200") child.kill("SIGTERM");
      }).done;
      assert.equal(code, 143, lines.slice(-3).join("\n"));
      const drained = /^drained (\d+) 143$/.exec(lines.at(-1) ?? "");
      assert.ok(drained && Number(drained[1]) >= 200, lines.slice(-3).join("\n"));
      const manager = await CheckpointManager.open(dir, { readOnly: true });
      assert.equal((await manager.latest())?.metadata.step, Number(drained[1]), "the step it stopped at is committed");
      await manager.close();
    });
  },
);
