// Crash test child: opens the directory and saves checkpoints in a loop until it is killed,
// printing each step once its save has committed.
import { CheckpointManager } from "../../src/manager/mod.ts";
import { crashCheckpoint, crashOptions } from "./_crash.ts";

const [dir, mode] = Deno.args as [string, "full" | "incremental"];
const manager = await CheckpointManager.open(dir, { ...crashOptions(mode), onWarning: () => {} });
const last = (await manager.list()).at(-1)?.step ?? 0;
const out = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(line + "\n"));
out(`ready ${last}`);
for (let step = last + 1;; step++) {
  await manager.save(crashCheckpoint(step));
  out(`committed ${step}`);
}
