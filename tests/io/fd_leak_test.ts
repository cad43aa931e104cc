// Readers close what they open when they refuse an input: a long fuzz run (2026-12-03) stopped
// after an hour with EMFILE, holding 20 000 descriptors of files it had read and deleted. Each
// case runs 50 refused reads in its own process (tests/io/_fd_child.ts) and compares the file
// descriptors it holds before and after.
import assert from "node:assert/strict";

const CHILD = new URL("./_fd_child.ts", import.meta.url).pathname;

async function leaked(op: string): Promise<{ leaked: number; errors: string[] }> {
  const out = await new Deno.Command(Deno.execPath(), { args: ["run", "-A", CHILD, op], stderr: "piped" }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const r = JSON.parse(new TextDecoder().decode(out.stdout).trim());
  return { leaked: r.after - r.before, errors: r.errors };
}

const linux = Deno.build.os === "linux"; // /proc/self/fd

for (
  const [op, error] of [
    ["unrecognised", /^SyntaxError: Cannot decode checkpoint: unrecognised format at offset 0 /],
    [
      "gzip-unrecognised",
      /^SyntaxError: Cannot decode checkpoint: unrecognised format at offset 0 of the gzip content/,
    ],
    ["tfjs-trailing", /^SyntaxError: Cannot decode TF.js artifacts: shards w.bin hold bytes after the last weight/],
    ["tfjs-bool", /^SyntaxError: .*bool/],
  ] as const
) {
  Deno.test({
    name: `a refused read closes its files: ${op}, 50 times, leaves no descriptor open`,
    ignore: !linux,
    async fn() {
      const r = await leaked(op);
      assert.equal(r.errors.length, 1, r.errors.join("\n"));
      assert.match(r.errors[0]!, error);
      assert.equal(r.leaked, 0, `${r.leaked} file descriptors left open`);
    },
  });
}
