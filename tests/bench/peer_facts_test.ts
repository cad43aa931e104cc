// bench/peer_facts.ts end to end: the real peers (from scripts/peers_venv.sh's environment) save
// under strace, a bit is flipped, their loads are asked. Needs the local wheels and strace; with
// CI (where .ci/run builds the environment) a missing one fails the test, elsewhere it skips.
import assert from "node:assert/strict";
import { peersPython } from "../../bench/_peers_env.ts";
import { IN_CI as inCI } from "../_ci.ts";

const strace = await new Deno.Command("strace", { args: ["-V"], stdout: "null", stderr: "null" }).output()
  .then((o) => o.success, () => false);
const env = strace ? await peersPython() : { error: "strace is not installed (apt-get install strace)" };
const missing = "error" in env ? env.error : undefined;
if (missing && !inCI) console.log(`skipping the peer facts test: ${missing}`);

Deno.test({
  name: "peer_facts reports each peer's flushes and what its load does with a flipped bit",
  ignore: missing !== undefined && !inCI,
  async fn() {
    assert.equal(missing, undefined, missing);
    const script = new URL("../../bench/peer_facts.ts", import.meta.url).pathname;
    const o = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", script, "--mib", "24"],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(o.stdout);
    assert.ok(o.success, new TextDecoder().decode(o.stderr));
    const row = (start: string) => {
      const line = out.split("\n").find((l) => l.startsWith(`| ${start} |`));
      assert.ok(line, `no row for ${start} in:\n${out}`);
      return line.split(" | ").map((c) => c.replace(/^\| |\s\|$/g, ""));
    };
    // ckpt: its file flushed, renamed into place, the parent flushed; a flipped bit is caught.
    const ckpt = row("ckpt `saveCheckpoint` / `loadCheckpoint`");
    assert.deepEqual(ckpt.slice(1, 5), ["ckpt.ckpt", "its parent", "yes", "yes"]);
    assert.match(ckpt[5]!, /ChecksumMismatchError: Checksum mismatch for tensor "layer0\/kernel"/);
    // safetensors made durable by hand: the same flushes.
    assert.deepEqual(row("safetensors `save_file` + fsync, rename, directory fsync (by hand)").slice(1, 5), [
      "safetensors-durable",
      "its parent",
      "yes",
      "yes",
    ]);
    // The peers' own saves flush nothing (safetensors, TensorFlow) or never the parent.
    assert.deepEqual(row("safetensors `save_file` / `load_file`").slice(1, 3), ["none", "none"]);
    assert.deepEqual(row("`tf.train.Checkpoint` write / read").slice(1, 3), ["none", "none"]);
    assert.equal(row("`dcp.save`")[4], "**no**");
    assert.equal(row("Orbax `StandardCheckpointer`")[4], "**no**");
    // A flipped bit: TensorFlow's CRC catches it; the others hand out wrong values.
    assert.match(row("`tf.train.Checkpoint` write / read")[5]!, /^error: DataLossError/);
    for (const name of ["Orbax `StandardCheckpointer`", "`dcp.save`", "safetensors `save_file` / `load_file`"]) {
      assert.match(row(name)[5]!, /^\*\*wrong values, no error\*\*/, name);
    }
  },
});
