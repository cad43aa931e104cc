// AWS settings as every AWS tool reads them: the environment, then ~/.aws/credentials and
// ~/.aws/config (or the files AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE name), in the profile
// AWS_PROFILE names. The parser and the lookup on temporary files; S3Store's signed requests in a
// child whose environment holds no AWS_ACCESS_KEY_ID, against a server that records them and
// against the real RGW.
import assert from "node:assert/strict";
import { join } from "node:path";
import { awsSettings, parseIni } from "../../src/storage/_aws_config.ts";
import { S3Store } from "../../src/storage/s3.ts";
import { type S3Endpoint, s3Test } from "../_s3.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const DENO_DIR = Deno.env.get("DENO_DIR") ?? join(Deno.env.get("HOME") ?? "/", ".cache", "deno");

/** Runs `fn` with a temporary directory holding `files` (name to text). */
async function withFiles(files: Record<string, string>, fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-aws-" });
  try {
    for (const [name, text] of Object.entries(files)) {
      await Deno.mkdir(join(dir, name, ".."), { recursive: true });
      await Deno.writeTextFile(join(dir, name), text);
    }
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The lookup's environment: only `vars`. */
function envOf(vars: Record<string, string>): (name: string) => string | undefined {
  return (name) => vars[name];
}

const CREDENTIALS = `# keys by profile
[default]
aws_access_key_id = DEFAULTKEY
aws_secret_access_key = default-secret

[dev]
aws_access_key_id=DEVKEY
aws_secret_access_key =  dev-secret
aws_session_token = dev-token
`;

const CONFIG = `[default]
region = us-west-2

; the dev profile
[profile dev]
region = eu-west-3
endpoint_url = http://127.0.0.1:7480

[profile only-config]
aws_access_key_id = CONFIGKEY
aws_secret_access_key = config-secret
services = local

[services local]
s3 =
  endpoint_url = http://127.0.0.1:9000
`;

Deno.test("parseIni reads sections, keys in any case, comments, sub-keys, CRLF and a BOM", () => {
  const ini = parseIni(
    "\uFEFF# top\r\n[profile  dev]\r\nRegion = eu-west-1\r\n; note\r\ns3 =\r\n  endpoint_url = http://x:1\r\n  addressing_style = path\r\nafter = 1\r\n",
    "cfg",
  );
  assert.deepEqual([...ini.keys()], ["profile dev"]);
  assert.deepEqual(Object.fromEntries(ini.get("profile dev")!), {
    region: "eu-west-1",
    s3: "",
    "s3.endpoint_url": "http://x:1",
    "s3.addressing_style": "path",
    after: "1",
  });
});

Deno.test("parseIni refuses a line that is neither a section nor key = value, naming the file and line", () => {
  assert.throws(
    () => parseIni("[default]\naws_access_key_id DEVKEY\n", "/home/u/.aws/credentials"),
    (e: unknown) =>
      e instanceof SyntaxError &&
      e.message ===
        "Cannot read AWS settings: /home/u/.aws/credentials line 2 is neither [section] nor key = value: aws_access_key_id DEVKEY",
  );
  assert.throws(
    () => parseIni("region = x\n", "config"),
    (e: unknown) =>
      e instanceof SyntaxError &&
      e.message === "Cannot read AWS settings: config line 1 sets a value before any [section]",
  );
  assert.throws(() => parseIni("[ ]\n", "config"), SyntaxError);
});

Deno.test("AWS_PROFILE picks [name] in the credentials file and [profile name] in the config file", async () => {
  await withFiles({ ".aws/credentials": CREDENTIALS, ".aws/config": CONFIG }, async (home) => {
    const s = await awsSettings({ env: envOf({ HOME: home, AWS_PROFILE: "dev" }) });
    assert.deepEqual(s.credentials, {
      accessKeyId: "DEVKEY",
      secretAccessKey: "dev-secret",
      sessionToken: "dev-token",
      source: `${home}/.aws/credentials [dev]`,
    });
    assert.equal(s.region, "eu-west-3");
    assert.equal(s.endpoint, "http://127.0.0.1:7480");
    assert.equal(s.profile, "dev");
    // Without AWS_PROFILE: [default] in both files.
    const d = await awsSettings({ env: envOf({ HOME: home }) });
    assert.equal(d.credentials?.accessKeyId, "DEFAULTKEY");
    assert.equal(d.credentials?.sessionToken, undefined);
    assert.equal(d.region, "us-west-2");
    assert.equal(d.endpoint, undefined);
  });
});

Deno.test("keys in the config file, and an s3 endpoint_url from the profile's services section", async () => {
  await withFiles({ ".aws/credentials": CREDENTIALS, ".aws/config": CONFIG }, async (home) => {
    const s = await awsSettings({ env: envOf({ HOME: home }), profile: "only-config" });
    assert.equal(s.credentials?.accessKeyId, "CONFIGKEY");
    assert.equal(s.credentials?.source, `${home}/.aws/config [profile only-config]`);
    assert.equal(s.endpoint, "http://127.0.0.1:9000");
  });
});

Deno.test("the environment comes before the files, and a key set is never mixed from two places", async () => {
  await withFiles({ ".aws/credentials": CREDENTIALS, ".aws/config": CONFIG }, async (home) => {
    const env = {
      HOME: home,
      AWS_PROFILE: "dev",
      AWS_ACCESS_KEY_ID: "ENVKEY",
      AWS_SECRET_ACCESS_KEY: "env-secret",
      AWS_REGION: "ap-south-1",
      AWS_ENDPOINT_URL: "http://127.0.0.1:1234",
    };
    const s = await awsSettings({ env: envOf(env) });
    assert.deepEqual(s.credentials, {
      accessKeyId: "ENVKEY",
      secretAccessKey: "env-secret",
      source: "the environment (AWS_ACCESS_KEY_ID)",
    });
    assert.equal(s.region, "ap-south-1");
    assert.equal(s.endpoint, "http://127.0.0.1:1234");
    // A session token in the environment goes with the environment's keys.
    const t = await awsSettings({ env: envOf({ ...env, AWS_SESSION_TOKEN: "env-token" }) });
    assert.equal(t.credentials?.sessionToken, "env-token");
    // Half a key set in the environment: the profile's whole set, not the environment's id with its secret.
    const half = await awsSettings({ env: envOf({ HOME: home, AWS_PROFILE: "dev", AWS_ACCESS_KEY_ID: "ENVKEY" }) });
    assert.equal(half.credentials?.accessKeyId, "DEVKEY");
    assert.equal(half.credentials?.secretAccessKey, "dev-secret");
    // AWS_DEFAULT_REGION when AWS_REGION is not set; both before the config file.
    const r = await awsSettings({ env: envOf({ HOME: home, AWS_PROFILE: "dev", AWS_DEFAULT_REGION: "sa-east-1" }) });
    assert.equal(r.region, "sa-east-1");
  });
});

Deno.test("AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE replace ~/.aws/credentials and ~/.aws/config", async () => {
  await withFiles({
    ".aws/credentials": CREDENTIALS,
    "elsewhere/creds": "[dev]\naws_access_key_id = OTHERKEY\naws_secret_access_key = other\n",
    "elsewhere/conf": "[profile dev]\nregion = ca-central-1\n",
  }, async (home) => {
    const s = await awsSettings({
      env: envOf({
        HOME: home,
        AWS_PROFILE: "dev",
        AWS_SHARED_CREDENTIALS_FILE: `${home}/elsewhere/creds`,
        AWS_CONFIG_FILE: `${home}/elsewhere/conf`,
      }),
    });
    assert.equal(s.credentials?.accessKeyId, "OTHERKEY");
    assert.equal(s.region, "ca-central-1");
    assert.deepEqual(s.files, [
      { path: `${home}/elsewhere/creds`, state: "read" },
      { path: `${home}/elsewhere/conf`, state: "read" },
    ]);
  });
});

Deno.test("a named profile that neither file holds is a TypeError naming the profile and both files", async () => {
  await withFiles({ ".aws/credentials": CREDENTIALS }, async (home) => {
    await assert.rejects(
      () => awsSettings({ env: envOf({ HOME: home, AWS_PROFILE: "prod" }) }),
      (e: unknown) => {
        assert.ok(e instanceof TypeError, String(e));
        assert.equal(
          e.message,
          `Cannot use the AWS profile "prod" (AWS_PROFILE): it is in neither ${home}/.aws/credentials nor ` +
            `${home}/.aws/config (absent); add [prod] to the credentials file or [profile prod] to the config file, or unset AWS_PROFILE`,
        );
        return true;
      },
    );
    // [prod] in the config file (without "profile ") is not the profile prod, as for the AWS CLI.
    await Deno.writeTextFile(join(home, ".aws/config"), "[prod]\nregion = eu-west-1\n");
    await assert.rejects(() => awsSettings({ env: envOf({ HOME: home }), profile: "prod" }), /S3StoreOptions\.profile/);
  });
});

/** Runs `code` in a fresh Deno whose environment is `env` alone (no AWS_* but those given). */
async function runWith(env: Record<string, string>, code: string): Promise<{ code: number; text: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--quiet", code],
    cwd: ROOT,
    clearEnv: true,
    // Deno's own cache stays where it is: HOME may be a test's.
    env: { ...env, NO_COLOR: "1", PATH: Deno.env.get("PATH") ?? "", DENO_DIR: DENO_DIR },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr) };
}

