// The package's declarations, as a TypeScript user's project sees them: a consumer compiled with
// `tsc --strict --module nodenext` gets the real types of loadCheckpoint, CheckpointManager,
// restore, snapshot, CheckpointWriter and Checkpoint (the `@ts-expect-error` lines fail to compile
// if any of them were `any`), and the package's own .d.ts files compile without skipLibCheck, under
// TypeScript 5 and 7, targets es2022 and esnext, with no @types/node (harness.ts's TYPES_DEPENDENCIES).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { runChild, SCRATCH } from "./_util.mjs";

const CONSUMER = `
import { type Checkpoint, CheckpointManager, loadCheckpoint, saveCheckpoint, type SaveResult } from "@ckpt/ckpt";
import { CheckpointWriter, restore, snapshot } from "@ckpt/ckpt/tfjs";
import { assertCheckpointEquals } from "@ckpt/ckpt/testing";
import { main } from "@ckpt/ckpt/cli";
import { readSafetensorsHeader } from "@ckpt/ckpt/interop";
import * as tf from "@tensorflow/tfjs";

export async function use(model: tf.LayersModel, optimizer: tf.Optimizer): Promise<number> {
  const c: Checkpoint = await loadCheckpoint("a.ckpt");
  const n: number = c.tensors.length;
  const step: number | undefined = c.metadata.step;
  // @ts-expect-error a tensor's name is a string
  const wrong: number = c.tensors[0]!.name;
  const saved: SaveResult = await saveCheckpoint("b.ckpt", c);
  const digest: string = saved.digest;
  // @ts-expect-error loadCheckpoint takes no number
  await loadCheckpoint(42);
  const manager = await CheckpointManager.open("runs/x", { maxToKeep: 3 });
  // @ts-expect-error maxToKeep is a number
  await CheckpointManager.open("runs/y", { maxToKeep: "3" });
  const writer = new CheckpointWriter();
  const done: Promise<unknown> = writer.save(manager, { model, optimizer, step: 1 });
  // @ts-expect-error save needs the model
  writer.save(manager, { step: 1 });
  const snap: Checkpoint = await snapshot({ model, optimizer, step: 1 });
  const report = await restore(snap, { model, optimizer });
  const missing: string[] = report.missing;
  // @ts-expect-error restore needs a checkpoint first
  await restore({ model }, snap);
  await assertCheckpointEquals(snap, c, { atol: 1e-6 });
  const code: number = await main(["--version"]);
  void [n, step, wrong, digest, done, missing, code, readSafetensorsHeader];
  await writer.close();
  return n;
}
`;

function tsc(dir, args, bin = createRequire(join(SCRATCH, "package.json")).resolve("typescript/bin/tsc")) {
  return runChild(process.execPath, [bin, ...args], { cwd: dir });
}

const OPTIONS = [
  "--strict",
  "--module",
  "nodenext",
  "--moduleResolution",
  "nodenext",
  "--target",
  "es2022",
  "--noEmit",
];

test(
  "a consumer compiled with tsc --strict --module nodenext sees the package's real types",
  { timeout: 120_000 },
  async () => {
    const dir = await mkdtemp(join(SCRATCH, "types-"));
    try {
      await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module" }));
      await writeFile(join(dir, "consumer.ts"), CONSUMER);
      // TF.js's own declarations fail under --strict (Long, its Keras types): skipLibCheck for them.
      const lib = await tsc(dir, [...OPTIONS, "--skipLibCheck", "--types", "node", "consumer.ts"]);
      assert.equal(lib.code, 0, lib.out);
      // Without skipLibCheck, no error may come from ckpt's declarations.
      const strict = await tsc(dir, [...OPTIONS, "--types", "node", "consumer.ts"]);
      const ours = strict.out.split("\n").filter((l) => l.includes("@ckpt/ckpt"));
      assert.deepEqual(ours, [], "errors in the package's .d.ts files");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
);

// A consumer of every entry, with `using` and `await using` on the package's disposable classes.
const DISPOSING_CONSUMER = `
import { CheckpointManager, loadCheckpoint, MirroredManager, Preemption } from "@ckpt/ckpt";
import { CheckpointWriter, restore } from "@ckpt/ckpt/tfjs";
import { assertCheckpointEquals } from "@ckpt/ckpt/testing";
import { main } from "@ckpt/ckpt/cli";
import { readSafetensorsHeader } from "@ckpt/ckpt/interop";
import { OpfsStore } from "@ckpt/ckpt/opfs";

export async function use(): Promise<void> {
  await using writer = new CheckpointWriter();
  await using manager = await CheckpointManager.open("runs/x");
  using preemption = Preemption.listen();
  // @ts-expect-error loadCheckpoint takes no number
  await loadCheckpoint(42);
  void [writer, manager, preemption, MirroredManager, restore, assertCheckpointEquals, main, readSafetensorsHeader, OpfsStore];
}
`;

/** TypeScript 5 and 7 (the native compiler), as a user's project runs them. */
const COMPILERS = [["typescript", /^Version 5\.9\.3$/m], ["typescript7", /^Version 7\.0\.2$/m]];

const TYPES_PROJECT = process.env.CKPT_TYPES_PROJECT ?? "";

for (const [compiler, version] of COMPILERS) {
  // undefined: the compiler's default target (TypeScript 7's lib has no esnext.disposable either).
  for (const target of [undefined, "es2022", "esnext"]) {
    test(
      `the package's declarations compile under ${compiler} with ${
        target ? `--target ${target}` : "its default target"
      }, without @types/node or skipLibCheck`,
      { timeout: 120_000 },
      async () => {
        assert.ok(TYPES_PROJECT, "CKPT_TYPES_PROJECT is set by the harness when this file runs");
        for (let dir = TYPES_PROJECT; dir !== dirname(dir); dir = dirname(dir)) {
          assert.ok(!existsSync(join(dir, "node_modules/@types/node")), `@types/node is reachable from ${dir}`);
        }
        const manifest = createRequire(join(TYPES_PROJECT, "package.json")).resolve(`${compiler}/package.json`);
        const bin = join(dirname(manifest), JSON.parse(await readFile(manifest, "utf8")).bin.tsc);
        const dir = await mkdtemp(join(TYPES_PROJECT, "types-"));
        try {
          assert.match((await tsc(dir, ["--version"], bin)).out, version);
          await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module" }));
          await writeFile(join(dir, "consumer.ts"), DISPOSING_CONSUMER);
          const args = ["--strict", "--module", "nodenext", "--moduleResolution", "nodenext"];
          if (target) args.push("--target", target);
          const r = await tsc(dir, [...args, "--noEmit", "consumer.ts"], bin);
          // TF.js's own declarations fail under --strict: only the consumer's and ckpt's lines count.
          const ours = r.out.split("\n").filter((l) => /^consumer\.ts|@ckpt\/ckpt/.test(l));
          assert.deepEqual(ours, [], r.out.slice(0, 4000));
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      },
    );
  }
}
