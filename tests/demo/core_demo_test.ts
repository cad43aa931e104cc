// `deno task demo`, run as a user runs it: its table's digest column is labelled for what it
// is (the stream digest `ckpt inspect` prints), and is not what `sha256sum` prints.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { verifyCheckpoint } from "../../mod.ts";

const DEMO = new URL("../../demo/core_demo.ts", import.meta.url).pathname;

Deno.test("the core demo labels its digest column as the stream digest, which is not the file's sha256sum", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--quiet", "--allow-read", "--allow-write", "--allow-run", "--allow-env", DEMO, "--dir", dir],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, text + new TextDecoder().decode(out.stderr));
    const lines = text.split("\n");
    const header = lines.find((l) => l.startsWith("file "));
    assert.match(header ?? "", /\bstream digest\b/);
    assert.doesNotMatch(header ?? "", /\bsha256\b/);
    assert.match(
      text,
      /stream digest: the SHA-256 ckpt stores in the file .*\n`sha256sum FILE` hashes the file's bytes/,
    );
    const row = lines.find((l) => l.startsWith("sample.binary.ckpt "));
    const shown = row?.split(/\s+/)[4];
    const path = join(dir, "sample.binary.ckpt");
    const { digest } = await verifyCheckpoint(path);
    assert.ok(digest?.startsWith(shown!), `${shown} is the start of the stream digest ${digest}`);
    const sha256sum = createHash("sha256").update(await Deno.readFile(path)).digest("hex");
    assert.ok(!sha256sum.startsWith(shown!), "the column is not the file's sha256sum");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
