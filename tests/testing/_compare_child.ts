// Child process of memory_test.ts: compares two checkpoint files with assertCheckpointEquals and
// prints its RSS before and its peak RSS (VmHWM) after, as JSON.
import { assertCheckpointEquals } from "../../src/testing/mod.ts";

function rss(field: "VmRSS" | "VmHWM"): number {
  const m = Deno.readTextFileSync("/proc/self/status").match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
  return Number(m![1]) * 1024;
}

const [a, b] = Deno.args as [string, string];
const baseRss = rss("VmRSS");
let failed = "";
try {
  await assertCheckpointEquals(a, b, { bufferBytes: 32 * 2 ** 20 });
} catch (e) {
  failed = (e as Error).message;
}
console.log(JSON.stringify({ baseRss, peakRss: rss("VmHWM"), failed }));
