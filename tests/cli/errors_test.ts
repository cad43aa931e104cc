// The CLI's errors as a new user meets them: each said once, in one line, with one offset, and
// the same rule for what is an address as the library's. Stores are real sockets on 127.0.0.1:
// a server answering as S3 or HTTP would, or a port where nothing listens.
import { answering } from "../storage/_http_server.ts";
import assert from "node:assert/strict";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { ckpt } from "./_run.ts";

const S3_ENV = (endpoint: string) => ({
  AWS_ENDPOINT_URL: endpoint,
  AWS_ACCESS_KEY_ID: "id",
  AWS_SECRET_ACCESS_KEY: "secret",
  AWS_REGION: "us-east-1",
});

/** Each of `needles` occurs in `text` exactly once. */
function once(text: string, ...needles: string[]) {
  for (const n of needles) assert.equal(text.split(n).length - 1, 1, `${JSON.stringify(n)} once in ${text}`);
}

Deno.test("ckpt inspect of a missing s3:// object says so once", async () => {
  const server = answering(404, "<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>");
  try {
    const r = await ckpt(["inspect", "s3://ckpt/nope.ckpt"], { net: true, env: S3_ENV(server.url) });
    assert.equal(r.code, 3, r.err);
    assert.equal(r.err, "ckpt inspect: Cannot read s3://ckpt/nope.ckpt: no such object\n");
  } finally {
    await server.close();
  }
});

Deno.test("ckpt verify of a missing https:// object says so once", async () => {
  const server = answering(404);
  try {
    const url = `${server.url}/models/nope.ckpt`;
    const r = await ckpt(["verify", url], { net: true });
    assert.equal(r.code, 3, r.err);
    once(r.err, "Cannot read", url);
  } finally {
    await server.close();
  }
});

Deno.test("ckpt inspect without S3 credentials: one line naming the variable, exit 3, nothing sent", async () => {
  const server = answering(200);
  try {
    const r = await ckpt(["inspect", "s3://ckpt/x.ckpt"], {
      net: true,
      // No shared AWS files either: a HOME without ~/.aws.
      env: { ...S3_ENV(server.url), AWS_ACCESS_KEY_ID: "", HOME: "/nonexistent-home" },
    });
    assert.equal(r.code, 3, r.err);
    assert.match(
      r.err,
      /^ckpt inspect: Cannot sign requests to s3:\/\/ckpt\/: no credentials: AWS_ACCESS_KEY_ID is not set, and profile "default" has no aws_access_key_id and aws_secret_access_key in \/nonexistent-home\/\.aws\/credentials \(absent\)/,
    );
    assert.equal(r.err.trim().split("\n").length, 1, r.err);
    assert.doesNotMatch(r.err, /attempts|--help|Cannot read/);
    assert.deepEqual(server.seen, []);
  } finally {
    await server.close();
  }
});

Deno.test("ckpt inspect of a store where nothing listens names the address, once", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const endpoint = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
  listener.close();
  const r = await ckpt(["inspect", "s3://ckpt/x.ckpt"], { net: true, env: { ...S3_ENV(endpoint) } });
  assert.equal(r.code, 3, r.err);
  assert.match(
    r.err,
    new RegExp(
      `^ckpt inspect: Cannot reach ${endpoint} for s3://ckpt/x\\.ckpt: connection refused \\(after 6 attempts\\)\\n$`,
    ),
  );
});

Deno.test("ckpt inspect of a truncated file gives one offset, once", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/t.ckpt`;
    await saveCheckpoint(path, {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float32", shape: [2000], data: new Float32Array(2000) }],
    });
    const bytes = await Deno.readFile(path);
    await Deno.writeFile(path, bytes.subarray(0, bytes.byteLength - 900));
    const r = await ckpt(["inspect", path]);
    assert.equal(r.code, 4, r.err);
    assert.equal((r.err.match(/offset/g) ?? []).length, 1, r.err);
    assert.match(
      r.err,
      new RegExp(`file of ${bytes.byteLength - 900} bytes is truncated .* at offset ${bytes.byteLength - 908}\\n$`),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("s3:/ckpt/x is a malformed S3 address in the CLI as in the library, never a local path", async () => {
  const message = await loadCheckpoint("s3:/ckpt/x.ckpt").then(() => "", (e: Error) => `${e.name}: ${e.message}`);
  assert.equal(message, "TypeError: Invalid address s3:/ckpt/x.ckpt: no bucket (write s3://bucket/key)");
  for (const command of ["inspect", "verify", "convert"]) {
    const r = await ckpt(command === "convert" ? [command, "s3:/ckpt/x.ckpt", "-"] : [command, "s3:/ckpt/x.ckpt"]);
    assert.equal(r.code, 3, r.err);
    assert.equal(r.err, `ckpt ${command}: Invalid address s3:/ckpt/x.ckpt: no bucket (write s3://bucket/key)\n`);
  }
});
