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
 * `CKPT_SCRATCH` (the scratch project: `npx ckpt` works there), `CKPT_TYPES_PROJECT` (the package
 * beside {@linkcode TYPES_DEPENDENCIES}, when types_test.mjs runs), the S3
 * variables of tests/_s3.ts, and `CI`. A test that needs a component skips without it, and fails
 * in CI (any truthy `CI`: `componentTest` in `_util.mjs`).
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
import type { SuiteCounts } from "../run_all.ts";

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

/**
 * The dependencies of the project types_test.mjs compiles consumers in: the TypeScript versions a
 * user may have (npm's `typescript` 5 and 7, the latter under an alias) and TF.js's typed parts,
 * the package's optional peers. No `@types/node`: the package's declarations must compile without it.
 */
export const TYPES_DEPENDENCIES: Readonly<Record<string, string>> = Object.freeze({
  "typescript": "5.9.3",
  "typescript7": "npm:typescript@7.0.2",
  "@tensorflow/tfjs-core": "4.22.0",
  "@tensorflow/tfjs-layers": "4.22.0",
});

/** The tests' directory in this repository. */
export const NODE_TESTS_DIR: string = join(ROOT, "tests", "node");

/** How a Node run went. */
export interface NodeRunResult extends SuiteCounts {
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
 * through Node's resolution (it climbs the `node_modules` of each parent directory). Another set of
 * `dependencies` gets its own tree under `kind` (`node-types` for {@linkcode TYPES_DEPENDENCIES}).
 */
export async function scratchProject(
  tarball: string,
  dependencies: Readonly<Record<string, string>> = SCRATCH_DEPENDENCIES,
  kind = "node-scratch",
): Promise<string> {
  const depsKey = createHash("sha256").update(JSON.stringify(dependencies)).digest("hex").slice(0, 16);
  const base = await once(join(cacheDir(), kind, depsKey), async (stage) => {
    await Deno.writeTextFile(join(stage, "package.json"), JSON.stringify({ private: true, type: "module" }));
    const specs = Object.entries(dependencies).map(([n, v]) => `${n}@${v}`);
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
  // Writer 1 of a sharded manager save (saveManagedShard), for manager_shard_test.mjs: Node's
  // manager opens its directory, the part is copied in, and the manager writes part 0 and commits.
  const { saveManagedShard } = await import("../../src/manager/mod.ts");
  await Deno.mkdir(join(dir, "managed"), { recursive: true });
  await saveManagedShard(join(dir, "managed"), fixtureCheckpoint() as CheckpointInput, {
    writer: 1,
    writers: 2,
    saveId: "managed-mixed",
    splitBytes: 1024,
  });
}

/** The `*_test.mjs` files of tests/node, sorted. */
export async function nodeTestFiles(): Promise<string[]> {
  const files: string[] = [];
  for await (const e of Deno.readDir(NODE_TESTS_DIR)) if (e.isFile && e.name.endsWith("_test.mjs")) files.push(e.name);
  return files.sort();
}

/**
 * Node's counts from its TAP report: the summary (`# pass N`, `# fail N`, `# cancelled N`,
 * `# skipped N`, `# todo N`) and the names on its `# SKIP` and `# TODO` lines (a subtest's:
 * `test > subtest`); undefined without a summary. A cancelled test (a timeout, or a parent that
 * ended first) did not pass: it counts as failed; skipped and todo tests count as skipped.
 */
export function tapCounts(tap: string): SuiteCounts | undefined {
  const count = (what: string) => Number([...tap.matchAll(new RegExp(`^# ${what} (\\d+)$`, "gm"))].at(-1)?.[1] ?? NaN);
  const [pass, fail, cancelled, skipped, todo] = ["pass", "fail", "cancelled", "skipped", "todo"].map(count);
  if (Number.isNaN(pass) || Number.isNaN(fail)) return undefined;
  const or0 = (n: number | undefined) => Number.isNaN(n) ? 0 : n!;
  return {
    passed: pass!,
    failed: fail! + or0(cancelled),
    skipped: or0(skipped) + or0(todo),
    skippedNames: tapSkippedNames(tap),
  };
}

/** The names of the tests a TAP report marks `# SKIP` or `# TODO` (subtests: `test > subtest`). */
function tapSkippedNames(tap: string): string[] {
  const unescape = (name: string) => name.replace(/\\(.)/g, "$1");
  const names: string[] = [];
  const open: string[] = []; // the test, then its subtests, of the line being read
  for (const line of tap.split("\n")) {
    const subtest = /^((?: {4})*)# Subtest: (.*)$/.exec(line);
    if (subtest) {
      open.length = subtest[1]!.length / 4;
      open.push(unescape(subtest[2]!));
      continue;
    }
    const result = /^((?: {4})*)(?:not )?ok \d+ - (.*?) # (?:SKIP|TODO)\b/.exec(line);
    if (!result) continue;
    const depth = result[1]!.length / 4;
    names.push([...open.slice(0, depth), unescape(result[2]!)].join(" > "));
  }
  return names;
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
  const typesProject = names.includes("types_test.mjs")
    ? await scratchProject(tarball, TYPES_DEPENDENCIES, "node-types")
    : "";
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
    CKPT_TYPES_PROJECT: typesProject,
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
  if (!counts) return { passed: 0, failed: 1, skipped: 0, skippedNames: [], success: false };
  // A node that failed with every test passing (a crash between tests) still counts as a failure.
  const extra = !node.success && counts.failed === 0 ? 1 : 0;
  return { ...counts, failed: counts.failed + extra, success: node.success };
}

if (import.meta.main) {
  const r = await runNodeTests(Deno.args);
  console.log(`${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped`);
  Deno.exit(r.success ? 0 : 1);
}
