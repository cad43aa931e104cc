// One writer or reader of bench/shard_compare.ts, as a process: builds its replica (outside the
// timing), prints "ready", waits for a line on stdin, then saves its part (or reads its share)
// and prints one JSON line { ms, cpuMs } for that operation alone.
import process from "node:process";
import { readShardManifest, readShards, saveShard, shareOf } from "../src/shard/mod.ts";
import { replicaOf } from "./_shard_data.ts";

const a = JSON.parse(Deno.args[0]!);
const tensors = a.op === "save" ? replicaOf(a.mib) : [];
console.log("ready");
const reader = Deno.stdin.readable.getReader();
await reader.read();
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
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ ms: performance.now() - t0, cpuMs: (cpu.user + cpu.system) / 1000 }));
reader.releaseLock();
Deno.exit(0);
