// What a new user's first S3 mistakes look like: missing credentials, a refused request, a store
// that cannot be reached. Each against a real socket on 127.0.0.1 (a server that counts what it
// gets, or a port where nothing listens); none needs an object store.
import { answering } from "./_http_server.ts";
import assert from "node:assert/strict";
import { S3Error, S3Store } from "../../src/storage/s3.ts";
import { HttpStore } from "../../src/storage/http.ts";
import { StoreUnreachableError } from "../../src/storage/types.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const NO_HOME = "/nonexistent-ckpt-home";
const DENO_DIR = Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME") ?? ""}/.cache/deno`;

/** A port on 127.0.0.1 where nothing listens (bound, then closed). */
function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/** Runs `code` in a fresh Deno with only `env` in its environment; its exit code and output. */
async function runWith(env: Record<string, string>, code: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--quiet", code],
    cwd: ROOT,
    clearEnv: true,
    // A HOME with no ~/.aws (the shared AWS files would be read there); Deno's cache where it is.
    env: { ...env, NO_COLOR: "1", PATH: Deno.env.get("PATH") ?? "", HOME: NO_HOME, DENO_DIR },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr) };
}

Deno.test("S3Store without credentials throws a TypeError naming the variables at once, sending nothing", async () => {
  const server = answering(200);
  try {
    const { code, text } = await runWith(
      { AWS_ENDPOINT_URL: server.url, AWS_SECRET_ACCESS_KEY: "secret" },
      `import { S3Store } from "./src/storage/s3.ts";
       try { await new S3Store({ bucket: "ckpt" }).head("x.ckpt"); }
       catch (e) { console.log(e.name, e.message); }`,
    );
    assert.equal(code, 0, text);
    const [name, ...words] = text.trim().split(" ");
    assert.equal(name, "TypeError", text);
    // Not retried, whatever the clock says: no attempt count in the message, no request at the server.
    const message = words.join(" ");
    assert.match(message, /no credentials: AWS_ACCESS_KEY_ID is not set/);
    assert.doesNotMatch(message, /AWS_SECRET_ACCESS_KEY is not set|attempts/);
    assert.match(message, /storage\.s3\.credentials/);
    assert.match(
      message,
      /, and profile "default" has no aws_access_key_id and aws_secret_access_key in \/nonexistent-ckpt-home\/\.aws\/credentials \(absent\) or \/nonexistent-ckpt-home\/\.aws\/config \(absent\);/,
    );
    assert.deepEqual(server.seen, []);
  } finally {
    await server.close();
  }
});

Deno.test("loadCheckpoint of an s3:// address without credentials: the same TypeError, no retries", async () => {
  const server = answering(200);
  try {
    const { text } = await runWith(
      { AWS_ENDPOINT_URL: server.url },
      `import { loadCheckpoint } from "./mod.ts";
       try { await loadCheckpoint("s3://ckpt/x.ckpt"); } catch (e) { console.log(e.name + ": " + e.message); }`,
    );
    assert.match(text, /^TypeError: .*AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set/);
    assert.doesNotMatch(text, /attempts|Cannot read .*Cannot read/);
    assert.deepEqual(server.seen, []);
  } finally {
    await server.close();
  }
});

Deno.test("S3Store with credentials given empty is a TypeError when made", () => {
  assert.throws(
    () => new S3Store({ bucket: "ckpt", credentials: { accessKeyId: "id", secretAccessKey: "" } }),
    (e: unknown) => e instanceof TypeError && /credentials\.secretAccessKey must be a non-empty string/.test(e.message),
  );
});

