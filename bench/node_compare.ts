/**
 * Node against Deno, side by side in one run, on the same bytes: the npm package (built, packed
 * and installed into a scratch project by tests/node/harness.ts) under Node 20, and the
 * repository's sources under Deno (with `-A`, so Deno's FFI fast paths are on, as a Deno user
 * runs them). Rows:
 *
 * - **save**: a durable `saveCheckpoint` of `--size` MiB of float32 tensors (16 MiB each);
 * - **load**: `loadCheckpoint` of that file, every tensor verified;
 * - **peak RSS**: a save of `--rss-size` MiB of tensors produced lazily (an async generator), the
 *   process's VmHWM;
 * - **CLI start-up**: `ckpt inspect` of a small file, process start included (Node:
 *   `node_modules/.bin/ckpt`, and `npx ckpt`; Deno: `deno run src/cli/main.ts`).
 *
 * Each operation runs in its own process; trials are interleaved (both runtimes once per trial,
 * in a random order); the table gives medians and the ratio Deno time / Node time (above 1:
 * Node faster) or Node RSS / Deno RSS.
 *
 *   deno task bench:node [--size 512] [--rss-size 1024] [--trials 5] [--cli-trials 10]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { packedTarball, pathWithoutDeno, scratchProject } from "../tests/node/harness.ts";
import { ROOT } from "../npm/build.ts";

const { values } = parseArgs({
  options: {
    size: { type: "string", default: "512" },
    "rss-size": { type: "string", default: "1024" },
    trials: { type: "string", default: "5" },
    "cli-trials": { type: "string", default: "10" },
  },
});
const size = Number(values.size);
const rssSize = Number(values["rss-size"]);
const trials = Number(values.trials);
const cliTrials = Number(values["cli-trials"]);

const scratch = await scratchProject(await packedTarball());
await Deno.copyFile(join(ROOT, "bench", "_runtime_one.mjs"), join(scratch, "_runtime_one.mjs"));
const nodeEnv = { PATH: await pathWithoutDeno() };
const dir = await Deno.makeTempDir({ prefix: "ckpt-bench-node-" });
const modUrl = new URL("../mod.ts", import.meta.url).href;

interface Sample {
  seconds: number;
  peakRss: number;
}

async function run(cmd: string, args: string[], cwd: string, env?: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, env, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")}:\n${new TextDecoder().decode(out.stderr)}${text}`);
  return text;
}

function one(runtime: "deno" | "node", op: string, path: string, mib: number): Promise<Sample> {
  const p = runtime === "deno"
    ? run(Deno.execPath(), ["run", "-A", join(ROOT, "bench", "_runtime_one.mjs"), modUrl, op, path, String(mib)], ROOT)
    : run("node", ["_runtime_one.mjs", "@ckpt/ckpt", op, path, String(mib)], scratch, nodeEnv);
  return p.then((text) => JSON.parse(text.trim().split("\n").at(-1)!));
}

async function wall(cmd: string, args: string[], cwd: string, env?: Record<string, string>): Promise<number> {
  const t0 = performance.now();
  await run(cmd, args, cwd, env);
  return (performance.now() - t0) / 1000;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function shuffled<T>(xs: T[]): T[] {
  return xs.map((x) => [Math.random(), x] as const).sort((a, b) => a[0] - b[0]).map(([, x]) => x);
}

const times: Record<string, Record<"deno" | "node", number[]>> = {};
const rss: Record<"deno" | "node", number[]> = { deno: [], node: [] };
const note = (row: string, rt: "deno" | "node", v: number) => ((times[row] ??= { deno: [], node: [] })[rt].push(v));

try {
  for (let t = 0; t < trials; t++) {
    for (const rt of shuffled(["deno", "node"] as const)) {
      const path = join(dir, `${rt}.ckpt`);
      note(`save ${size} MiB (durable)`, rt, (await one(rt, "save", path, size)).seconds);
      note(`load ${size} MiB (verified)`, rt, (await one(rt, "load", path, size)).seconds);
      await Deno.remove(path);
      const lazy = await one(rt, "lazy", join(dir, `${rt}-lazy.ckpt`), rssSize);
      rss[rt].push(lazy.peakRss);
      await Deno.remove(join(dir, `${rt}-lazy.ckpt`));
    }
  }
  // CLI start-up: a small file, the whole process timed.
  const small = join(dir, "small.ckpt");
  await one("deno", "save", small, 16);
  const cli: Record<string, number[]> = { deno: [], node: [], npx: [] };
  for (let t = 0; t < cliTrials; t++) {
    for (const which of shuffled(["deno", "node", "npx"])) {
      if (which === "deno") {
        cli.deno!.push(
          await wall(Deno.execPath(), ["run", "-A", join(ROOT, "src/cli/main.ts"), "inspect", small], ROOT),
        );
      } else if (which === "node") {
        cli.node!.push(
          await wall("node", [join(scratch, "node_modules/.bin/ckpt"), "inspect", small], scratch, nodeEnv),
        );
      } else {
        cli.npx!.push(await wall("npx", ["--no-install", "ckpt", "inspect", small], scratch, nodeEnv));
      }
    }
  }
  const MiB = 2 ** 20;
  console.log(`Node ${(await run("node", ["--version"], scratch, nodeEnv)).trim()} vs Deno ${Deno.version.deno}`);
  console.log(`medians of ${trials} trials (CLI: ${cliTrials}); each operation in its own process\n`);
  console.log("| row | Deno | Node | Deno time / Node time |");
  console.log("| --- | ---: | ---: | ---: |");
  for (const [row, v] of Object.entries(times)) {
    const d = median(v.deno);
    const n = median(v.node);
    console.log(`| ${row} | ${d.toFixed(3)} s | ${n.toFixed(3)} s | ${(d / n).toFixed(2)}× |`);
  }
  const d = median(cli.deno!);
  console.log(
    `| ckpt inspect (process start included), node bin | ${d.toFixed(3)} s | ${median(cli.node!).toFixed(3)} s | ${
      (d / median(cli.node!)).toFixed(2)
    }× |`,
  );
  console.log(
    `| ckpt inspect through npx ckpt | ${d.toFixed(3)} s | ${median(cli.npx!).toFixed(3)} s | ${
      (d / median(cli.npx!)).toFixed(2)
    }× |`,
  );
  const dr = median(rss.deno);
  const nr = median(rss.node);
  console.log(
    `\n| peak RSS, lazy save of ${rssSize} MiB | Deno ${(dr / MiB).toFixed(0)} MiB | Node ${
      (nr / MiB).toFixed(0)
    } MiB | Node / Deno ${(nr / dr).toFixed(2)}× |`,
  );
} finally {
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
