// The S3 endpoint tests run against (a local Ceph RGW from scripts/ceph.sh, or whatever the AWS_*
// variables name) and a fresh bucket per test. Without an endpoint, s3Test() fails the test in CI
// (CI set) and skips it elsewhere, saying so once.
// deno-lint-ignore no-import-prefix -- by full specifier, so the module loads without this repo's deno.json
import { AwsClient } from "npm:aws4fetch@1.0.20";
import { S3Store, type S3StoreOptions } from "../src/storage/s3.ts";
import { IN_CI as inCI } from "./_ci.ts";

/** Where the store is and how to sign for it. */
export interface S3Endpoint {
  endpoint: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
}

function env(name: string): string | undefined {
  return Deno.env.get(name) || undefined;
}

// scripts/ceph.sh's defaults, so a cluster started with `deno task store:start` is found without
// exporting its variables.
const endpoint: S3Endpoint = {
  endpoint: env("AWS_ENDPOINT_URL") ?? "http://127.0.0.1:7480",
  region: env("AWS_REGION") ?? "us-east-1",
  credentials: {
    accessKeyId: env("AWS_ACCESS_KEY_ID") ?? "ckpt-local-access-key",
    secretAccessKey: env("AWS_SECRET_ACCESS_KEY") ?? "ckpt-local-secret-key",
  },
};

async function reachable(): Promise<string | undefined> {
  try {
    const res = await fetch(endpoint.endpoint, { signal: AbortSignal.timeout(3000) });
    await res.body?.cancel();
    return undefined;
  } catch (e) {
    return `no S3 endpoint answers at ${endpoint.endpoint} (${e instanceof Error ? e.message : e})`;
  }
}

const absent = await reachable();
if (absent && !inCI) {
  console.error(`skipping S3 tests: ${absent}; start one with \`deno task store:start\``);
}

/** The endpoint, or undefined when none answers. */
export const s3Endpoint: S3Endpoint | undefined = absent ? undefined : endpoint;

const signer = new AwsClient({ ...endpoint.credentials, service: "s3", region: endpoint.region, retries: 0 });

/** Sends one signed request to the endpoint (bucket administration, checks that bypass S3Store). */
export async function s3Fetch(path: string, init: RequestInit = {}): Promise<Response> {
  return await fetch(await signer.sign(new URL(path, endpoint.endpoint).href, init));
}

/** A bucket made for one test, emptied and deleted afterwards. */
export interface TestBucket {
  name: string;
  endpoint: S3Endpoint;
  /** An S3Store on this bucket. */
  store(options?: Omit<S3StoreOptions, "bucket">): S3Store;
}

let counter = 0;

async function ok(res: Promise<Response>, what: string): Promise<string> {
  const r = await res;
  const text = await r.text();
  if (!r.ok && r.status !== 404) throw new Error(`${what}: ${r.status} ${text}`);
  return text;
}

/** Runs `fn` with a new bucket, then removes every object and upload in it and the bucket. */
export async function withBucket(fn: (bucket: TestBucket) => Promise<void>): Promise<void> {
  const name = `ckpt-test-${Date.now().toString(36)}-${(counter++).toString(36)}-${
    Math.floor(Math.random() * 1e9).toString(36)
  }`;
  await ok(s3Fetch(`/${name}`, { method: "PUT" }), `Cannot create bucket ${name}`);
  const base = { endpoint: endpoint.endpoint, region: endpoint.region, credentials: endpoint.credentials };
  try {
    await fn({ name, endpoint, store: (options = {}) => new S3Store({ ...base, ...options, bucket: name }) });
  } finally {
    const admin = new S3Store({ ...base, bucket: name });
    await admin.sweep();
    for await (const o of admin.list()) await admin.delete(o.key);
    await ok(s3Fetch(`/${name}`, { method: "DELETE" }), `Cannot delete bucket ${name}`);
  }
}

/** Registers a test that needs S3: fails in CI without an endpoint, skips elsewhere. */
export function s3Test(name: string, fn: (bucket: TestBucket) => Promise<void>): void {
  if (absent && !inCI) {
    Deno.test({ name, ignore: true, fn() {} });
    return;
  }
  Deno.test(name, async () => {
    if (absent) {
      throw new Error(
        `This test needs S3 (CI is set, so it fails rather than skips): ${absent}; start one with scripts/ceph.sh start`,
      );
    }
    await withBucket(fn);
  });
}

/** Whether S3 tests should be registered as ignored (no endpoint, not in CI). */
export const s3Ignore: boolean = absent !== undefined && !inCI;

let fixtures = 0;

/**
 * A fresh bucket as a contract-suite fixture (tests/storage/_contract.ts). In CI without an
 * endpoint it throws, so the test fails.
 */
export async function s3Fixture(options: Omit<S3StoreOptions, "bucket"> = {}): Promise<{
  store: S3Store;
  seed(key: string, bytes: Uint8Array): Promise<void>;
  close(): Promise<void>;
}> {
  if (absent) {
    throw new Error(
      `This test needs S3 (CI is set, so it fails rather than skips): ${absent}; start one with scripts/ceph.sh start`,
    );
  }
  let release!: () => void;
  let ready!: (b: TestBucket) => void;
  const got = new Promise<TestBucket>((r) => ready = r);
  const done = withBucket((b) => {
    ready(b);
    return new Promise<void>((r) => release = r);
  });
  // A failure to make the bucket rejects `done` before `got` settles.
  const bucket = await Promise.race([got, done.then(() => Promise.reject(new Error("no bucket")))]);
  const store = bucket.store({ ...options, prefix: options.prefix ?? `fixture-${fixtures++}` });
  return {
    store,
    seed: async (key, bytes) => void await store.put(key, bytes),
    close: () => {
      release();
      return done;
    },
  };
}