Deno.test("a refused request (403) says it was refused and what to check, without retrying", async () => {
  const server = answering(403);
  try {
    const store = new S3Store({
      bucket: "ckpt",
      endpoint: server.url,
      credentials: { accessKeyId: "id", secretAccessKey: "wrong" },
    });
    await assert.rejects(() => store.head("run/x.ckpt"), (e: unknown) => {
      assert.ok(e instanceof S3Error);
      assert.equal(e.status, 403);
      assert.match(e.message, /^Cannot HEAD s3:\/\/ckpt\/run\/x\.ckpt: 403 the store refused the request: /);
      assert.match(e.message, /credentials .*clock.*bucket's policy/);
      return true;
    });
    assert.equal(server.seen.length, 1, "a 403 is not retried");
  } finally {
    await server.close();
  }
});

Deno.test("a 403 with an S3 code names what the code means", async () => {
  const xml = (code: string) => `<?xml version="1.0"?><Error><Code>${code}</Code><Message>m</Message></Error>`;
  for (
    const [code, words] of [
      ["SignatureDoesNotMatch", /check the secret key/],
      ["RequestTimeTooSkewed", /clock/],
      ["InvalidAccessKeyId", /does not know this access key id/],
    ] as const
  ) {
    const server = answering(403, xml(code));
    try {
      const store = new S3Store({
        bucket: "ckpt",
        endpoint: server.url,
        credentials: { accessKeyId: "a", secretAccessKey: "b" },
      });
      await assert.rejects(
        () => store.get("x"),
        (e: unknown) => e instanceof S3Error && e.code === code && words.test(e.message),
      );
    } finally {
      await server.close();
    }
  }
});

Deno.test("an S3 endpoint where nothing listens is a StoreUnreachableError naming the address and the cause", async () => {
  const endpoint = `http://127.0.0.1:${closedPort()}`;
  const store = new S3Store({
    bucket: "ckpt",
    endpoint,
    retries: 1,
    credentials: { accessKeyId: "a", secretAccessKey: "b" },
  });
  await assert.rejects(() => store.get("run/x.ckpt"), (e: unknown) => {
    assert.ok(e instanceof StoreUnreachableError, String(e));
    assert.equal(e.endpoint, endpoint);
    assert.equal(e.url, "s3://ckpt/run/x.ckpt");
    assert.equal(e.message, `Cannot reach ${endpoint} for s3://ckpt/run/x.ckpt: connection refused (after 2 attempts)`);
    assert.ok(e.cause, "the runtime's error is kept as the cause");
    return true;
  });
});

Deno.test("an S3 endpoint whose host does not exist is a StoreUnreachableError naming the host", async () => {
  // In a child with network access to any host (the test task allows 127.0.0.1 only); `.invalid`
  // never resolves (RFC 2606).
  const { code, text } = await runWith(
    {},
    `import { S3Store } from "./src/storage/s3.ts";
     const store = new S3Store({
       bucket: "ckpt", endpoint: "http://ckpt-no-such-host.invalid:7480", retries: 0,
       credentials: { accessKeyId: "a", secretAccessKey: "b" },
     });
     try { await store.head("x"); } catch (e) { console.log(e.name, e.endpoint, e.message); }`,
  );
  assert.equal(code, 0, text);
  assert.equal(
    text.trim(),
    "StoreUnreachableError http://ckpt-no-such-host.invalid:7480 " +
      "Cannot reach http://ckpt-no-such-host.invalid:7480 for s3://ckpt/x: no such host",
  );
});

Deno.test("an HTTP store where nothing listens: the same StoreUnreachableError", async () => {
  const base = `http://127.0.0.1:${closedPort()}`;
  const store = new HttpStore(`${base}/models/`);
  await assert.rejects(() => store.get("a.ckpt"), (e: unknown) => {
    assert.ok(e instanceof StoreUnreachableError, String(e));
    assert.equal(e.endpoint, base);
    assert.equal(e.message, `Cannot reach ${base} for ${base}/models/a.ckpt: connection refused`);
    return true;
  });
});

Deno.test("an S3 endpoint on a port fetch blocks (9) is a StoreUnreachableError that says so, at once", async () => {
  const endpoint = "http://127.0.0.1:9";
  const store = new S3Store({
    bucket: "ckpt",
    endpoint,
    retries: 5,
    credentials: { accessKeyId: "a", secretAccessKey: "b" },
  });
  for (const op of [() => store.head("x"), () => store.get("x"), () => Array.fromAsync(store.list(""))]) {
    await assert.rejects(op, (e: unknown) => {
      assert.ok(e instanceof StoreUnreachableError, String(e));
      assert.equal(e.endpoint, endpoint);
      // No "(after 6 attempts)": a blocked port is not retried.
      assert.match(
        e.message,
        /^Cannot reach http:\/\/127\.0\.0\.1:9 for s3:\/\/ckpt\/x?: fetch refuses port 9, one the Fetch standard blocks \(https:\/\/fetch\.spec\.whatwg\.org\/#bad-port\): serve the store on another port$/,
      );
      return true;
    });
  }
});
