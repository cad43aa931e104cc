// The long SIGKILL run: `deno run -A tests/manager/crash_soak.ts --kills 1000 [--seed N]`.
// Same checks as crash_test.ts after every kill; prints progress and totals.
import { parseArgs } from "node:util";
import { crashRounds } from "./_crash.ts";

const { values } = parseArgs({ options: { kills: { type: "string", default: "500" }, seed: { type: "string" } } });
const kills = Number(values.kills);
if (!Number.isSafeInteger(kills) || kills < 1) {
  throw new TypeError(`Invalid --kills ${values.kills}: expected a positive integer`);
}
const seed = values.seed === undefined ? Date.now() % 2 ** 31 : Number(values.seed);
const root = await Deno.makeTempDir({ prefix: "ckpt-crash-soak-" });
console.log(`seed ${seed}, ${kills} kills, in ${root}`);
const started = performance.now();
try {
  const dirs = await crashRounds(root, kills, seed, (done, dirs) => {
    if (done % 25 === 0 || done === kills) {
      const saves = dirs.reduce((n, d) => n + d.saves, 0);
      console.log(
        `${done}/${kills} kills, ${saves} saves committed, ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
    }
  });
  for (const d of dirs) {
    console.log(
      `${d.mode}: ${d.kills} kills, ${d.saves} saves, ${d.cleanups} opens cleaned leftovers, newest step ${
        Math.max(0, ...d.committed)
      }`,
    );
  }
  console.log("all checks passed");
} catch (e) {
  console.error(`FAILED (repeat with --seed ${seed}):`, e);
  Deno.exitCode = 1;
} finally {
  await Deno.remove(root, { recursive: true });
}
