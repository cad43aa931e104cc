// Preemption with real signals to real processes: the step at the notice is saved, everything
// queued is drained, the lock released, and the process exits 143 / 130 within the grace period.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { Preemption } from "../../src/manager/preemption.ts";
import { withDir } from "./_helpers.ts";
import { linesOf, packageImportMap } from "../_util.ts";

const CHILD = fileURLToPath(new URL("./_preempt_child.ts", import.meta.url));

interface Run {
  code: number;
  lines: string[];
  ms: number;
}

/** Runs the child; `onLine` may return a signal to send (each time it returns one). */
async function run(
  args: string[],
  onLine: (line: string) => Deno.Signal | undefined,
  env: Record<string, string> = {},
) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--allow-write", "--allow-env", CHILD, ...args],
    stdout: "piped",
    env,
  }).spawn();
  const lines: string[] = [];
  let sentAt = 0;
  for await (const line of linesOf(child.stdout)) {
    lines.push(line);
    const signal = onLine(line);
    if (signal) {
      sentAt ||= performance.now();
      child.kill(signal);
    }
  }
  const { code } = await child.status;
  return { code, lines, ms: performance.now() - sentAt } satisfies Run;
}

const stepOf = (line: string, word: string) => Number(new RegExp(`^${word} (\\d+)$`).exec(line)?.[1] ?? NaN);

for (const [signal, status] of [["SIGTERM", 143], ["SIGINT", 130]] as const) {
  Deno.test(`Preemption on ${signal} saves the step the loop is at, drains, releases the lock and exits ${status}`, async () => {
    await withDir(async (dir) => {
      // 13, 27, 41: off the every-10 interval, so the saved step is the preemption's own.
      for (const at of [13, 27, 41]) {
        const { code, lines } = await run(["loop", dir], (l) => (stepOf(l, "step") === at ? signal : undefined));
        assert.equal(code, status, lines.join("\n"));
        const saved = lines.map((l) => stepOf(l, "saving")).find((n) => !Number.isNaN(n))!;
        assert.ok(saved >= at && saved <= at + 1, lines.join("\n")); // the step boundary after the signal
        assert.equal(lines.at(-1), `drained ${status}`);
        const names = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
        assert.ok(!names.includes("ckpt.lock"), names.join(" "));
        assert.ok(names.every((n) => !n.startsWith(".")), `no temporary file: ${names.join(" ")}`);
        const manager = await CheckpointManager.open(dir, { readOnly: true });
        assert.equal((await manager.latest())?.metadata.step, saved);
        await manager.close();
        // The next run resumes there.
        const next = await run(["loop", dir], (l) => (l.startsWith("resumed") ? "SIGKILL" : undefined));
        assert.equal(next.lines[0], `resumed ${saved}`);
      }
    });
  });
}

Deno.test("Preemption exits with the status when the drain outlasts the grace period", async () => {
  const { code, lines, ms } = await run(["stuck"], (l) => (l === "ready" ? "SIGTERM" : undefined), { GRACE: "300" });
  assert.equal(code, 143, lines.join("\n"));
  assert.match(lines.at(-1)!, /^log SIGTERM: the grace period of 300 ms ran out before the save was durable/);
  assert.ok(ms >= 300, `exited after ${ms} ms`);
});

Deno.test("Preemption: a second signal while draining exits at once, or is ignored with secondSignal: ignore", async () => {
  const first = await run(["stuck"], (l) => (l === "ready" || l === "stopping" ? "SIGTERM" : undefined));
  assert.equal(first.code, 143, first.lines.join("\n"));
  assert.match(first.lines.at(-1)!, /^log SIGTERM again: exiting now; the newest committed checkpoint is intact$/);
  const second = await run(
    ["stuck"],
    (l) => (l === "ready" || l === "stopping" ? "SIGINT" : undefined),
    { GRACE: "500", SECOND: "ignore" },
  );
  assert.equal(second.code, 130, second.lines.join("\n"));
  assert.match(second.lines.join("\n"), /log SIGINT again: still saving[^]*grace period of 500 ms ran out/);
});

Deno.test("Preemption exits 1 with the error when the drain fails", async () => {
  const { code, lines } = await run(["failing"], (l) => (l === "ready" ? "SIGTERM" : undefined));
  assert.equal(code, 1, lines.join("\n"));
  assert.equal(lines.at(-1), "log cannot save before exiting: disk full");
});

Deno.test("Preemption.reached answers false until a notice, then true, and keeps the first step", () => {
  using p = Preemption.listen({ signals: ["SIGUSR1"], watchParent: false });
  assert.equal(p.reached(5), false);
  assert.equal(p.step, undefined);
  p.notify("SIGUSR1");
  assert.equal(p.notice?.status, 138);
  assert.equal(p.reached(6), true);
  assert.equal(p.reached(7), true);
  assert.equal(p.step, 6);
  p.reset();
  assert.equal(p.reached(8), false);
});

Deno.test("Preemption.listen rejects bad options with the option's name", () => {
  assert.throws(() => Preemption.listen({ signals: ["SIGKILL" as "SIGTERM"] }), /signal "SIGKILL"/);
  assert.throws(() => Preemption.listen({ gracePeriod: -1 }), /Invalid option gracePeriod: -1/);
  assert.throws(
    () => Preemption.listen({ pollIntreval: 10 } as never),
    (e) => e instanceof TypeError && /unknown option "pollIntreval" \(known options: .*pollInterval/.test(e.message),
  );
  assert.throws(
    () => Preemption.listen({ pollInterval: NaN }),
    (e) => e instanceof RangeError && /pollInterval: NaN/.test(e.message),
  );
  assert.throws(() => Preemption.listen({ secondSignal: "twice" as "exit" }), /Invalid option secondSignal/);
  assert.throws(() => Preemption.listen({ watchParent: 1 as unknown as boolean }), /Invalid option watchParent/);
  assert.throws(() => Preemption.listen({ signals: "SIGTERM" as unknown as [] }), /Invalid option signals/);
});

Deno.test("Preemption.poll sees SIGTERM in a trainOnBatch loop that has no timer, saves that step and exits 143", async () => {
  await withDir(async (dir) => {
    // The Node suite's child, with "@ckpt/ckpt" mapped to this checkout.
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-lock",
        `--import-map=${await packageImportMap(dir)}`,
        "--allow-read",
        "--allow-write",
        "--allow-env",
        fileURLToPath(new URL("../node/_preempt_train_child.mjs", import.meta.url)),
        `${dir}/run`,
      ],
      stdout: "piped",
    }).spawn();
    const lines: string[] = [];
    for await (const line of linesOf(child.stdout)) {
      lines.push(line);
      if (line === "step 200") child.kill("SIGTERM");
    }
    const { code } = await child.status;
    assert.equal(code, 143, lines.slice(-3).join("\n"));
    const drained = /^drained (\d+) 143$/.exec(lines.at(-1) ?? "");
    assert.ok(drained && Number(drained[1]) >= 200, lines.slice(-3).join("\n"));
    const manager = await CheckpointManager.open(`${dir}/run`, { readOnly: true });
    assert.equal((await manager.latest())?.metadata.step, Number(drained[1]), "the step it stopped at is committed");
    await manager.close();
  });
});
