import assert from "node:assert/strict";
import { ChecksumMismatchError, loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { safetensorsCodec } from "../../src/interop/safetensors.ts";
import { MAX_SIDECAR_BYTES, readSha256Sidecar, writeSha256Sidecar } from "../../src/interop/sidecar.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import { ObjectNotFoundError } from "../../src/storage/types.ts";
import { s3Test } from "../_s3.ts";
import { serveDirectory } from "../storage/_http_server.ts";

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

Deno.test("sha256 sidecar beside an object in a store: written with the object's file name, read back, capped", async () => {
  const store = new MemoryStore({ name: "run" });
  const object = { store, key: "models/v1/m.ckpt" };
  await assert.rejects(readSha256Sidecar(object), ObjectNotFoundError);
  const { sha256 } = await saveCheckpoint(object, CKPT, { sha256sum: true });
  assert.equal(await writeSha256Sidecar(object, sha256!), "memory://run/models/v1/m.ckpt.sha256");
  const line = new TextDecoder().decode(
    new Uint8Array(await new Response((await store.get("models/v1/m.ckpt.sha256")).body).arrayBuffer()),
  );
  assert.equal(line, `${sha256}  m.ckpt\n`);
  assert.equal(await readSha256Sidecar(object), sha256);
  // A changed object is caught through the sidecar.
  await saveCheckpoint(object, { ...CKPT, metadata: { step: 2 } });
  await assert.rejects(
    async () => await loadCheckpoint(object, { sha256: await readSha256Sidecar(object) }),
    ChecksumMismatchError,
  );
  // A sidecar far larger than any sha256sum file is refused before it is read whole.
  await store.put("big.ckpt.sha256", new Uint8Array(MAX_SIDECAR_BYTES + 1).fill(0x20));
  await assert.rejects(readSha256Sidecar({ store, key: "big.ckpt" }), RangeError);
  await store.put("bin.ckpt.sha256", new Uint8Array([0xff, 0xfe]));
  await assert.rejects(readSha256Sidecar({ store, key: "bin.ckpt" }), /not UTF-8 text/);
});

Deno.test("sha256 sidecar over http:// is read beside the file; writing there is refused", async () => {
  const dir = await Deno.makeTempDir();
  const server = serveDirectory(dir);
  try {
    const { sha256 } = await saveCheckpoint(`${dir}/m.ckpt`, CKPT, { sha256sum: true });
    await writeSha256Sidecar(`${dir}/m.ckpt`, sha256!);
    assert.equal(await readSha256Sidecar(`${server.url}m.ckpt`), sha256);
    assert.deepEqual(server.log, ["GET /m.ckpt.sha256"]);
    await assert.rejects(writeSha256Sidecar(`${server.url}m.ckpt`, sha256!), /read-only/);
    await assert.rejects(readSha256Sidecar(`${server.url}none.ckpt`), ObjectNotFoundError);
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});

s3Test("sha256 sidecar on s3:// beside the checkpoint, as sha256sum prints it", async (b) => {
  const storage = {
    s3: { endpoint: b.endpoint.endpoint, region: b.endpoint.region, credentials: b.endpoint.credentials },
  };
  const address = `s3://${b.name}/run/with space.ckpt`;
  const { sha256 } = await saveCheckpoint(address, CKPT, { sha256sum: true, storage });
  assert.equal(await writeSha256Sidecar(address, sha256!, { storage }), `s3://${b.name}/run/with space.ckpt.sha256`);
  const got = await b.store().get("run/with space.ckpt.sha256");
  assert.equal(await new Response(got.body).text(), `${sha256}  with space.ckpt\n`);
  assert.equal(await readSha256Sidecar(address, { storage }), sha256);
  await loadCheckpoint(address, { sha256: await readSha256Sidecar(address, { storage }), storage });
});
