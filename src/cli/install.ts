/**
 * `deno task install-cli`: writes a `ckpt` command that works from any directory, whether or not
 * `deno` is on `PATH` (as when Deno came from `npx`). The command is a small shell script that
 * runs the Deno binary that wrote it on `src/cli/main.ts` of this checkout, with the checkout's
 * `deno.json` and lock file, and with Deno's own messages turned off (`--quiet`), so standard
 * error carries only what `ckpt` says. A Deno binary inside npm's npx cache (`~/.npm/_npx/…`),
 * which npm may prune at any time, is first given a stable home beside the command
 * (`ROOT/lib/ckpt/deno-VERSION`, a hard link where it can be, else a copy), and the command runs
 * that one: clearing the npx cache leaves it working. (`deno compile` would make one binary, but
 * it downloads its runtime from dl.deno.land, which a machine with only npm cannot reach.)
 *
 *   deno task install-cli                  # writes ~/.deno/bin/ckpt (or $DENO_INSTALL_ROOT/bin)
 *   deno task install-cli --root ~/.local  # writes ~/.local/bin/ckpt
 *
 * @module
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** Options for {@linkcode launcherScript}. */
export interface LauncherOptions {
  /**
   * The Deno binary the command runs.
   *
   * @default {Deno.execPath()}
   */
  deno?: string;
  /**
   * The checkout whose `src/cli/main.ts` and `deno.json` the command runs.
   *
   * @default {the checkout this file belongs to}
   */
  checkout?: string;
}

/** The checkout this file belongs to. */
function checkoutDir(): string {
  return fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");
}

/** A string as one shell word, single-quoted. */
function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * The text of the `ckpt` launcher: a POSIX shell script that runs `deno` (an absolute path) on
 * the checkout's CLI with only the permissions it needs. If that binary is gone (an `npx` cache
 * cleared, say), it says so and how to fix it rather than failing with `exec: not found`.
 *
 * @param options The Deno binary and the checkout.
 * @returns The script, starting with `#!/bin/sh`.
 *
 * @example
 * ```ts
 * import { launcherScript } from "./install.ts";
 * import assert from "node:assert/strict";
 * const script = launcherScript({ deno: "/opt/deno/deno", checkout: "/src/ckpt" });
 * assert.match(script, /^#!\/bin\/sh\n/);
 * assert.match(script, /exec "\$deno" run --quiet .* '\/src\/ckpt\/src\/cli\/main\.ts' "\$@"/);
 * ```
 */
export function launcherScript(options: LauncherOptions = {}): string {
  const deno = options.deno ?? Deno.execPath();
  const checkout = options.checkout ?? checkoutDir();
  return [
    "#!/bin/sh",
    `# The ckpt command, written by \`deno task install-cli\` in ${checkout}.`,
    "# It runs the Deno binary that wrote it (or its kept copy), so it needs no deno on PATH; keep the checkout where it is.",
    `deno=${shellQuote(deno)}`,
    'if [ ! -x "$deno" ]; then',
    `  echo "ckpt: the Deno binary $deno is gone; run \\"deno task install-cli\\" in ${
      checkout.replaceAll('"', '\\"').replaceAll("$", "\\$").replaceAll("`", "\\`")
    } again" >&2`,
    "  exit 127",
    "fi",
    `exec "$deno" run --quiet --no-prompt --allow-read --allow-write --allow-env --allow-net --config ${
      shellQuote(join(checkout, "deno.json"))
    } ${shellQuote(join(checkout, "src/cli/main.ts"))} "$@"`,
    "",
  ].join("\n");
}

/** Whether `path` is inside npm's npx cache, whose packages npm may delete at any time. */
export function inNpxCache(path: string): boolean {
  return /[/\\]_npx[/\\]/.test(path);
}

/**
 * The Deno binary the command should run: `deno` itself, or, when it lives in npm's npx cache,
 * a hard link to it (a copy across file systems) at `ROOT/lib/ckpt/deno-VERSION`, made
 * atomically, which outlives the cache.
 *
 * @param deno the Deno binary running now
 * @param root the install root (`~/.deno`), whose `bin/` gets the command
 * @returns the absolute path of the binary to run
 *
 * @example
 * ```ts
 * import { stableDeno } from "./install.ts";
 * import assert from "node:assert/strict";
 * const root = await Deno.makeTempDir();
 * assert.equal(await stableDeno("/usr/local/bin/deno", root), "/usr/local/bin/deno");
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function stableDeno(deno: string, root: string): Promise<string> {
  const real = await Deno.realPath(deno).catch(() => deno);
  if (!inNpxCache(real)) return real;
  const dir = join(root, "lib", "ckpt");
  await Deno.mkdir(dir, { recursive: true });
  const home = join(dir, `deno-${Deno.version.deno}`);
  const tmp = `${home}.tmp-${Deno.pid}`;
  await Deno.remove(tmp).catch(() => {});
  try {
    await Deno.link(real, tmp); // no second 100 MB where the cache is on the same file system
  } catch {
    await Deno.copyFile(real, tmp);
  }
  await Deno.chmod(tmp, 0o755);
  await Deno.rename(tmp, home);
  return home;
}

const USAGE = `Usage: deno task install-cli [--root DIR] [--name NAME]

Writes a ckpt command into DIR/bin (default: $DENO_INSTALL_ROOT, or ~/.deno) that runs this
checkout's CLI with the Deno binary running now, so it works from any directory, without deno
on PATH. A Deno binary in npm's npx cache is kept in DIR/lib/ckpt first, so that clearing the
cache does not break the command. Add DIR/bin to PATH once.`;

async function main(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        root: { type: "string" },
        name: { type: "string", default: "ckpt" },
        help: { type: "boolean", short: "h", default: false },
      },
    }));
  } catch (e) {
    console.error(`install-cli: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (!/^[A-Za-z0-9._-]+$/.test(values.name)) {
    console.error(`install-cli: --name must be a plain file name, got ${JSON.stringify(values.name)}`);
    return 2;
  }
  const home = Deno.env.get("HOME");
  const root = values.root ?? Deno.env.get("DENO_INSTALL_ROOT") ?? (home ? join(home, ".deno") : undefined);
  if (!root) {
    console.error("install-cli: no --root given and neither DENO_INSTALL_ROOT nor HOME is set");
    return 2;
  }
  const bin = join(root, "bin");
  const path = join(bin, values.name);
  await Deno.mkdir(bin, { recursive: true });
  const tmp = `${path}.tmp-${Deno.pid}`;
  const deno = await stableDeno(Deno.execPath(), root);
  await Deno.writeTextFile(tmp, launcherScript({ deno }), { mode: 0o755 });
  await Deno.chmod(tmp, 0o755);
  await Deno.rename(tmp, path);
  const onPath = (Deno.env.get("PATH") ?? "").split(":").includes(bin);
  console.log(`installed ${path} (runs ${deno} on ${checkoutDir()})`);
  if (!onPath) console.log(`add ${bin} to PATH, e.g. in ~/.profile: export PATH="${bin}:$PATH"`);
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
