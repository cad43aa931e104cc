// The lifecycle every second thread shares (src/format/_worker_calls.ts): numbered calls each
// answered by their own reply, a failure or a close rejecting every call in flight and after,
// and an idle Worker ending itself so that an abandoned owner does not keep the process alive.
import assert from "node:assert/strict";
import { WorkerCalls } from "../../src/format/_worker_calls.ts";

const ECHO = new URL("./_echo_worker.ts", import.meta.url);

/** Calls to the echo Worker, resolved once it said it is up. */
async function echo(idleMs?: number, onFail?: (e: Error) => void) {
  let up!: () => void;
  const started = new Promise<void>((r) => (up = r));
  const calls = new WorkerCalls<{ seq: number; value: number }>(ECHO, {
    what: "the echo thread",
    idleMs,
    onOther: () => up(),
    onFail,
  });
  await started;
  return calls;
}

Deno.test("WorkerCalls: each call gets the reply with its own number, in flight together", async () => {
  const calls = await echo();
  try {
    const replies = await Promise.all([1, 2, 3].map((value) => calls.call({ value })));
    assert.deepEqual(replies.map((r) => r.value), [2, 4, 6]);
    assert.deepEqual(replies.map((r) => r.seq), [1, 2, 3]);
    assert.equal(calls.busy, false);
  } finally {
    calls.close();
  }
});

Deno.test("WorkerCalls: a Worker's error rejects the call in flight and every later one, naming the thread", async () => {
  const failures: Error[] = [];
  const calls = await echo(undefined, (e) => failures.push(e));
  const silent = calls.call({ silent: true });
  await assert.rejects(() => calls.call({ throw: true }), /^Error: the echo thread failed \(.*asked to fail\)$/);
  await assert.rejects(() => silent, /the echo thread failed/);
  await assert.rejects(() => calls.call({ value: 1 }), /the echo thread failed/);
  assert.equal(calls.failed, true);
  calls.close(); // after a failure: the first failure stays, onFail is not called again
  assert.equal(failures.length, 1);
});

Deno.test("WorkerCalls: close rejects the call in flight with `was closed`", async () => {
  const calls = await echo();
  const silent = calls.call({ silent: true });
  calls.close();
  await assert.rejects(() => silent, { message: "the echo thread was closed" });
  await assert.rejects(() => calls.call({ value: 1 }), { message: "the echo thread was closed" });
});

Deno.test("WorkerCalls: with idleMs it ends itself after that long without a call in flight, not during one", async () => {
  const calls = await echo(50);
  calls.idle();
  const slow = calls.call({ silent: true }); // in flight: the timer is off
  await new Promise((r) => setTimeout(r, 150));
  assert.equal(calls.failed, false);
  calls.close();
  await assert.rejects(() => slow);
  const idle = await echo(50);
  assert.equal((await idle.call({ value: 4 })).value, 8); // each reply arms the timer
  await new Promise((r) => setTimeout(r, 150));
  assert.equal(idle.failed, true);
  await assert.rejects(() => idle.call({ value: 1 }), { message: "the echo thread was closed" });
});

Deno.test("WorkerCalls: an owner abandoned with an idle Worker does not keep the process alive", async () => {
  const code = `
    import { WorkerCalls } from ${JSON.stringify(new URL("../../src/format/_worker_calls.ts", import.meta.url).href)};
    const calls = new WorkerCalls(new URL(${JSON.stringify(ECHO.href)}), { what: "echo", idleMs: 100 });
    const reply = await calls.call({ value: 21 });
    console.log(reply.value); // never closed
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--ext=ts", code],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(20_000), // kept alive: killed, and the test fails instead of hanging
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.equal(new TextDecoder().decode(out.stdout).trim(), "42");
});
