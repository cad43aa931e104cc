// `deno task train --workers N`: data-parallel worker processes checkpointing sharded. Any one
// worker (the committer included) or the coordinator is killed with a real SIGKILL mid-run; the
// run started again, with the same or another number of workers, ends exactly as an
// uninterrupted one, which itself is the same with 1 or 2 workers. The README's commands run.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { finalLine, runCommand, runDemo, stepOf } from "./_train_runner.ts";
import { s3Test } from "../_s3.ts";

const FLAGS = ["--steps", "120", "--every", "20"];

let reference: Promise<string> | undefined;
/** The final line of an uninterrupted 2-worker run, computed once. */
function uninterrupted(): Promise<string> {
  reference ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "ckpt_workers_ref_" });
    try {
      const run = await runDemo(["--workers", "2", "--dir", dir, ...FLAGS]);
      assert.equal(run.code, 0, run.lines.join("\n"));
      assert.ok(
        run.lines.includes(`training from step 0 into ${dir} (2 workers, data-parallel)`),
        run.lines.join("\n"),
      );
      return finalLine(run);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  })();
  return reference;
}

/**
 * A `stopWhen` that kills `victim` (a worker's index, or "coordinator") with SIGKILL once a
 * checkpoint of at least step 40 is committed and training went 10 steps past it.
 */
function killWhenCommitted(victim: number | "coordinator") {
  const pids = new Map<number, number>();
  let committed = -1;
  let sent = false;
  return (line: string): Deno.Signal | undefined => {
    const m = /^worker (\d+) pid (\d+)$/.exec(line);
    if (m) pids.set(Number(m[1]), Number(m[2]));
    committed = Math.max(committed, stepOf(line, /^ {2}checkpoint step (\d+) committed/) ?? -1);
    const step = stepOf(line, /^step +(\d+)\//) ?? -1;
    if (sent || committed < 40 || step < committed + 10) return undefined;
    sent = true;
    if (victim === "coordinator") return "SIGKILL";
    Deno.kill(pids.get(victim)!, "SIGKILL");
    return undefined;
  };
}

/** Whether a process is still there (`kill -0`). */
function alive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch {
    return false;
  }
}

