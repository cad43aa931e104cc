/**
 * The Python environment of ckpt's peers (Orbax, JAX, PyTorch with DCP, safetensors, TensorFlow,
 * numpy), built once from local wheels by `scripts/peers_venv.sh` and reused: its python and the
 * versions installed, or why there is none. Used by the benches that run the peers.
 *
 * @module
 */

/** The peers' python and a line naming their versions, or the reason the environment is missing. */
export type PeersEnv = { python: string; versions: string } | { error: string };

/**
 * Runs `scripts/peers_venv.sh` (which builds the environment the first time, about a minute,
 * and reuses it after) and reads its answer.
 *
 * @example
 * ```ts ignore
 * import { peersPython } from "./_peers_env.ts";
 * const env = await peersPython();
 * if ("python" in env) console.log(env.versions);
 * ```
 */
export async function peersPython(): Promise<PeersEnv> {
  const script = new URL("../scripts/peers_venv.sh", import.meta.url).pathname;
  const o = await new Deno.Command("bash", { args: [script], stdout: "piped", stderr: "piped" }).output()
    .catch((e) => ({ success: false, stdout: new Uint8Array(), stderr: new TextEncoder().encode(String(e)) }));
  const stdout = new TextDecoder().decode(o.stdout).trim();
  const stderr = new TextDecoder().decode(o.stderr).trim();
  if (!o.success) return { error: `no peers' environment (scripts/peers_venv.sh failed):\n${stderr}` };
  const versions = stderr.split("\n").findLast((l) => l.startsWith("peers_venv: ") && l.includes(" torch "));
  return {
    python: stdout.split("\n").at(-1)!,
    versions: versions?.replace("peers_venv: ", "peers: ") ?? "peers: versions unknown",
  };
}
