// bench/shard_dcp.ts end to end at a tiny size, so that it cannot rot: ckpt's writers and readers
// and PyTorch DCP's gloo ranks (from scripts/peers_venv.sh's environment) as real processes, both
// resharding scenarios (between them a save and a load on 2 ranks) and both methods with a row. Needs the local wheels: where the environment is missing the
// test skips, and in CI it fails (componentTest).
import assert from "node:assert/strict";
import { peersPython } from "../../bench/_peers_env.ts";
import { componentTest } from "../_ci.ts";

const env = await peersPython();

componentTest({
  name: "shard_dcp runs ckpt and DCP in every scenario and prints each row with its ratio",
  async fn() {
    const script = new URL("../../bench/shard_dcp.ts", import.meta.url).pathname;
    const o = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", script, "--mib", "2", "--trials", "1", "--scenarios", "2:1,1:2"],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(o.stdout);
    assert.ok(o.success, new TextDecoder().decode(o.stderr));
    for (const scenario of ["2 → 1", "1 → 2"]) {
      for (const [method, load] of [["ckpt", "(verified)"], ["DCP", "(no verify: no checksum)"]] as const) {
        const line = out.split("\n").find((l) => l.startsWith(`| ${scenario} | ${method} `));
        assert.ok(line, `no ${method} row for ${scenario} in:\n${out}`);
        const cells = line.split(" | ");
        assert.match(cells[2]!, /^\d+ MiB\/s$/, line);
        assert.match(cells[3]!, /^\d+\.\d\d×$/, line);
        assert.ok(cells[4]!.endsWith(load), line);
        if (method === "DCP") assert.equal(cells[3], "1.00×", line);
        if (method === "DCP") assert.equal(cells[6], "", line);
        else assert.match(cells[6]!, /^save (\*\*met\*\*|not met), load (\*\*met\*\*|not met)$/, line);
        // Memory of the worst process, against its share.
        assert.match(cells[7]!, /^\d+ of \d+ MiB \(share \d+ MiB\)$/, line);
      }
    }
    assert.match(out, /^load average at start: /m);
    assert.match(out, /^\| physical limit of a save by 2 \| max\(raw durable write /m);
    assert.match(out, /^\| physical limit of a load \+ verify by 1 \| max\(raw read into fresh memory /m);
    assert.match(out, /DCP stores no checksum and verifies nothing/);
  },
}, "error" in env ? env.error : undefined);