Deno.test("S3Store signs with a profile's session token, region and endpoint from the files (x-amz-security-token sent)", async () => {
  const seen: Headers[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    seen.push(req.headers);
    return new Response(null, { status: 404 });
  });
  try {
    const endpoint = `http://127.0.0.1:${server.addr.port}`;
    await withFiles({
      ".aws/credentials": CREDENTIALS,
      ".aws/config": `[profile dev]\nregion = eu-west-3\nendpoint_url = ${endpoint}\n`,
    }, async (home) => {
      const { code, text } = await runWith(
        { HOME: home, AWS_PROFILE: "dev" },
        `import { S3Store } from "./src/storage/s3.ts";
         console.log(String(await new S3Store({ bucket: "ckpt" }).head("x.ckpt")));`,
      );
      assert.equal(code, 0, text);
      assert.equal(text.trim(), "undefined", "the object is absent (404)");
    });
    assert.equal(seen.length, 1);
    const headers = seen[0]!;
    assert.equal(headers.get("x-amz-security-token"), "dev-token");
    assert.match(headers.get("authorization") ?? "", /Credential=DEVKEY\/\d{8}\/eu-west-3\/s3\/aws4_request/);
    assert.match(headers.get("authorization") ?? "", /SignedHeaders=[^,]*x-amz-security-token/);
  } finally {
    await server.shutdown();
  }
});

