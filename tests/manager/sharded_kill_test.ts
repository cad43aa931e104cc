// A sharded manager save killed with a real SIGKILL at every request that changes the store: the
// committer, the other writer, or both, stopped dead before their Nth put, upload or delete (the
// manager's open, its part, the done records, the manifest, the index, retention), locally and on
// the Ceph RGW. After each: the newest committed checkpoint loads bit for bit and latest() returns
// it (never a partial one), the next save succeeds, and once it is committed nothing outside what
// the committed manifests name is left under a parts directory after a manager opened it.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import type { TensorInput } from "../../src/format/types.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { readShardManifest } from "../../src/shard/read.ts";
import { shardKeys } from "../../src/shard/leftovers.ts";
import type { ObjectStore } from "../../src/storage/types.ts";
import { linesOf } from "../_util.ts";
import { s3Test } from "../_s3.ts";
import { exact as exactInOrder, makeCheckpoint, withDir } from "./_helpers.ts";
import { storeOf, type Target, TRAINED } from "./_sharded_kill.ts";

const CHILD = fileURLToPath(new URL("./_sharded_kill_child.ts", import.meta.url));
const byName = (tensors: readonly TensorInput[]) =>
  exactInOrder([...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)));

type Role = "committer" | "writer";

interface Ran {
  started: boolean;
  keys: string[];
  killed: boolean;
  code: number | undefined;
  stderr: string;
}

/** Runs one child to its end, killing it when it says it stopped (`at N`); `onLine` sees each line. */
async function child(role: Role, target: Target, stopAt: number, onLine: (line: string) => void): Promise<Ran> {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CHILD, role, JSON.stringify(target), String(stopAt)],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(proc.stderr).text();
  const keys: string[] = [];
  let killed = false;
  for await (const line of linesOf(proc.stdout)) {
    const req = /^req \d+ (.*)$/.exec(line);
    if (req) keys.push(req[1]!);
    if (line.startsWith("at ")) {
      proc.kill("SIGKILL");
      killed = true;
    }
    onLine(line);
  }
  return { started: true, keys, killed, code: (await proc.status).code, stderr: await stderr };
}

/**
 * Runs both writers of step 2 (`stopAt` per role, 0: never): the committer first, the other
 * writer once the committer's manager is open, as the protocol has it (docs/sharding.md).
 */
async function run(target: Target, stopAt: Record<Role, number>): Promise<Record<Role, Ran>> {
  let writer: Promise<Ran> | undefined;
  const committer = await child("committer", target, stopAt.committer, (line) => {
    if (line === "opened") writer ??= child("writer", target, stopAt.writer, () => {});
  });
  return {
    committer,
    writer: await (writer ?? { started: false, keys: [], killed: false, code: undefined, stderr: "" }),
  };
}

/** Every key under a parts directory that no committed manifest names. */
async function strayParts(store: ObjectStore, manager: CheckpointManager): Promise<string[]> {
  const named = new Set<string>();
  for (const e of await manager.list()) {
    const key = e.path.slice(store.url.length);
    const { manifest } = await readShardManifest({ store, key });
    for (const k of shardKeys(key, manifest)) named.add(k);
  }
  const stray: string[] = [];
  for await (const o of store.list("")) if (o.key.includes(".parts/") && !named.has(o.key)) stray.push(o.key);
  return stray;
}

async function seed(store: ObjectStore): Promise<void> {
  const manager = await CheckpointManager.open(store, { onWarning: () => {} });
  await manager.save(makeCheckpoint(1, { trained: TRAINED }), { shards: 2 });
  await manager.close();
}

