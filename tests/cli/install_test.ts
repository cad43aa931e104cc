// `deno task install-cli` as a user runs it: the ckpt command it writes works from a directory
// outside the repository with no deno on PATH (as when Deno came from npx), and prints nothing
// but ckpt's own output.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { launcherScript } from "../../src/cli/install.ts";
import { tempDir, writeSample } from "./_run.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const decode = (b: Uint8Array) => new TextDecoder().decode(b);

/** How a user's machine reaches the npm registry (a proxy and its certificates), kept in the bare environment. */
const NETWORK_ENV = [
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "DENO_CERT",
  "DENO_TLS_CA_STORE",
  "HTTPS_PROXY",
  "HTTP_PROXY",
  "NO_PROXY",
];

/**
 * A bare environment: HOME (Deno's cache lives under it), a PATH without deno on it, and how this
 * machine reaches the registry (with an empty cache the command downloads its packages: a bare
 * environment without the certificates a proxy needs failed that with UnknownIssuer, which no
 * user with those settings would see).
 */
function bareEnv(): Record<string, string> {
  const env: Record<string, string> = { HOME: Deno.env.get("HOME") ?? "/root", PATH: "/usr/bin:/bin", NO_COLOR: "1" };
  for (const name of NETWORK_ENV) {
    const value = Deno.env.get(name);
    if (value !== undefined) env[name] = value;
  }
  return env;
}

Deno.test("deno task install-cli writes a ckpt command that works from any directory without deno on PATH", async () => {
  await using t = await tempDir();
  // Exactly what the task runs (deno.json "install-cli").
  const task = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)).tasks["install-cli"] as string;
  assert.match(task, /src\/cli\/install\.ts$/);
  const install = await new Deno.Command(Deno.execPath(), {
    args: [...task.split(" ").slice(1), "--root", `${t.dir}/root`],
    cwd: ROOT,
  }).output();
  assert.equal(install.code, 0, decode(install.stderr));
  assert.match(decode(install.stdout), /^installed .*\/root\/bin\/ckpt/);
  const command = `${t.dir}/root/bin/ckpt`;

  const outside = `${t.dir}/elsewhere`;
  await Deno.mkdir(outside);
  await writeSample(`${outside}/a.ckpt`);
  const run = await new Deno.Command(command, {
    args: ["verify", "a.ckpt"],
    cwd: outside,
    clearEnv: true,
    env: bareEnv(),
  })
    .output();
  assert.equal(run.code, 0, decode(run.stderr));
  assert.match(decode(run.stdout), /^ok a\.ckpt: binary, step 100, 4 tensors/);
  assert.equal(decode(run.stderr), "", "nothing but ckpt's output");
  const which = await new Deno.Command("sh", {
    args: ["-c", "command -v deno || echo none"],
    clearEnv: true,
    env: bareEnv(),
  })
    .output();
  assert.equal(decode(which.stdout).trim(), "none", "the test really ran without deno on PATH");
});

Deno.test("the ckpt command says what to do when the Deno binary it was written for is gone", async () => {
  await using t = await tempDir();
  const command = `${t.dir}/ckpt`;
  await Deno.writeTextFile(command, launcherScript({ deno: `${t.dir}/gone/deno`, checkout: ROOT }), { mode: 0o755 });
  const run = await new Deno.Command(command, { args: ["--version"], clearEnv: true, env: bareEnv() }).output();
  assert.equal(run.code, 127);
  assert.match(
    decode(run.stderr),
    /^ckpt: the Deno binary .*\/gone\/deno is gone; run "deno task install-cli" in .* again\n$/,
  );
});

Deno.test("a ckpt command installed by a Deno from npx keeps working after the npx cache is cleared", async () => {
  await using t = await tempDir();
  // A Deno binary where npx leaves it: ~/.npm/_npx/<hash>/node_modules/deno/deno.
  const npx = `${t.dir}/home/.npm/_npx/0123456789abcdef`;
  const fromNpx = `${npx}/node_modules/deno/deno`;
  await Deno.mkdir(`${npx}/node_modules/deno`, { recursive: true });
  await Deno.link(Deno.execPath(), fromNpx).catch(() => Deno.copyFile(Deno.execPath(), fromNpx));
  const task = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)).tasks["install-cli"] as string;
  const install = await new Deno.Command(fromNpx, {
    args: [...task.split(" ").slice(1), "--root", `${t.dir}/root`],
    cwd: ROOT,
  }).output();
  assert.equal(install.code, 0, decode(install.stderr));
  const script = await Deno.readTextFile(`${t.dir}/root/bin/ckpt`);
  assert.doesNotMatch(script, /_npx/, "the command does not point into the npx cache");
  assert.match(script, new RegExp(`deno='${t.dir}/root/lib/ckpt/deno-${Deno.version.deno.replaceAll(".", "\\.")}'`));

  await Deno.remove(`${t.dir}/home/.npm/_npx`, { recursive: true }); // what `npm cache clean` and npx's pruning do
  await writeSample(`${t.dir}/a.ckpt`);
  const run = await new Deno.Command(`${t.dir}/root/bin/ckpt`, {
    args: ["verify", "a.ckpt"],
    cwd: t.dir,
    clearEnv: true,
    env: bareEnv(),
  }).output();
  assert.equal(run.code, 0, decode(run.stderr));
  assert.match(decode(run.stdout), /^ok a\.ckpt: binary, step 100, 4 tensors/);

  // Installing again (a newer checkout, the same Deno) replaces the kept binary in place.
  const again = await new Deno.Command(Deno.execPath(), {
    args: [...task.split(" ").slice(1), "--root", `${t.dir}/root`],
    cwd: ROOT,
  }).output();
  assert.equal(again.code, 0, decode(again.stderr));
});
