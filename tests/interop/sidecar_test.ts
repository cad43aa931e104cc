import assert from "node:assert/strict";
import { ChecksumMismatchError, loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { safetensorsCodec } from "../../src/interop/safetensors.ts";
import { readSha256Sidecar, writeSha256Sidecar } from "../../src/interop/sidecar.ts";

const CKPT = {
  metadata: { step: 1 },
  tensors: [{ name: "w", dtype: "float32" as const, shape: [3], data: new Float32Array([1, 2, 3]) }],
};

async function sha256sum(args: string[], cwd: string): Promise<{ code: number; out: string }> {
  const r = await new Deno.Command("sha256sum", { args, cwd, stdout: "piped", stderr: "piped" }).output();
  const d = new TextDecoder();
  return { code: r.code, out: d.decode(r.stdout) + d.decode(r.stderr) };
}

Deno.test("sha256 sidecar is exactly the line sha256sum prints, and sha256sum -c accepts it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    for (
      const name of ["model.safetensors", "with space.ckpt", "back\\slash.ckpt", "new\nline.ckpt", "cr\rname.ckpt"]
    ) {
      const path = `${dir}/${name}`;
      const { sha256 } = await saveCheckpoint(path, CKPT, { codec: safetensorsCodec, sha256sum: true });
      const sidecar = await writeSha256Sidecar(path, sha256!);
      assert.equal(sidecar, `${path}.sha256`);
      const printed = await sha256sum([name], dir);
      assert.equal(printed.code, 0);
      assert.equal(await Deno.readTextFile(sidecar), printed.out, JSON.stringify(name));
      const check = await sha256sum(["-c", `${name}.sha256`], dir);
      assert.equal(check.code, 0, check.out);
      assert.match(check.out, /: OK\n$/);
      assert.equal(await readSha256Sidecar(path), sha256);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sha256 sidecar catches a changed file, with sha256sum -c and with loadCheckpoint", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/m.ckpt`;
    const { sha256 } = await saveCheckpoint(path, CKPT, { sha256sum: true });
    await writeSha256Sidecar(path, sha256!);
    // Rewrite with other content (still a valid checkpoint): only the sidecar can tell.
    await saveCheckpoint(path, { ...CKPT, metadata: { step: 2 } });
    const check = await sha256sum(["-c", "m.ckpt.sha256"], dir);
    assert.equal(check.code, 1);
    assert.match(check.out, /m\.ckpt: FAILED/);
    await assert.rejects(
      async () => await loadCheckpoint(path, { sha256: await readSha256Sidecar(path) }),
      (e: Error) => e instanceof ChecksumMismatchError && e.expected === sha256,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sha256 sidecar refuses bad digests and sidecars that name another file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(() => writeSha256Sidecar(`${dir}/a`, "abc"), TypeError);
    await Deno.writeTextFile(`${dir}/a.sha256`, `${"0".repeat(64)}  b\n`);
    await assert.rejects(
      () => readSha256Sidecar(`${dir}/a`),
      (e: Error) => e instanceof SyntaxError && e.message.includes(`no "<sha256>  a" line`),
    );
    await Deno.writeTextFile(`${dir}/a.sha256`, `${"A".repeat(64)} *a\n`);
    assert.equal(await readSha256Sidecar(`${dir}/a`), "a".repeat(64));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