/** After a kill: step 1 or 2 is the newest, intact; no stray parts; step 3 saves. */
async function check(store: ObjectStore, what: string): Promise<number> {
  const manager = await CheckpointManager.open(store, { onWarning: () => {} });
  const listed = await manager.list();
  assert.ok(listed.every((e) => e.status === "ok" && e.kind === "sharded"), `${what}: ${JSON.stringify(listed)}`);
  const latest = await manager.latest();
  const step = latest!.metadata.step;
  assert.ok(step === 1 || step === 2, `${what}: latest is step ${step}`);
  assert.equal(step, listed.at(-1)!.step, what);
  assert.deepEqual(
    byName(latest!.tensors),
    byName(makeCheckpoint(step, { trained: TRAINED }).tensors as TensorInput[]),
  );
  await manager.save(makeCheckpoint(3, { trained: TRAINED }), { shards: 2 });
  assert.equal((await manager.latest())!.metadata.step, 3, what);
  await manager.close();
  // With step 3 committed, the next open removes whatever step 2's attempt left.
  const again = await CheckpointManager.open(store, { onWarning: () => {} });
  assert.deepEqual(await strayParts(store, again), [], `${what}: parts no committed manifest names`);
  await again.close();
  return step;
}

/** Every kill point of every victim, each on a fresh target made by `fresh`. */
async function everyPoint(fresh: (i: number) => Target): Promise<void> {
  let i = 0;
  // An undisturbed run first: how many store-changing requests each role makes.
  const clean = fresh(i++);
  await seed(storeOf(clean));
  const whole = await run(clean, { committer: 0, writer: 0 });
  assert.equal(whole.committer.code, 0, whole.committer.stderr);
  assert.equal(whole.writer.code, 0, whole.writer.stderr);
  assert.equal(await check(storeOf(clean), "undisturbed"), 2);
  const counts = { committer: whole.committer.keys.length, writer: whole.writer.keys.length };
  assert.ok(counts.committer >= 4 && counts.writer >= 2, JSON.stringify(whole));
  const outcomes: string[] = [];
  for (const victim of ["writer", "committer", "both"] as const) {
    // Both: up to the committer's own done record; past it the committer waits for the other
    // writer's, which a killed writer never writes (that is the writer's case, ending in the deadline).
    const points = victim === "writer"
      ? counts.writer
      : victim === "committer"
      ? counts.committer
      : whole.committer.keys.findIndex((k) => k.includes("/done-")) + 1;
    for (let n = 1; n <= points; n++) {
      const target = fresh(i++);
      await seed(storeOf(target));
      const stopAt = {
        committer: victim === "writer" ? 0 : n,
        writer: victim === "committer" ? 0 : Math.min(n, counts.writer),
      };
      const ran = await run(target, stopAt);
      const what = `${victim} killed at request ${n} (${
        victim === "writer" ? whole.writer.keys[n - 1] : whole.committer.keys[n - 1]
      })`;
      // The writer starts once the committer's open is done: a committer killed before never starts it.
      if (victim === "writer" || (victim === "both" && ran.writer.started)) {
        assert.ok(ran.writer.killed, `${what}: ${ran.writer.keys.join(", ")} ${ran.writer.stderr}`);
      }
      if (victim !== "writer") {
        assert.ok(ran.committer.killed, `${what}: ${ran.committer.keys.join(", ")} ${ran.committer.stderr}`);
      }
      outcomes.push(`${what}: step ${await check(storeOf(target), what)}`);
    }
  }
  // Some kills come before the commit (step 1 stays the newest), the last ones after it.
  assert.ok(
    outcomes.some((o) => o.endsWith("step 1")) && outcomes.some((o) => o.endsWith("step 2")),
    outcomes.join("\n"),
  );
}

Deno.test({
  name: "a sharded manager save killed at every request, committer, writer or both, in a local directory",
  sanitizeResources: false,
  fn: () =>
    withDir((dir) =>
      everyPoint((i) => {
        Deno.mkdirSync(`${dir}/run-${i}`);
        return { kind: "file", root: `${dir}/run-${i}` };
      })
    ),
});

s3Test("a sharded manager save killed at every request, committer, writer or both, on S3", async (bucket) => {
  const { endpoint, region, credentials } = bucket.endpoint;
  await everyPoint((i) => ({
    kind: "s3",
    options: { endpoint, region, credentials, bucket: bucket.name, prefix: `run-${i}` },
  }));
});
