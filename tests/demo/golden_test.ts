// The train demo as a regression test in the style of ckpt's `./testing` helpers: 60 steps from
// seed 7 on the cpu backend must give the committed golden checkpoint, weights and Adam state,
// within atol 1e-5 + rtol 1e-4 (tfjs's cpu kernels are plain JavaScript, so a run on any
// machine should match far closer than that; the tolerance leaves room for a different libm).
// Rewrite the golden file after an intended change with:
//   deno test -A tests/demo/golden_test.ts -- --update
import { fileURLToPath } from "node:url";
import { CheckpointManager } from "../../mod.ts";
import { assertCheckpointSnapshot } from "../../src/testing/mod.ts";
import { tempDir } from "../cli/_run.ts";

const SCRIPT = fileURLToPath(new URL("../../demo/train.ts", import.meta.url));

Deno.test("train demo: 60 steps of Adam from seed 7 on cpu match the golden checkpoint", async (t) => {
  await using dir = await tempDir();
  const run = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      SCRIPT,
      ...["--dir", dir.dir, "--steps", "60", "--every", "30", "--optimizer", "adam", "--lr", "0.005", "--quiet"],
      ...["--backend", "cpu", "--seed", "7"],
    ],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  if (!run.success) throw new Error(new TextDecoder().decode(run.stderr));
  const manager = await CheckpointManager.open(dir.dir);
  try {
    const latest = await manager.latest();
    if (!latest) throw new Error("the demo committed no checkpoint");
    await assertCheckpointSnapshot(t, latest, {
      atol: 1e-5,
      rtol: 1e-4,
      ignoreMetadata: ["createdAt"],
    });
  } finally {
    await manager.close();
  }
});
