// `deno task train` as a user runs it: a real subprocess, killed with SIGKILL (twice) and with
// SIGINT mid-run, restarted, and compared with a run that was never interrupted.
import assert from "node:assert/strict";
import { finalLine, killAfterCommit, runDemo, stepOf } from "./_train_runner.ts";

const FLAGS = ["--steps", "300", "--every", "25"];

let reference: Promise<string> | undefined;
/** The final line of an uninterrupted run, computed once. */
function uninterrupted(): Promise<string> {
  reference ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "ckpt_train_ref_" });
    try {
      const run = await runDemo(["--dir", dir, ...FLAGS]);
      assert.equal(run.code, 0, run.lines.join("\n"));
      assert.ok(run.lines.includes(`training from step 0 into ${dir} (cpu, momentum)`), run.lines.join("\n"));
      return finalLine(run);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  })();
  return reference;
}

Deno.test("train killed with SIGKILL twice resumes from its last checkpoint and ends exactly as an uninterrupted run", async () => {
  const want = await uninterrupted();
  const dir = await Deno.makeTempDir({ prefix: "ckpt_train_kill_" });
  try {
    // First run: killed right after a checkpoint is committed and training went on.
    const first = await runDemo(["--dir", dir, ...FLAGS], killAfterCommit(() => 50, 25));
    assert.equal(first.signal, "SIGKILL", first.lines.join("\n"));
    assert.ok(!first.lines.some((l) => l.startsWith("final loss")), "killed before the end");

    // Second run: resumes, and is killed again a few steps later.
    let resumedAt: number | undefined;
    const kill = killAfterCommit(() => resumedAt === undefined ? undefined : resumedAt + 25, 25);
    const second = await runDemo(["--dir", dir, ...FLAGS], (line) => {
      resumedAt ??= stepOf(line, /^resumed from step (\d+) /);
      return kill(line);
    });
    assert.equal(second.signal, "SIGKILL", second.lines.join("\n"));
    assert.ok(resumedAt !== undefined && resumedAt >= 50 && resumedAt % 25 === 0, second.lines.join("\n"));

    // Third run: resumes past the second kill and finishes.
    const third = await runDemo(["--dir", dir, ...FLAGS]);
    assert.equal(third.code, 0, third.lines.join("\n"));
    const resumedAgain = stepOf(third.lines.find((l) => l.startsWith("resumed from"))!, /^resumed from step (\d+) /)!;
    assert.ok(resumedAgain > resumedAt!, third.lines.join("\n"));
    assert.equal(finalLine(third), want);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train stopped with SIGINT saves the current step, exits 130, and resumes to the same result", async () => {
  const want = await uninterrupted();
  const dir = await Deno.makeTempDir({ prefix: "ckpt_train_int_" });
  try {
    const first = await runDemo(["--dir", dir, ...FLAGS, "--delay", "5"], (line) => {
      const step = stepOf(line, /^step +(\d+)\//);
      return step !== undefined && step >= 50 ? "SIGINT" : undefined;
    });
    assert.equal(first.code, 130, first.lines.join("\n"));
    const stopped = stepOf(first.lines.find((l) => l.startsWith("stopped at step")) ?? "", /^stopped at step (\d+);/);
    assert.ok(stopped !== undefined && stopped >= 50 && stopped < 300, first.lines.join("\n"));
    const second = await runDemo(["--dir", dir, ...FLAGS]);
    assert.equal(second.code, 0, second.lines.join("\n"));
    assert.ok(second.lines.includes(`resumed from step ${stopped} (${dir})`), second.lines.join("\n"));
    assert.equal(finalLine(second), want);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train refuses to resume a directory trained with other settings, and bad flags, with clear messages", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt_train_flags_" });
  try {
    const done = await runDemo(["--dir", dir, "--steps", "5", "--every", "5", "--quiet"]);
    assert.equal(done.code, 0, done.lines.join("\n"));
    const other = await runDemo(["--dir", dir, "--steps", "10", "--hidden", "16"]);
    assert.equal(other.code, 1);
    assert.ok(other.lines.some((l) => /holds a run with different settings/.test(l)), other.lines.join("\n"));
    const bad = await runDemo(["--dir", dir, "--steps", "ten"]);
    assert.equal(bad.code, 2);
    assert.ok(bad.lines.some((l) => l === 'stderr: train: --steps must be an integer of at least 1, got "ten"'));
    const unknown = await runDemo(["--dir", dir, "--speed", "9"]);
    assert.equal(unknown.code, 2);
    assert.ok(unknown.lines.some((l) => /Unknown option '--speed'/.test(l)), unknown.lines.join("\n"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train with adam, killed and resumed, ends exactly as an uninterrupted run (Adam's beta powers replayed)", async () => {
  const flags = ["--steps", "120", "--every", "20", "--optimizer", "adam", "--lr", "0.005"];
  const refDir = await Deno.makeTempDir({ prefix: "ckpt_train_adam_ref_" });
  const dir = await Deno.makeTempDir({ prefix: "ckpt_train_adam_" });
  try {
    const reference = await runDemo(["--dir", refDir, ...flags]);
    assert.equal(reference.code, 0, reference.lines.join("\n"));
    const killed = await runDemo(["--dir", dir, ...flags], killAfterCommit(() => 40, 10));
    assert.equal(killed.signal, "SIGKILL", killed.lines.join("\n"));
    const resumed = await runDemo(["--dir", dir, ...flags]);
    assert.equal(resumed.code, 0, resumed.lines.join("\n"));
    assert.ok(resumed.lines.some((l) => /^resumed from step (40|60|80|100) /.test(l)), resumed.lines.join("\n"));
    assert.equal(finalLine(resumed), finalLine(reference));
  } finally {
    await Deno.remove(refDir, { recursive: true });
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train ends with the error, not 'done', when a background save fails", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt_train_fail_" });
  try {
    // A directory where step 10's file must go: its save fails at the rename; later ones would work.
    await Deno.mkdir(`${dir}/step-000000010.ckpt`);
    const run = await runDemo(["--dir", dir, "--steps", "40", "--every", "10"]);
    assert.equal(run.code, 1, run.lines.join("\n"));
    assert.ok(!run.lines.some((l) => l.startsWith("done at step") || l.startsWith("final loss")), run.lines.join("\n"));
    assert.ok(
      run.lines.some((l) => /^stderr: train: .*step 10/.test(l)),
      `the failed save is reported:\n${run.lines.join("\n")}`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train --fresh stopped with SIGINT says to run again without --fresh, and that resumes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt_train_fresh_" });
  try {
    const flags = ["--dir", dir, "--steps", "40", "--every", "10"];
    const first = await runDemo([...flags, "--fresh", "--delay", "5"], (line) => {
      const step = stepOf(line, /^step +(\d+)\//);
      return step !== undefined && step >= 10 ? "SIGINT" : undefined;
    });
    assert.equal(first.code, 130, first.lines.join("\n"));
    const line = first.lines.find((l) => l.startsWith("stopped at step")) ?? "";
    assert.match(line, /^stopped at step \d+; run the same command without --fresh again to resume$/);
    const stopped = stepOf(line, /^stopped at step (\d+);/)!;
    const second = await runDemo(flags);
    assert.equal(second.code, 0, second.lines.join("\n"));
    assert.ok(second.lines.includes(`resumed from step ${stopped} (${dir})`), second.lines.join("\n"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train resumes past damaged checkpoints, moves them aside, trains on, and after a kill ends exactly as an uninterrupted run", async () => {
  const want = await uninterrupted();
  const dir = await Deno.makeTempDir({ prefix: "ckpt_train_damaged_" });
  const file = (step: number) => `${dir}/step-${String(step).padStart(9, "0")}.ckpt`;
  try {
    // A run that stopped at step 200, keeping 150, 175 and 200; then 175 is truncated and one byte of 200 flipped.
    const early = await runDemo(["--dir", dir, "--steps", "200", "--every", "25", "--quiet"]);
    assert.equal(early.code, 0, early.lines.join("\n"));
    await Deno.truncate(file(175), (await Deno.stat(file(175))).size - 100);
    const bytes = await Deno.readFile(file(200));
    bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
    await Deno.writeFile(file(200), bytes);

    // Resumes from 150 with a warning naming each damaged step, saves 175 and 200 again, and is killed later on.
    const second = await runDemo(["--dir", dir, ...FLAGS], killAfterCommit(() => 225, 10));
    assert.equal(second.signal, "SIGKILL", second.lines.join("\n"));
    assert.ok(second.lines.includes(`resumed from step 150 (${dir})`), second.lines.join("\n"));
    for (const step of [200, 175]) {
      assert.ok(
        second.lines.some((l) => new RegExp(`^stderr: train: warning: .*step ${step}\\b.*moved aside`).test(l)),
        `a warning names step ${step}:\n${second.lines.join("\n")}`,
      );
      assert.ok((await Deno.stat(`${dir}/.step-${String(step).padStart(9, "0")}.ckpt.damaged`)).isFile);
    }
    assert.ok(second.lines.includes("  checkpoint step 175 committed (15.4 KiB)"), second.lines.join("\n"));

    // The next run resumes from the newest good checkpoint and ends as if nothing had happened.
    const third = await runDemo(["--dir", dir, ...FLAGS]);
    assert.equal(third.code, 0, third.lines.join("\n"));
    assert.ok(third.lines.some((l) => /^resumed from step (2[2-9]\d) /.test(l)), third.lines.join("\n"));
    assert.equal(finalLine(third), want);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
