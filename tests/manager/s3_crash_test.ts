// A process saving to S3 killed with SIGKILL at several points of the save: before the upload,
// in the middle of a multipart upload, and after the upload but before the commit. Each time the
// checkpoint directory must open on the previous committed checkpoint, and the open must remove
// what the killed save left (the uncommitted object, the incomplete upload).
import assert from "node:assert/strict";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { s3Fetch, s3Test } from "../_s3.ts";
import { exact, warnings } from "./_helpers.ts";
import { bigCheckpoint, PART_SIZE } from "./_s3_crash.ts";

const POINTS = ["before-upload", "mid-multipart", "after-upload"] as const;

/** The multipart uploads in progress under `prefix`, from the bucket itself. */
async function uploads(bucket: string, prefix: string): Promise<number> {
  const res = await s3Fetch(`/${bucket}?uploads&prefix=${encodeURIComponent(prefix)}`);
  const text = await res.text();
  assert.ok(res.ok, text);
  return text.split("<Upload>").length - 1;
}

for (const point of POINTS) {
  s3Test(`a save to S3 killed with SIGKILL ${point} leaves latest() on the previous checkpoint`, async (bucket) => {
    const config = {
      bucket: bucket.name,
      prefix: "run",
      endpoint: bucket.endpoint.endpoint,
      region: bucket.endpoint.region,
      credentials: bucket.endpoint.credentials,
    };
    const store = bucket.store({ prefix: "run", partSize: PART_SIZE });
    const first = await CheckpointManager.open(store, { onWarning: () => {} });
    await first.save(bigCheckpoint(1));
    await first.close();
    const before = await Array.fromAsync(store.list(""), (o) => o.key);

    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_s3_crash_child.ts", import.meta.url).pathname, JSON.stringify(config), point],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let text = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      if (text.includes(`at ${point}`)) break;
    }
    child.kill("SIGKILL");
    const status = await child.status;
    const err = await new Response(child.stderr).text();
    assert.equal(status.signal, "SIGKILL", `the child should have stopped at ${point}: ${text} ${err}`);

    // What the killed save left behind, seen from outside.
    const left = await Array.fromAsync(store.list(""), (o) => o.key);
    if (point === "mid-multipart") assert.equal(await uploads(bucket.name, "run/"), 1, "an incomplete upload");
    if (point === "after-upload") {
      assert.ok(left.some((k) => /^step-000000002\.[0-9a-f]{12}\.ckpt$/.test(k)), "an uploaded, uncommitted object");
    }

    const w = warnings();
    const manager = await CheckpointManager.open(store, { onWarning: w.onWarning });
    const latest = await manager.latest();
    assert.equal(latest?.metadata.step, 1);
    assert.deepEqual(exact(latest!.tensors), exact(bigCheckpoint(1).tensors as never));
    assert.deepEqual((await manager.list()).map((e) => [e.step, e.status]), [[1, "ok"]]);
    if (point !== "before-upload") assert.match(w.list.join("\n"), /^Removed 1 leftover file/);
    assert.deepEqual(await Array.fromAsync(store.list(""), (o) => o.key), before, "nothing of the killed save is left");
    assert.equal(await uploads(bucket.name, "run/"), 0, "no incomplete upload is left");
    // And saving goes on.
    await manager.save(bigCheckpoint(2));
    assert.equal((await manager.latest())?.metadata.step, 2);
    await manager.close();
  });
}
