// S3 under Node against the real object store CI starts (a Ceph RGW; scripts/ceph.sh), from the
// installed package: files saved and loaded bit for bit, a manager on s3://, and `npx ckpt verify`
// of an s3:// address. Skips without an endpoint, except in CI, where that fails. And, with no
// store at all, what Node's fetch says of an endpoint it cannot reach reaches the user.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";
import process from "node:process";
import { AwsClient } from "aws4fetch";
import {
  CheckpointManager,
  loadCheckpoint,
  S3Store,
  saveCheckpoint,
  StoreUnreachableError,
  verifyCheckpoint,
} from "@ckpt/ckpt";
import { fixtureCheckpoint } from "./_fixture.mjs";
import { componentTest, runChild, SCRATCH } from "./_util.mjs";

// scripts/ceph.sh's defaults, as tests/_s3.ts.
process.env.AWS_ENDPOINT_URL ??= "http://127.0.0.1:7480";
process.env.AWS_REGION ??= "us-east-1";
process.env.AWS_ACCESS_KEY_ID ??= "ckpt-local-access-key";
process.env.AWS_SECRET_ACCESS_KEY ??= "ckpt-local-secret-key";
const ENDPOINT = process.env.AWS_ENDPOINT_URL;

async function absent() {
  try {
    const res = await fetch(ENDPOINT, { signal: AbortSignal.timeout(3000) });
    await res.body?.cancel();
    return undefined;
  } catch (e) {
    return `no S3 endpoint answers at ${ENDPOINT} (${e?.message ?? e})`;
  }
}

const signer = new AwsClient({
  accessKeyId: process.env.AWS_ACCESS_KEY_ID,
  secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY,
  service: "s3",
  region: process.env.AWS_REGION,
  retries: 0,
});

async function s3(path, init = {}) {
  return await fetch(await signer.sign(new URL(path, ENDPOINT).href, init));
}

/** Runs `fn` with a fresh bucket, emptied and deleted afterwards. */
async function withBucket(fn) {
  const bucket = `ckpt-node-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const made = await s3(`/${bucket}`, { method: "PUT" });
  assert.ok(made.ok, `cannot create bucket ${bucket}: ${made.status} ${await made.text()}`);
  try {
    return await fn(bucket);
  } finally {
    const list = await (await s3(`/${bucket}?list-type=2`)).text();
    for (const [, key] of list.matchAll(/<Key>([^<]+)<\/Key>/g)) {
      await (await s3(`/${bucket}/${key}`, { method: "DELETE" })).text();
    }
    await (await s3(`/${bucket}`, { method: "DELETE" })).text();
  }
}

const missing = await absent();
/** An object store that answers but never finishes a request fails the test, not the run. */
const TIMEOUT = { timeout: 90_000 };

function bytesOf(a) {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

componentTest("a checkpoint saved to s3:// under Node loads and verifies bit for bit", missing, async () => {
  await withBucket(async (bucket) => {
    const url = `s3://${bucket}/models/a.ckpt`;
    const saved = await saveCheckpoint(url, fixtureCheckpoint(), { compression: "bytegroup" });
    const back = await loadCheckpoint(url, { sha256: saved.digest });
    for (const [i, t] of fixtureCheckpoint().tensors.entries()) {
      assert.deepEqual(bytesOf(back.tensors[i].data), bytesOf(t.data));
    }
    const v = await verifyCheckpoint(url);
    assert.equal(v.tensors.length, 6);
    const only = await loadCheckpoint(url, { only: ["ids"] });
    assert.deepEqual(only.tensors.map((t) => t.name), ["ids"]);
  });
}, TIMEOUT);

componentTest("a CheckpointManager on s3:// under Node keeps the newest and resumes from them", missing, async () => {
  await withBucket(async (bucket) => {
    const m = await CheckpointManager.open(`s3://${bucket}/run`, { maxToKeep: 2 });
    for (const step of [1, 2, 3]) await m.save({ ...fixtureCheckpoint(), metadata: { step } });
    await m.close();
    const again = await CheckpointManager.open(`s3://${bucket}/run`);
    assert.deepEqual((await again.list()).map((e) => e.step), [2, 3]);
    assert.equal((await again.latest()).metadata.step, 3);
    await again.close();
  });
}, TIMEOUT);

componentTest("npx ckpt verify reads an s3:// address under Node", missing, async () => {
  await withBucket(async (bucket) => {
    await saveCheckpoint(`s3://${bucket}/a.ckpt`, fixtureCheckpoint());
    const r = await runChild("npx", ["--no-install", "ckpt", "verify", `s3://${bucket}/a.ckpt`], { cwd: SCRATCH });
    assert.equal(r.code, 0, r.out);
  });
}, TIMEOUT);

/** A local port nothing listens on: bound, then closed. */
async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The error each read of `store` fails with: HEAD, GET, a listing. */
async function readErrors(store) {
  const errors = [];
  const list = async () => {
    for await (const _ of store.list("")) { /* the first page fails */ }
  };
  for (const op of [() => store.head("x"), () => store.get("x"), list]) {
    errors.push(await op().then(() => undefined, (e) => e));
  }
  return errors;
}

test("an S3 endpoint where nothing listens: a StoreUnreachableError with the cause, under Node's fetch", async () => {
  const endpoint = `http://127.0.0.1:${await closedPort()}`;
  const credentials = { accessKeyId: "a", secretAccessKey: "b" };
  for (const e of await readErrors(new S3Store({ bucket: "ckpt", endpoint, retries: 0, credentials }))) {
    assert.ok(e instanceof StoreUnreachableError, String(e));
    assert.equal(e.endpoint, endpoint);
    assert.match(e.message, /^Cannot reach http:\/\/127\.0\.0\.1:\d+ for s3:\/\/ckpt\/x?: connection refused$/);
  }
});

test('an S3 endpoint on a port fetch blocks (9): the cause, not Node\'s bare "fetch failed"', async () => {
  const endpoint = "http://127.0.0.1:9";
  const credentials = { accessKeyId: "a", secretAccessKey: "b" };
  for (const e of await readErrors(new S3Store({ bucket: "ckpt", endpoint, retries: 5, credentials }))) {
    assert.ok(e instanceof StoreUnreachableError, String(e));
    assert.match(
      e.message,
      /^Cannot reach http:\/\/127\.0\.0\.1:9 for s3:\/\/ckpt\/x?: fetch refuses port 9, one the Fetch standard blocks \(https:\/\/fetch\.spec\.whatwg\.org\/#bad-port\): serve the store on another port$/,
    );
  }
});
