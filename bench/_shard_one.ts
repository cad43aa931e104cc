// One writer or reader of bench/shard_compare.ts and bench/shard_dcp.ts, as a process: builds its
// replica (outside the timing), prints "ready", waits for a line on stdin, then saves its part
// (or reads its share, verified) and prints one JSON line (a ProcReport of bench/_shard_procs.ts)
// for that operation alone.
import process from "node:process";
import { readShardManifest, readShards, saveShard, shareOf } from "../src/shard/mod.ts";
import { replicaOf } from "./_shard_data.ts";
import { peakSince, resetPeak } from "./_rss.ts";

const a = JSON.parse(Deno.args[0]!);
const tensors = a.op === "save" ? replicaOf(a.mib) : [];
console.log("ready");
const reader = Deno.stdin.readable.getReader();
await reader.read();
const atStart = resetPeak();
const cpu0 = process.cpuUsage();
const t0 = performance.now();
if (a.op === "save") {
  await saveShard(a.address, { metadata: { step: 1 }, tensors }, {
    writer: a.index,
    writers: a.count,
    saveId: a.saveId,
    poll: 10,
  });
} else {
  const { manifest } = await readShardManifest(a.address);
  await readShards(a.address, shareOf(manifest, a.index, a.count));
}
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ ms, cpuMs: (cpu.user + cpu.system) / 1000, ...peakSince(atStart) }));
reader.releaseLock();
Deno.exit(0);
