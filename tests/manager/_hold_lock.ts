// Test child: opens a manager on the directory given, says so, and holds it until stdin closes.
import { CheckpointManager } from "../../src/manager/mod.ts";

const manager = await CheckpointManager.open(Deno.args[0]!, { onWarning: () => {} });
console.log(`locked ${Deno.pid}`);
for await (const _ of Deno.stdin.readable) { /* wait for EOF */ }
await manager.close();
