import assert from "node:assert/strict";
import { loadCheckpoint } from "../../mod.ts";
import {
  listShardLeftovers,
  readShardManifest,
  readShards,
  removeShardLeftovers,
  saveShard,
  saveSharded,
  ShardConflictError,
} from "../../src/shard/mod.ts";
import { s3Test, type TestBucket } from "../_s3.ts";
import { FaultProxy, type SeenRequest } from "../storage/_fault_proxy.ts";
import { assertSameCheckpoint } from "../_util.ts";
import { replica, SPLIT } from "./_fixture.ts";
import { bytesOf } from "../../src/format/dtype.ts";

const CHILD = new URL("./_writer_child.ts", import.meta.url).pathname;

function storage(b: TestBucket, endpoint = b.endpoint.endpoint, fetch?: typeof globalThis.fetch) {
  return {
    s3: { endpoint, region: b.endpoint.region, credentials: b.endpoint.credentials, ...(fetch ? { fetch } : {}) },
  };
}

s3Test("saveShard from 2 and 4 processes to s3:// commits one checkpoint that loads bit for bit", async (b) => {
  for (const writers of [2, 4]) {
    const address = `s3://${b.name}/run/procs-${writers}.ckpt`;
    const outs = await Promise.all(Array.from({ length: writers }, (_, writer) =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", CHILD, JSON.stringify({ address, writer, writers, saveId: `p${writers}`, seed: 31 })],
        env: { AWS_ENDPOINT_URL: b.endpoint.endpoint },
      }).output()));
    for (const o of outs) assert.equal(o.code, 0, new TextDecoder().decode(o.stderr));
    const lines = new TextDecoder().decode(outs[0]!.stdout);
    const digest = /committed ([0-9a-f]{64})/.exec(lines)![1]!;
    assertSameCheckpoint(await loadCheckpoint(address, { sha256: digest, storage: storage(b) }), replica(31));
    assert.deepEqual(await listShardLeftovers(address, { storage: storage(b) }), []);
  }
});

s3Test("readShards from s3:// fetches only the slices a row range needs, by ranged GETs", async (b) => {
  const c = replica(12, 100);
  const address = `s3://${b.name}/run/ranged.ckpt`;
  await saveSharded(address, c, { writers: 4, splitBytes: SPLIT, storage: storage(b) });
  const { manifest } = await readShardManifest(address, { storage: storage(b) });
  const slices = manifest.tensors.find((t) => t.name === "embed")!.slices;
  const seen: { method: string; url: string; range: string | null }[] = [];
  const fetching: typeof fetch = (input, init) => {
    const req = new Request(input, init);
    seen.push({ method: req.method, url: req.url, range: req.headers.get("range") });
    return fetch(req);
  };
  const got = await readShards(address, { rows: [{ tensor: "embed", start: 55, end: 60 }] }, {
    storage: storage(b, undefined, fetching),
  });
  const embed = c.tensors.find((t) => t.name === "embed")!;
  assert.deepEqual(bytesOf(got.tensors[0]!.data), bytesOf(embed.data).slice(55 * 1024, 60 * 1024));
  const s = slices[2]!;
  assert.deepEqual(seen.map((r) => [r.method, r.url.split("/").pop(), r.range]), [
    ["GET", "ranged.ckpt", null],
    ["GET", "part-00003-of-00004.ckpt", `bytes=${s.offset}-${s.offset + s.length - 1}`],
  ]);
});

s3Test(
  "two committers racing on s3://: exactly one wins (If-None-Match: * on RGW), the other gets ShardConflictError",
  async (b) => {
    const c = replica(13);
    for (let round = 0; round < 3; round++) {
      const address = `s3://${b.name}/run/race-${round}.ckpt`;
      const results = await Promise.allSettled([0, 1].map((writer) =>
        saveShard(address, c, {
          writer,
          writers: 2,
          saveId: "r",
          splitBytes: SPLIT,
          commit: true, // both writers commit
          poll: 20,
          storage: storage(b),
        })
      ));
      assert.equal(results.filter((r) => r.status === "fulfilled" && r.value.digest).length, 1);
      const lost = results.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
      assert.equal(lost.length, 1);
      assert.ok(lost[0]!.reason instanceof ShardConflictError, String(lost[0]!.reason));
      assertSameCheckpoint(await loadCheckpoint(address, { storage: storage(b) }), c);
    }
  },
);

s3Test(
  "store faults during a sharded save to s3:// (resets, 503s): retried or a clear error, never a manifest naming a missing or damaged part",
  async (b) => {
    const proxy = new FaultProxy(b.endpoint.endpoint);
    try {
      const c = replica(14, 200);
      let n = 0;
      proxy.rule = (r: SeenRequest) =>
        r.method === "PUT" || r.method === "POST" ? (++n % 3 === 0 ? "reset" : n % 4 === 0 ? "503" : "pass") : "pass";
      let committed = 0;
      for (let round = 0; round < 4; round++) {
        const address = `s3://${b.name}/faults/a-${round}.ckpt`;
        try {
          await saveSharded(address, c, { writers: 2, splitBytes: SPLIT, storage: storage(b, proxy.endpoint) });
          committed++;
        } catch (e) {
          assert.ok(e instanceof Error && e.message.length > 0);
        }
        // Whatever happened, what is there is either nothing or a whole, verified checkpoint.
        try {
          assertSameCheckpoint(await loadCheckpoint(address, { storage: storage(b) }), c);
        } catch (e) {
          assert.match(String(e), /no such object/);
        }
      }
      assert.ok(proxy.count("reset") + proxy.count("503") > 0, "faults were injected");
      assert.equal(committed, 4, "S3Store retries resets and 503s of single PUTs and parts");
      // One writer's store unreachable: the save fails, naming the store, and commits nothing.
      const address = `s3://${b.name}/faults/unreachable.ckpt`;
      const results = await Promise.allSettled([0, 1].map((writer) =>
        saveShard(address, c, {
          writer,
          writers: 2,
          saveId: "u",
          splitBytes: SPLIT,
          deadline: 3000,
          poll: 50,
          storage: storage(b, writer === 1 ? "http://127.0.0.1:9" : b.endpoint.endpoint),
        })
      ));
      assert.ok(results.every((r) => r.status === "rejected"));
      assert.match(String((results[1] as PromiseRejectedResult).reason), /Cannot reach http:\/\/127\.0\.0\.1:9/);
      assert.match(String((results[0] as PromiseRejectedResult).reason), /writer 1 of 2 \(part-00002-of-00002\.ckpt\)/);
      await assert.rejects(loadCheckpoint(address, { storage: storage(b) }), /no such object/);
      assert.ok(await removeShardLeftovers(address, { storage: storage(b) }) >= 2);
    } finally {
      await proxy.close();
    }
  },
);
