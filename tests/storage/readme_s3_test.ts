// The README's "Object storage" example, run verbatim (from the repository root, where its
// `./mod.ts` import resolves) against the S3 endpoint the other S3 tests use, twice: the second
// run resumes the manager from the first run's checkpoint.
import assert from "node:assert/strict";
import { s3Endpoint, s3Fetch, s3Test } from "../_s3.ts";

const ROOT = new URL("../../", import.meta.url);

s3Test("the README's object storage example runs verbatim and resumes from its own checkpoint", async () => {
  const readme = await Deno.readTextFile(new URL("README.md", ROOT));
  const section = readme.slice(readme.indexOf("## Object storage"));
  // `ts ignore`: `deno test --doc` must not run it (it needs the object store); this test does.
  const code = section.match(/```ts(?: ignore)?\n([\s\S]*?)```/)?.[1];
  assert.ok(code, "the section has a ts block");
  // The example uses the bucket scripts/ceph.sh makes; make it where another endpoint lacks it.
  const made = await s3Fetch("/ckpt", { method: "PUT" });
  await made.body?.cancel();
  const file = new URL(`.readme-s3-${crypto.randomUUID()}.ts`, ROOT);
  await Deno.writeTextFile(file, code);
  try {
    const env = {
      AWS_ENDPOINT_URL: s3Endpoint!.endpoint,
      AWS_REGION: s3Endpoint!.region,
      AWS_ACCESS_KEY_ID: s3Endpoint!.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3Endpoint!.credentials.secretAccessKey,
      NO_COLOR: "1",
    };
    const run = async () => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", file.pathname],
        cwd: ROOT.pathname,
        env,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, text);
      return text;
    };
    const first = Number((await run()).split(" ")[0]);
    const second = await run();
    assert.match(
      second,
      new RegExp(`^${first + 1} Float32Array\\(4\\) \\[ 1, 2, 3, 4 \\] Float32Array\\(4\\) \\[ 1, 2, 3, 4 \\]\\n$`),
    );
  } finally {
    await Deno.remove(file);
  }
});
