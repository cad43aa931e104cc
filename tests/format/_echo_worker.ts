// A Worker for tests/format/worker_calls_test.ts: says it is up, answers each call with its
// number and the doubled value, and throws (an uncaught error in the Worker) when asked to.
const scope = self as unknown as Worker;
scope.onmessage = (e: MessageEvent<{ seq: number; value?: number; throw?: boolean; silent?: boolean }>) => {
  const m = e.data;
  if (m.throw) throw new Error("asked to fail");
  if (m.silent) return; // never answered: the call stays in flight
  scope.postMessage({ seq: m.seq, value: 2 * m.value! });
};
scope.postMessage({ up: true });