for (const [victim, again] of [[1, 2], [0, 3], ["coordinator", 1]] as const) {
  const who = victim === "coordinator"
    ? "the coordinator"
    : `worker ${victim}${victim === 0 ? " (the committer)" : ""}`;
  Deno.test(`train --workers 2: ${who} killed with SIGKILL, resumed on ${again} worker(s), ends as an uninterrupted run`, async () => {
    const want = await uninterrupted();
    const dir = await Deno.makeTempDir({ prefix: "ckpt_workers_kill_" });
    try {
      const first = await runDemo(
        ["--workers", "2", "--dir", dir, ...FLAGS, "--delay", "20"],
        killWhenCommitted(victim),
      );
      assert.ok(
        !first.lines.some((l) => l.startsWith("final loss")),
        `killed before the end:\n${first.lines.join("\n")}`,
      );
      if (victim === "coordinator") assert.equal(first.signal, "SIGKILL");
      else {
        assert.equal(first.code, 1, first.lines.join("\n"));
        assert.ok(
          first.lines.some((l) => l.includes(`worker ${victim} (pid`) && l.includes("killed by SIGKILL")),
          first.lines.join("\n"),
        );
      }
      // No worker outlives the run: the coordinator kills them, or they see its pipe close.
      const pids = first.lines.flatMap((l) => /^worker \d+ pid (\d+)$/.exec(l)?.[1] ?? []).map(Number);
      for (let i = 0; i < 100 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(pids.filter(alive), [], "every worker has exited");

      // What the kill left: the newest committed checkpoint loads, nothing partial is listed.
      const view = await CheckpointManager.open(dir, { readOnly: true });
      const listed = await view.list();
      assert.ok(listed.length > 0 && listed.every((e) => e.kind === "sharded" && e.status === "ok"));
      const newest = listed.at(-1)!.step;
      assert.equal((await view.latest())!.metadata.step, newest);
      await view.close();

      const second = await runDemo(["--workers", String(again), "--dir", dir, ...FLAGS]);
      assert.equal(second.code, 0, second.lines.join("\n"));
      const resumed = second.lines.find((l) => l.startsWith("resumed from step "));
      assert.equal(resumed, `resumed from step ${newest} (${dir}, ${again} workers)`);
      assert.equal(finalLine(second), want);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("train --workers 1 gives the same weights as --workers 2", async () => {
  const want = await uninterrupted();
  const dir = await Deno.makeTempDir({ prefix: "ckpt_workers_one_" });
  try {
    const run = await runDemo(["--workers", "1", "--dir", dir, ...FLAGS, "--quiet"]);
    assert.equal(run.code, 0, run.lines.join("\n"));
    assert.equal(finalLine(run), want);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("train --workers refuses a worker count past the chunks and a batch they do not divide", async () => {
  for (
    const [args, message] of [
      [["--workers", "5"], /--workers must be an integer from 1 to 4/],
      [["--workers", "2", "--batch", "30"], /--batch must be a multiple of 4/],
    ] as const
  ) {
    const run = await runDemo([...args]);
    assert.equal(run.code, 2);
    assert.match(run.lines.join("\n"), message);
  }
});

Deno.test("the README's worker command runs verbatim (deno task train --workers 2 ...), killed, rerun with --workers 3", async () => {
  const readme = await Deno.readTextFile(new URL("../../README.md", import.meta.url));
  const section = readme.slice(readme.indexOf("## Sharded checkpoints"));
  const command = section.match(/`(deno task train --workers 2 --dir runs\/workers)`/)?.[1];
  assert.ok(command, "the section names the command");
  const want = await uninterrupted();
  const root = await Deno.makeTempDir({ prefix: "ckpt_readme_workers_" });
  const repo = fileURLToPath(new URL("../../", import.meta.url));
  // Verbatim, then a second --dir (the last one counts) so the run writes into a fresh directory.
  const task = (extra: string[], stopWhen?: (line: string) => Deno.Signal | undefined) =>
    runCommand(
      Deno.execPath(),
      [...command.split(" ").slice(1), "--dir", `${root}/workers`, ...FLAGS, "--delay", "20", ...extra],
      stopWhen,
      { cwd: repo },
    );
  try {
    const first = await task([], killWhenCommitted(1));
    assert.equal(first.code, 1, first.lines.join("\n"));
    const second = await task(["--workers", "3"]); // "rerun with any --workers"
    assert.equal(second.code, 0, second.lines.join("\n"));
    assert.ok(
      second.lines.some((l) => l.startsWith(`resumed from step `) && l.endsWith(`(${root}/workers, 3 workers)`)),
      second.lines.join("\n"),
    );
    assert.equal(finalLine(second), want);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

s3Test(
  "train --workers 2 --dir s3://...: worker 1 killed with SIGKILL, resumed on 3 workers from RGW, same result",
  async (b) => {
    const want = await uninterrupted();
    const dir = `s3://${b.name}/workers`;
    const { endpoint, region, credentials } = b.endpoint;
    const env = {
      AWS_ENDPOINT_URL: endpoint,
      AWS_REGION: region,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    };
    for (const [k, v] of Object.entries(env)) Deno.env.set(k, v); // inherited by the demo and its workers
    const first = await runDemo(["--workers", "2", "--dir", dir, ...FLAGS, "--delay", "20"], killWhenCommitted(1));
    assert.equal(first.code, 1, first.lines.join("\n"));
    const second = await runDemo(["--workers", "3", "--dir", dir, ...FLAGS]);
    assert.equal(second.code, 0, second.lines.join("\n"));
    assert.ok(second.lines.some((l) => l.startsWith("resumed from step ") && l.endsWith(`(${dir}, 3 workers)`)));
    assert.equal(finalLine(second), want);
  },
);
