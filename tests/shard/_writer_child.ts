// One writer of a sharded save, as a separate process: `deno run -A _writer_child.ts JSON` where
// JSON is { address, writer, writers, saveId, seed, bigRows?, commit?, deadline? }. Prints
// `wrote <part bytes>` once its part and done record are written, then `committed <digest>` if
// it committed. A committer that loses a race prints `conflict`, one past its deadline `deadline
// <missing writers>`; anything else fails the process.
import { saveShard, ShardConflictError, ShardDeadlineError } from "../../src/shard/mod.ts";
import { replica, SPLIT } from "./_fixture.ts";

const a = JSON.parse(Deno.args[0]!);
const c = replica(a.seed, a.bigRows ?? 64);
try {
  const r = await saveShard(a.address, c, {
    writer: a.writer,
    writers: a.writers,
    saveId: a.saveId,
    splitBytes: SPLIT,
    commit: a.commit ?? a.writer === 0,
    deadline: a.deadline ?? 60_000,
    poll: 20,
  });
  console.log(`wrote ${r.part.bytes}`);
  if (r.digest) console.log(`committed ${r.digest}`);
} catch (e) {
  if (e instanceof ShardConflictError) console.log("conflict");
  else if (e instanceof ShardDeadlineError) console.log(`deadline ${e.missing.join(",")}`);
  else throw e;
}
