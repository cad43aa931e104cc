/**
 * The Node test harness: runs `tests/node/*_test.mjs` under Node, with no Deno on `PATH`, against
 * the npm package (`deno task build:npm`) packed with `npm pack` and installed into a scratch npm
 * project, the way a user's project gets it.
 *
 * ```sh
 * deno task test:node                              # every Node test
 * deno task test:node tests/node/io_test.mjs       # one file
 * deno task test                                   # the Deno suite, then this one, one summary
 * ```
 *
 * Adding a Node test: write `tests/node/<area>_test.mjs`, a `node:test` file in plain JavaScript
 * (Node 20 runs no TypeScript) that imports the package by its public name (`@ckpt/ckpt`,
 * `@ckpt/ckpt/tfjs`, ...) and helpers from `./_util.mjs`. Nothing to register: every
 * `*_test.mjs` here is found. Every `.mjs` file of this directory is copied into the scratch
 * project's `tests/` before a run, so bare imports resolve from its `node_modules`: the package and
 * {@linkcode SCRATCH_DEPENDENCIES} (add a package there when a test needs one). Deno's own test
 * runner skips this directory (deno.json `test.exclude`). The tests see `CKPT_REPO` (this
 * repository), `CKPT_DENO_FIXTURES` (what Deno wrote from `_fixture.mjs`, for byte and error
 * comparisons: {@linkcode writeDenoFixtures}), `CKPT_TARBALL` (the packed package),
 * `CKPT_SCRATCH` (the scratch project: `npx ckpt` works there), the S3
 * variables of tests/_s3.ts, and `CI`. A test that needs a component skips without it, and fails
 * when `CI=true` (`componentTest` in `_util.mjs`).
 *
 * Caching (on the machine, `$CKPT_CACHE` or `~/.cache/ckpt`): the build is skipped when its
 * inputs did not change (npm/build.ts), the tarball is packed once per build, and the scratch
 * project is installed once per tarball and dependency set; a run only copies the test files.
 *
 * @module
 */
import type { ShardCheckpointInput } from "../../src/shard/write.ts";
import { createHash } from "node:crypto";
import { delimiter, join } from "node:path";
import { buildNpm, cacheDir, once, ROOT } from "../../npm/build.ts";
import type { CheckpointInput, CodecName, Compression } from "../../mod.ts";

/** The scratch project's dependencies beside the package, for the tests (exact versions). */
export const SCRATCH_DEPENDENCIES: Readonly<Record<string, string>> = Object.freeze({
  "@tensorflow/tfjs": "4.22.0",
  // types_test.mjs compiles a consumer of the package as a TypeScript user's project would.
  "typescript": "5.9.3",
  "@types/node": "20.19.25",
  // package_test.mjs lints the tarball as a publisher would.
  "publint": "0.3.25",
  "@arethetypeswrong/cli": "0.18.5",
});

/** The tests' directory in this repository. */
export const NODE_TESTS_DIR: string = join(ROOT, "tests", "node");

/** How a Node run went. */
export interface NodeRunResult {
  passed: number;
  failed: number;
  /** Whether node exited with 0. */
  success: boolean;
}

async function run(cmd: string, args: string[], cwd: string): Promise<void> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    const text = (b: Uint8Array) => new TextDecoder().decode(b);
    throw new Error(`${cmd} ${args.join(" ")} failed in ${cwd}:\n${text(out.stderr)}${text(out.stdout)}`);
  }
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/**
 * A `PATH` with no `deno` on it: every directory holding a `deno` is dropped; if node, npm or
 * npx lived only in one of those, a private directory of links to them comes first.
 */
export async function pathWithoutDeno(path: string = Deno.env.get("PATH") ?? ""): Promise<string> {
  const keep: string[] = [];
  const lost = new Map<string, string>();
  for (const dir of path.split(delimiter).filter(Boolean)) {
    if (await exists(join(dir, "deno"))) {
      for (const tool of ["node", "npm", "npx"]) {
        if (!lost.has(tool) && await exists(join(dir, tool))) lost.set(tool, join(dir, tool));
      }
    } else keep.push(dir);
  }
  const links: [string, string][] = [];
  for (const [tool, target] of lost) {
    let elsewhere = false;
    for (const dir of keep) elsewhere ||= await exists(join(dir, tool));
    if (!elsewhere) links.push([tool, await Deno.realPath(target)]);
  }
  if (links.length === 0) return keep.join(delimiter);
  const id = createHash("sha256").update(JSON.stringify(links)).digest("hex").slice(0, 12);
  const bin = join(cacheDir(), "node-bin", id);
  await Deno.mkdir(bin, { recursive: true });
  for (const [tool, target] of links) await Deno.symlink(target, join(bin, tool)).catch(() => {});
  return [bin, ...keep].join(delimiter);
}

