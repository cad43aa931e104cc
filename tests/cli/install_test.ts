import assert from "node:assert/strict";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { tempDir, writeSample } from "./_run.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

Deno.test("deno install puts a working ckpt command in the install root, as docs/cli.md says", async () => {
  await using t = await tempDir();
  const install = await new Deno.Command(Deno.execPath(), {
    args: [
      "install",
      "-g",
      "-f",
      "--root",
      t.dir,
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "-n",
      "ckpt",
      "--config",
      "deno.json",
      "src/cli/main.ts",
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(install.code, 0, new TextDecoder().decode(install.stderr));
  const shim = `${t.dir}/bin/ckpt`;
  assert.ok((await Deno.stat(shim)).isFile);
  await writeSample(`${t.dir}/a.ckpt`);
  // The shim runs `deno` from PATH, as on a user's machine.
  const env = { PATH: `${dirname(Deno.execPath())}:${Deno.env.get("PATH") ?? ""}`, NO_COLOR: "1" };
  const run = await new Deno.Command(shim, {
    args: ["verify", "a.ckpt"],
    cwd: t.dir,
    env,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const out = new TextDecoder().decode(run.stdout);
  assert.equal(run.code, 0, new TextDecoder().decode(run.stderr));
  assert.match(out, /^ok a\.ckpt: binary, step 100, 4 tensors/);
});
