// `deno task train --backend tensorflow`: the demo on tfjs-node's native backend, as a real
// subprocess killed with SIGKILL and restarted, against an uninterrupted run on the same backend.
import assert from "node:assert/strict";
import { finalLine, killAfterCommit, runCommand, runDemo, stepOf } from "./_train_runner.ts";
import { SKIP_NATIVE } from "../tfjs/_native.ts";

// --no-lock: a child that loads npm:@tensorflow/tfjs-node leaves the repository's lockfile alone.
const NO_LOCK = ["--no-lock"];

for (const optimizer of ["momentum", "adam"]) {
  const flags = ["--backend", "tensorflow", "--steps", "150", "--every", "25", "--optimizer", optimizer];
  if (optimizer === "adam") flags.push("--lr", "0.005");
  Deno.test({
    name:
      `train --backend tensorflow (${optimizer}) killed with SIGKILL resumes and ends exactly as an uninterrupted run`,
    ignore: SKIP_NATIVE,
    async fn() {
      const refDir = await Deno.makeTempDir({ prefix: "ckpt_train_native_ref_" });
      const dir = await Deno.makeTempDir({ prefix: "ckpt_train_native_" });
      try {
        const reference = await runDemo(["--dir", refDir, ...flags], undefined, NO_LOCK);
        assert.equal(reference.code, 0, reference.lines.join("\n"));
        assert.ok(
          reference.lines.includes(`training from step 0 into ${refDir} (tensorflow, ${optimizer})`),
          reference.lines.join("\n"),
        );
        const killed = await runDemo(["--dir", dir, ...flags], killAfterCommit(() => 50, 20), NO_LOCK);
        assert.equal(killed.signal, "SIGKILL", killed.lines.join("\n"));
        assert.ok(!killed.lines.some((l) => l.startsWith("final loss")), "killed before the end");
        const resumed = await runDemo(["--dir", dir, ...flags], undefined, NO_LOCK);
        assert.equal(resumed.code, 0, resumed.lines.join("\n"));
        const at = stepOf(resumed.lines.find((l) => l.startsWith("resumed from")) ?? "", /^resumed from step (\d+) /);
        assert.ok(at !== undefined && at >= 50 && at < 150, resumed.lines.join("\n"));
        assert.equal(finalLine(resumed), finalLine(reference));
      } finally {
        await Deno.remove(refDir, { recursive: true });
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}

Deno.test({
  name:
    "deno task train --backend tensorflow leaves deno.lock as it was, stops on SIGTERM with the step saved, and resumes exactly",
  ignore: SKIP_NATIVE,
  async fn() {
    const root = new URL("../../", import.meta.url).pathname;
    const flags = ["--backend", "tensorflow", "--steps", "150", "--every", "25"];
    const before = await Deno.readTextFile(`${root}deno.lock`);
    const refDir = await Deno.makeTempDir({ prefix: "ckpt_train_native_ref_" });
    const dir = await Deno.makeTempDir({ prefix: "ckpt_train_native_task_" });
    try {
      const reference = await runDemo(["--dir", refDir, ...flags], undefined, NO_LOCK);
      assert.equal(reference.code, 0, reference.lines.join("\n"));
      const task = ["task", "-q", "train", "--dir", dir, ...flags];
      // SIGTERM to `deno task`, which passes it on to the demo, which passes it on to its
      // unlocked run: that run saves the step it is at and exits 143, and so do the two above it.
      const stopped = await runCommand(Deno.execPath(), [...task, "--delay", "5"], (line) => {
        return (stepOf(line, /^step +(\d+)\//) ?? 0) >= 50 ? "SIGTERM" : undefined;
      }, { cwd: root });
      assert.equal(stopped.code, 143, stopped.lines.join("\n"));
      assert.ok(stopped.lines.some((l) => /^stopped at step \d+/.test(l)), stopped.lines.join("\n"));
      const resumed = await runCommand(Deno.execPath(), task, undefined, { cwd: root });
      assert.equal(resumed.code, 0, resumed.lines.join("\n"));
      assert.equal(finalLine(resumed), finalLine(reference));
      assert.equal(await Deno.readTextFile(`${root}deno.lock`), before, "deno.lock is as it was");
    } finally {
      await Deno.writeTextFile(`${root}deno.lock`, before); // as it was, should the test fail
      await Deno.remove(refDir, { recursive: true });
      await Deno.remove(dir, { recursive: true });
    }
  },
});
