// `deno task train --backend tensorflow`: the demo on tfjs-node's native backend, as a real
// subprocess killed with SIGKILL and restarted, against an uninterrupted run on the same backend.
import assert from "node:assert/strict";
import { finalLine, killAfterCommit, runDemo, stepOf } from "./_train_runner.ts";
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
