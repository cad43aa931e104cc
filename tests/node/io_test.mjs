// Saving, loading, verifying and decoding files by path under Node, from the installed package:
// the same bytes as Deno writes for the same checkpoint, the same errors for the same corruption,
// and a failed save that leaves the earlier file whole.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import process from "node:process";
import {
  ChecksumMismatchError,
  decodeCheckpoint,
  loadCheckpoint,
  readCheckpointIndex,
  saveCheckpoint,
  sniffCheckpoint,
  verifyCheckpoint,
} from "@ckpt/ckpt";
import { CORRUPTIONS, FIXTURE_FORMATS, fixtureCheckpoint } from "./_fixture.mjs";
import { withTempDir } from "./_util.mjs";

const DENO = process.env.CKPT_DENO_FIXTURES ?? "";

function bytesOf(a) {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

for (const [codec, compression] of FIXTURE_FORMATS) {
  test(`${codec}/${compression}: Node writes Deno's bytes (gzip: inside), and reads them back bit for bit`, async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, "x.ckpt");
      const saved = await saveCheckpoint(path, fixtureCheckpoint(), { codec, compression });
      const mine = await readFile(path);
      const deno = await readFile(join(DENO, `fixture.${codec}.${compression}.ckpt`));
      // gzip: each runtime's CompressionStream deflates its own way (both valid); what they
      // compress is byte-identical. Everything else is the same file.
      const inner = (b) => compression === "gzip" ? gunzipSync(b) : b;
      assert.ok(
        Buffer.compare(inner(mine), inner(deno)) === 0,
        `${codec}/${compression}: Node's file differs from Deno's`,
      );
      const back = await loadCheckpoint(path, { sha256: saved.digest });
      const input = fixtureCheckpoint();
      assert.deepEqual(back.metadata, input.metadata);
      for (const [i, t] of input.tensors.entries()) {
        assert.equal(back.tensors[i].name, t.name);
        assert.deepEqual(bytesOf(back.tensors[i].data), bytesOf(t.data), t.name);
      }
      // Deno's file loads under Node to the same tensors.
      const fromDeno = await loadCheckpoint(join(DENO, `fixture.${codec}.${compression}.ckpt`));
      assert.deepEqual(fromDeno.tensors.map((t) => bytesOf(t.data)), back.tensors.map((t) => bytesOf(t.data)));
    });
  });
}

for (const [what, corrupt] of Object.entries(CORRUPTIONS)) {
  test(`${what}: refused with Deno's error class and message`, async () => {
    const deno = JSON.parse(await readFile(join(DENO, "errors.json"), "utf8"))[what];
    const plain = await readFile(join(DENO, "fixture.binary.none.ckpt"));
    await withTempDir(async (dir) => {
      const path = join(dir, "bad.ckpt");
      await writeFile(path, corrupt(new Uint8Array(plain)));
      for (const source of [new Blob([corrupt(new Uint8Array(plain))]), path]) {
        const err = await loadCheckpoint(source).then(() => undefined, (e) => e);
        assert.ok(err, `${what}: loaded`);
        assert.equal(err.constructor.name, deno.class);
        assert.equal(err.name, deno.name);
        if (typeof source !== "string") assert.equal(err.message, deno.message);
      }
    });
  });
}

test("verifyCheckpoint and the index work on a file path", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "x.ckpt");
    await saveCheckpoint(path, fixtureCheckpoint());
    const v = await verifyCheckpoint(path);
    assert.equal(v.tensors.length, 6);
    const index = await readCheckpointIndex(path);
    assert.ok(index, "a binary file has an index");
    const only = await loadCheckpoint(path, { only: ["dense/bias"] });
    assert.deepEqual(only.tensors.map((t) => t.name), ["dense/bias"]);
    const sniff = await sniffCheckpoint(path);
    assert.equal(sniff.compression, "none");
    await sniff.bytes.cancel();
    const names = [];
    for await (const r of decodeCheckpoint(path)) if (r.type === "tensor") names.push(r.tensor.name);
    assert.equal(names.length, 6);
  });
});

test("a corrupt tensor in a file is a ChecksumMismatchError naming it", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "x.ckpt");
    await saveCheckpoint(path, fixtureCheckpoint());
    const b = await readFile(path);
    b[b.length >> 1] ^= 1;
    await writeFile(path, b);
    await assert.rejects(
      verifyCheckpoint(path),
      (e) => e instanceof ChecksumMismatchError && /dense\/kernel/.test(e.message),
    );
  });
});

test("a save that fails midway leaves the earlier file whole and no temporary file", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "x.ckpt");
    await saveCheckpoint(path, fixtureCheckpoint());
    const before = await readFile(path);
    async function* failing() {
      yield fixtureCheckpoint().tensors[0];
      throw new Error("the producer failed");
    }
    await assert.rejects(saveCheckpoint(path, { metadata: { step: 2 }, tensors: failing() }), /the producer failed/);
    assert.ok(Buffer.compare(await readFile(path), before) === 0);
    assert.deepEqual(await readdir(dir), ["x.ckpt"]);
  });
});