Deno.test("S3Store with AWS_PROFILE naming a missing profile: the TypeError, nothing sent", async () => {
  const { code, text } = await runWith(
    { HOME: "/nonexistent-home", AWS_PROFILE: "prod", AWS_ENDPOINT_URL: "http://127.0.0.1:9" },
    `import { S3Store } from "./src/storage/s3.ts";
     try { await new S3Store({ bucket: "ckpt" }).head("x"); } catch (e) { console.log(e.name + ": " + e.message); }`,
  );
  assert.equal(code, 0, text);
  assert.equal(
    text.trim(),
    `TypeError: Cannot use the AWS profile "prod" (AWS_PROFILE): it is in neither /nonexistent-home/.aws/credentials (absent) ` +
      `nor /nonexistent-home/.aws/config (absent); add [prod] to the credentials file or [profile prod] to the config file, or unset AWS_PROFILE`,
  );
});

Deno.test("storage.s3.profile names the profile for an s3:// address, before AWS_PROFILE", async () => {
  await withFiles({ ".aws/credentials": CREDENTIALS }, async (home) => {
    const { code, text } = await runWith(
      { HOME: home, AWS_PROFILE: "dev", AWS_ENDPOINT_URL: "http://127.0.0.1:9" },
      `import { loadCheckpoint } from "./mod.ts";
       try { await loadCheckpoint("s3://ckpt/x.ckpt", { storage: { s3: { profile: "staging" } } }); }
       catch (e) { console.log(e.name + ": " + e.message); }`,
    );
    assert.equal(code, 0, text);
    assert.match(
      text.trim(),
      /^TypeError: Cannot use the AWS profile "staging" \(S3StoreOptions\.profile\): it is in neither /,
    );
  });
  assert.throws(
    () => new S3Store({ bucket: "ckpt", profile: "" }),
    (e: unknown) =>
      e instanceof TypeError && /Invalid S3StoreOptions\.profile: "" is not a profile name/.test(e.message),
  );
});

/** docs/storage.md's example files (its `ini` block), for the endpoint and keys of the store under test. */
async function documentedFiles(endpoint: S3Endpoint): Promise<Record<string, string>> {
  const docs = await Deno.readTextFile(join(ROOT, "docs/storage.md"));
  const block = /^```ini\n([\s\S]*?)^```$/m.exec(docs)?.[1];
  assert.ok(block, "docs/storage.md has an ini block");
  const parts = block.split(/^# ~\/\.aws\/(?:credentials|config)\n/m);
  assert.equal(parts.length, 3, block);
  // The docs show scripts/ceph.sh's defaults; a store elsewhere (tests/_s3.ts) gets its own.
  const local = (text: string) =>
    text.replace("http://127.0.0.1:7480", endpoint.endpoint).replace("us-east-1", endpoint.region)
      .replace("ckpt-local-access-key", endpoint.credentials.accessKeyId)
      .replace("ckpt-local-secret-key", endpoint.credentials.secretAccessKey);
  return { ".aws/credentials": local(parts[1]!), ".aws/config": local(parts[2]!) };
}

s3Test(
  "a checkpoint saved to the RGW with only docs/storage.md's ~/.aws files and AWS_PROFILE loads bit for bit",
  async (bucket) => {
    await withFiles(await documentedFiles(bucket.endpoint), async (home) => {
      const { code, text } = await runWith(
        { HOME: home, AWS_PROFILE: "rgw" },
        `import { loadCheckpoint, saveCheckpoint } from "./mod.ts";
         const data = new Float32Array(100_000).map((_, i) => Math.sin(i));
         const url = "s3://${bucket.name}/profile-test/a.ckpt";
         const saved = await saveCheckpoint(url, { metadata: { step: 7 }, tensors: [{ name: "w", dtype: "float32", shape: [100_000], data }] });
         const back = await loadCheckpoint(url, { sha256: saved.digest });
         const same = new Uint8Array(back.tensors[0].data.buffer).every((b, i) => b === new Uint8Array(data.buffer)[i]);
         console.log(back.metadata.step, same);`,
      );
      assert.equal(code, 0, text);
      assert.equal(text.trim(), "7 true");
    });
  },
);