/** Builds the package (when its inputs changed) and packs it once per build; returns the tarball. */
export async function packedTarball(): Promise<string> {
  const dist = join(ROOT, "dist", "npm");
  await buildNpm(dist);
  const key = (await Deno.readTextFile(`${dist}.key`)).slice(0, 16);
  const dir = await once(join(cacheDir(), "npm-pack", key), async (stage) => {
    await run("npm", ["pack", "--silent", "--pack-destination", stage], dist);
  });
  for await (const e of Deno.readDir(dir)) if (e.name.endsWith(".tgz")) return join(dir, e.name);
  throw new Error(`npm pack left no tarball in ${dir}`);
}

/** How many scratch projects (one per tarball) are kept; the least recently used go first. */
export const SCRATCH_KEEP = 6;

/**
 * The scratch npm project for a tarball; returns its directory. Two levels, so that a source
 * change costs one small install: {@linkcode SCRATCH_DEPENDENCIES} (TF.js: about 280 MB) are
 * installed once per dependency set in `node-scratch/<deps key>`, and the tarball in a project
 * below it, `node-scratch/<deps key>/p/<tarball hash>`, whose imports of TF.js find the copy above
 * through Node's resolution (it climbs the `node_modules` of each parent directory).
 */
export async function scratchProject(tarball: string): Promise<string> {
  const depsKey = createHash("sha256").update(JSON.stringify(SCRATCH_DEPENDENCIES)).digest("hex").slice(0, 16);
  const base = await once(join(cacheDir(), "node-scratch", depsKey), async (stage) => {
    await Deno.writeTextFile(join(stage, "package.json"), JSON.stringify({ private: true, type: "module" }));
    const specs = Object.entries(SCRATCH_DEPENDENCIES).map(([n, v]) => `${n}@${v}`);
    await run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", ...specs], stage);
  });
  const key = createHash("sha256").update(await Deno.readFile(tarball)).digest("hex").slice(0, 16);
  const project = await once(join(base, "p", key), async (stage) => {
    const pkg = { name: "ckpt-node-tests", private: true, type: "module" };
    await Deno.writeTextFile(join(stage, "package.json"), JSON.stringify(pkg, null, 2));
    await run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", tarball], stage);
  });
  const now = new Date();
  await Deno.utime(project, now, now);
  const kept: { path: string; mtime: number }[] = [];
  for await (const e of Deno.readDir(join(base, "p"))) {
    if (!e.isDirectory || e.name.startsWith(".")) continue;
    const path = join(base, "p", e.name);
    kept.push({ path, mtime: (await Deno.stat(path)).mtime?.getTime() ?? 0 });
  }
  kept.sort((a, b) => b.mtime - a.mtime);
  for (const old of kept.slice(SCRATCH_KEEP)) await Deno.remove(old.path, { recursive: true }).catch(() => {});
  return project;
}

/**
 * Writes what Deno makes of tests/node/_fixture.mjs into `dir`: `fixture.<codec>.<compression>.ckpt`
 * for each of its formats, and `errors.json`, the class and message of the error each of its
 * corruptions gets from `loadCheckpoint`, so the Node tests compare bytes and errors with Deno's.
 */
