// `deno task train --mirror ADDR`: the local directory lost (or its newest checkpoint damaged),
// the next run resumes from the mirror and ends bit for bit like a run never interrupted.
import assert from "node:assert/strict";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { s3Test } from "../_s3.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { runDemo } from "./_train_runner.ts";

const SCRIPT = fileURLToPath(new URL("../../demo/train.ts", import.meta.url));
const PERMISSIONS = ["--allow-read", "--allow-write", "--allow-env", "--allow-net=127.0.0.1"];
const FLAGS = ["--steps", "150", "--every", "25", "--keep", "1"];

async function train(args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...PERMISSIONS, SCRIPT, ...args],
    env: { NO_COLOR: "1", ...env },
  }).output();
  return { code, out: new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr) };
}

const finalLine = (out: string) =>
  out.split("\n").find((l) => l.startsWith("final loss")) ?? `no final line in:\n${out}`;

/** Trains to step 100, loses the local directory, and trains on to 150 from the mirror. */
async function resumeFromMirror(mirror: string, env: Record<string, string> = {}): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "ckpt_demo_mirror_" });
  try {
    const reference = await train(["--dir", `${root}/ref`, ...FLAGS, "--quiet"]);
    assert.equal(reference.code, 0, reference.out);
    const first = await train(["--dir", `${root}/local`, "--mirror", mirror, ...FLAGS, "--steps", "100"], env);
    assert.equal(first.code, 0, first.out);
    await Deno.remove(`${root}/local`, { recursive: true });
    const second = await train(["--dir", `${root}/local`, "--mirror", mirror, ...FLAGS], env);
    assert.equal(second.code, 0, second.out);
    assert.match(second.out, /resuming from step 100 on the mirror .*copying it back/);
    assert.match(second.out, /^resumed from step 100 /m);
    assert.equal(finalLine(second.out), finalLine(reference.out));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

Deno.test("train --mirror DIR: the local directory lost, the next run resumes from the mirror to the same weights", async () => {
  const mirror = await Deno.makeTempDir({ prefix: "ckpt_demo_mirror_dir_" });
  try {
    await resumeFromMirror(mirror);
  } finally {
    await Deno.remove(mirror, { recursive: true });
  }
});

Deno.test("train --mirror DIR stopped by SIGTERM during replication resumes bit for bit; the mirror holds only verified checkpoints", async () => {
  const root = await Deno.makeTempDir({ prefix: "ckpt_demo_mirror_term_" });
  try {
    const reference = await train(["--dir", `${root}/ref`, ...FLAGS, "--quiet"]);
    const args = ["--dir", `${root}/local`, "--mirror", `${root}/mirror`, ...FLAGS, "--every", "5", "--delay", "5"];
    // SIGTERM right after a commit: its replication is under way in the background.
    for (const after of [2, 5, 9]) {
      let commits = 0;
      const run = await runDemo(
        args,
        (line) => /^ {2}checkpoint step \d+ committed/.test(line) && ++commits === after ? "SIGTERM" : undefined,
      );
      assert.equal(run.code, 143, run.lines.join("\n"));
      assert.ok(!(await Array.fromAsync(Deno.readDir(`${root}/local`))).some((e) => e.name === "ckpt.lock"));
    }
    const mirror = await CheckpointManager.open(`${root}/mirror`, { readOnly: true });
    for (const e of await mirror.list()) await mirror.load(e.step); // each verifies
    await mirror.close();
    const last = await train(["--dir", `${root}/local`, "--mirror", `${root}/mirror`, ...FLAGS]);
    assert.equal(last.code, 0, last.out);
    assert.equal(finalLine(last.out), finalLine(reference.out));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

s3Test(
  "the README's two-tier command runs (deno task train --mirror s3://...): local directory lost, resumed from RGW",
  async (b) => {
    // The README's command, verbatim but for the bucket (a fresh one) and --dir and --steps added.
    const readme = await Deno.readTextFile(new URL("../../README.md", import.meta.url));
    const section = readme.slice(readme.indexOf("Two tiers"));
    const command = section.match(/`(deno task train --mirror s3:\/\/ckpt\/spirals)`/)?.[1];
    assert.ok(command, "the section names the command");
    const mirror = command.split(" ").at(-1)!.replace("s3://ckpt/", `s3://${b.name}/`);
    const { endpoint, region, credentials } = b.endpoint;
    const env = {
      AWS_ENDPOINT_URL: endpoint,
      AWS_REGION: region,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      PATH: `${dirname(Deno.execPath())}:${Deno.env.get("PATH")}`,
      NO_COLOR: "1",
    };
    const root = await Deno.makeTempDir({ prefix: "ckpt_readme_mirror_" });
    const task = async (args: string[]) => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["task", "train", "--mirror", mirror, "--dir", `${root}/local`, ...args],
        cwd: fileURLToPath(new URL("../../", import.meta.url)),
        env,
      }).output();
      return { code: out.code, out: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr) };
    };
    try {
      const reference = await train(["--dir", `${root}/ref`, ...FLAGS, "--quiet"]);
      const first = await task([...FLAGS, "--steps", "100"]);
      assert.equal(first.code, 0, first.out);
      await Deno.remove(`${root}/local`, { recursive: true });
      const second = await task(FLAGS);
      assert.equal(second.code, 0, second.out);
      assert.match(second.out, /^resumed from step 100 /m);
      assert.equal(finalLine(second.out), finalLine(reference.out));
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
);
