import assert from "node:assert/strict";
import { crashRounds } from "./_crash.ts";

// At least 50 kills in every run (more with tests/manager/crash_soak.ts).
const KILLS = 50;

Deno.test(`a saving process killed with SIGKILL ${KILLS} times never loses a committed checkpoint`, async () => {
  const root = await Deno.makeTempDir({ prefix: "ckpt-crash-" });
  const seed = Number(Deno.env.get("CKPT_CRASH_SEED") ?? Date.now() % 2 ** 31);
  try {
    const dirs = await crashRounds(root, KILLS, seed).catch((e) => {
      throw new Error(`crash run failed (repeat with CKPT_CRASH_SEED=${seed}): ${e.message}`, { cause: e });
    });
    const kills = dirs.reduce((n, d) => n + d.kills, 0);
    const saves = dirs.reduce((n, d) => n + d.saves, 0);
    assert.equal(kills, KILLS);
    // The kills must land among saves, not only before the first one.
    assert.ok(saves >= KILLS, `only ${saves} saves were committed across ${kills} kills`);
    assert.ok(dirs.every((d) => d.takeovers === d.kills), "every kill leaves a stale lock to take over");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