export async function writeDenoFixtures(dir: string): Promise<void> {
  const { fixtureCheckpoint, FIXTURE_FORMATS, CORRUPTIONS } = await import("./_fixture.mjs");
  const { loadCheckpoint, saveCheckpoint } = await import("../../mod.ts");
  await Deno.mkdir(dir, { recursive: true });
  for (const [codec, compression] of FIXTURE_FORMATS as [CodecName, Compression][]) {
    await saveCheckpoint(join(dir, `fixture.${codec}.${compression}.ckpt`), fixtureCheckpoint() as CheckpointInput, {
      codec,
      compression,
    });
  }
  const plain = await Deno.readFile(join(dir, "fixture.binary.none.ckpt"));
  const errors: Record<string, { name: string; message: string; class: string }> = {};
  for (const [what, corrupt] of Object.entries(CORRUPTIONS as Record<string, (b: Uint8Array) => Uint8Array>)) {
    try {
      await loadCheckpoint(new Blob([corrupt(plain) as Uint8Array<ArrayBuffer>]));
      errors[what] = { name: "", message: "loaded", class: "" };
    } catch (e) {
      const err = e as Error;
      errors[what] = { name: err.name, message: err.message, class: err.constructor.name };
    }
  }
  await Deno.writeTextFile(join(dir, "errors.json"), JSON.stringify(errors, null, 2));
  // Writer 0 of a sharded save of the fixture, written by Deno and not committed: shard_test.mjs
  // writes writer 1 under Node and commits, so one checkpoint holds a Deno part and a Node part.
  const { saveShard } = await import("../../src/shard/mod.ts");
  await saveShard(join(dir, "sharded.ckpt"), fixtureCheckpoint() as ShardCheckpointInput, {
    writer: 0,
    writers: 2,
    saveId: "mixed",
    splitBytes: 1024,
    commit: false,
  });
}

/** The `*_test.mjs` files of tests/node, sorted. */
export async function nodeTestFiles(): Promise<string[]> {
  const files: string[] = [];
  for await (const e of Deno.readDir(NODE_TESTS_DIR)) if (e.isFile && e.name.endsWith("_test.mjs")) files.push(e.name);
  return files.sort();
}

/** Node's TAP summary counts (`# pass N`, `# fail N`), or undefined when there are none. */
export function tapCounts(tap: string): { passed: number; failed: number } | undefined {
  const pass = [...tap.matchAll(/^# pass (\d+)$/gm)].at(-1);
  const fail = [...tap.matchAll(/^# fail (\d+)$/gm)].at(-1);
  if (!pass || !fail) return undefined;
  return { passed: Number(pass[1]), failed: Number(fail[1]) };
}

/**
 * Runs the Node tests (all, or the named files of tests/node) and returns the counts. Node's
 * spec reporter writes to this process's standard output as the tests run.
 */
export async function runNodeTests(only: readonly string[] = []): Promise<NodeRunResult> {
  const tarball = await packedTarball();
  const scratch = await scratchProject(tarball);
  const testsDir = join(scratch, "tests");
  await Deno.remove(testsDir, { recursive: true }).catch(() => {});
  await Deno.mkdir(testsDir);
  for await (const e of Deno.readDir(NODE_TESTS_DIR)) {
    if (e.isFile && e.name.endsWith(".mjs")) await Deno.copyFile(join(NODE_TESTS_DIR, e.name), join(testsDir, e.name));
  }
  const names = only.length > 0 ? only.map((f) => f.split("/").at(-1)!) : await nodeTestFiles();
  const fixtures = join(scratch, "deno-fixtures");
  await Deno.remove(fixtures, { recursive: true }).catch(() => {});
  await writeDenoFixtures(fixtures);
  const tapFile = join(scratch, "tap.txt");
  await Deno.remove(tapFile).catch(() => {});
  const env: Record<string, string> = {
    ...Deno.env.toObject(),
    PATH: await pathWithoutDeno(),
    CKPT_REPO: ROOT,
    CKPT_SCRATCH: scratch,
    CKPT_DENO_FIXTURES: fixtures,
    CKPT_TARBALL: tarball,
    NO_COLOR: "1",
  };
  for (const k of Object.keys(env)) if (k.startsWith("DENO_")) delete env[k];
  const node = await new Deno.Command("node", {
    args: [
      "--test",
      "--test-reporter=spec",
      "--test-reporter-destination=stdout",
      "--test-reporter=tap",
      `--test-reporter-destination=${tapFile}`,
      ...names.map((n) => join("tests", n)),
    ],
    cwd: scratch,
    env,
    clearEnv: true,
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  const counts = tapCounts(await Deno.readTextFile(tapFile).catch(() => ""));
  if (!counts) return { passed: 0, failed: 1, success: false };
  // A node that failed with every test passing (a crash between tests) still counts as a failure.
  const extra = !node.success && counts.failed === 0 ? 1 : 0;
  return { passed: counts.passed, failed: counts.failed + extra, success: node.success };
}

if (import.meta.main) {
  const r = await runNodeTests(Deno.args);
  console.log(`${r.passed} passed, ${r.failed} failed`);
  Deno.exit(r.success ? 0 : 1);
}
