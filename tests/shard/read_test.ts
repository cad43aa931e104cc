import assert from "node:assert/strict";
import { ChecksumMismatchError, loadCheckpoint, MemoryStore } from "../../mod.ts";
import type { GetOptions, GetResult, ObjectStore } from "../../src/storage/types.ts";
import { readShardManifest, readShards, saveSharded, shareOf, verifyShards } from "../../src/shard/mod.ts";
import { assertSameCheckpoint, assertSameTensors, withDir } from "../_util.ts";
import { replica, SPLIT } from "./_fixture.ts";
import type { Tensor, TensorInput } from "../../src/format/types.ts";
import { bytesOf } from "../../src/format/dtype.ts";

/** A store that records every get (key and range) made through it. */
function counting(store: ObjectStore): { store: ObjectStore; gets: { key: string; range?: GetOptions["range"] }[] } {
  const gets: { key: string; range?: GetOptions["range"] }[] = [];
  const wrapped = Object.create(store) as ObjectStore;
  Object.defineProperty(wrapped, "get", {
    value: (key: string, options?: GetOptions): Promise<GetResult> => {
      gets.push({ key, ...(options?.range ? { range: options.range } : {}) });
      return store.get(key, options);
    },
  });
  return { store: wrapped, gets };
}

/** Rows [from, to) of a tensor, as the test computes them from the input. */
function rowsOf(t: TensorInput, from: number, to: number): Uint8Array {
  const rowBytes = bytesOf(t.data).byteLength / (t.shape[0] ?? 1);
  return bytesOf(t.data).slice(from * rowBytes, to * rowBytes);
}

Deno.test("a checkpoint written by 4 writers loads on 3 readers, on 2 and on 1, bit for bit", async () => {
  await withDir(async (dir) => {
    const c = replica(8, 96);
    const address = `${dir}/a.ckpt`;
    const { manifest } = await saveSharded(address, c, { writers: 4, splitBytes: SPLIT });
    for (const readers of [1, 2, 3, 5]) {
      const got = new Map<string, Tensor>();
      for (let r = 0; r < readers; r++) {
        const share = shareOf(manifest, r, readers);
        const part = await readShards(address, share);
        for (const t of part.tensors) {
          assert.ok(!got.has(t.name), `${t.name} in two shares`);
          got.set(t.name, t);
        }
      }
      assertSameTensors(c.tensors.map((t) => got.get(t.name)!), c.tensors);
    }
    assertSameCheckpoint(await loadCheckpoint(address), c);
  });
});

Deno.test("readShards reads a row range by reading only the slices that hold it, each by one ranged get", async () => {
  const memory = new MemoryStore();
  const c = replica(9, 100);
  const embed = c.tensors.find((t) => t.name === "embed")!;
  await saveSharded({ store: memory, key: "run/a.ckpt" }, c, { writers: 4, splitBytes: SPLIT });
  const { manifest } = await readShardManifest({ store: memory, key: "run/a.ckpt" });
  const slices = manifest.tensors.find((t) => t.name === "embed")!.slices;
  assert.deepEqual(slices.map((s) => s.rows), [[0, 25], [25, 50], [50, 75], [75, 100]]);

  // Rows 30..60 span slices 1 and 2: the manifest, then exactly those two records.
  const { store, gets } = counting(memory);
  const got = await readShards({ store, key: "run/a.ckpt" }, { rows: [{ tensor: "embed", start: 30, end: 60 }] });
  assert.deepEqual(got.tensors[0]!.shape, [30, 256]);
  assert.deepEqual(bytesOf(got.tensors[0]!.data), rowsOf(embed, 30, 60));
  assert.deepEqual(gets.map((g) => [g.key.split("/").pop(), g.range]), [
    ["a.ckpt", undefined],
    ["part-00002-of-00004.ckpt", { offset: slices[1]!.offset, length: slices[1]!.length }],
    ["part-00003-of-00004.ckpt", { offset: slices[2]!.offset, length: slices[2]!.length }],
  ]);

  // A range inside one slice reads that slice's record whole (its digest covers it), nothing else.
  gets.length = 0;
  const inside = await readShards({ store, key: "run/a.ckpt" }, { rows: [{ tensor: "embed", start: 77, end: 78 }] });
  assert.deepEqual(bytesOf(inside.tensors[0]!.data), rowsOf(embed, 77, 78));
  assert.deepEqual(gets.slice(1).map((g) => g.range), [{ offset: slices[3]!.offset, length: slices[3]!.length }]);

  // Whole tensors by name, and loadCheckpoint's `only`, read only their slices too.
  gets.length = 0;
  const some = await loadCheckpoint({ store, key: "run/a.ckpt" }, { only: ["step"] });
  assert.deepEqual(some.tensors.map((t) => t.name), ["step"]);
  assert.equal(gets.filter((g) => g.range && "offset" in g.range && g.range.offset > 0).length, 1);
});

Deno.test("readShards refuses unknown tensors, bad ranges and misspelt requests", async () => {
  await withDir(async (dir) => {
    const address = `${dir}/a.ckpt`;
    await saveSharded(address, replica(3), { writers: 2 });
    await assert.rejects(readShards(address, { tensors: ["nope"] }), /no tensor named "nope"/);
    await assert.rejects(
      readShards(address, { rows: [{ tensor: "embed", start: 5, end: 65 }] }),
      /it has rows \[0, 64\)/,
    );
    await assert.rejects(readShards(address, { rows: [{ tensor: "step", start: 0, end: 1 }] }), /it is a scalar/);
    await assert.rejects(readShards(address, { tensor: ["embed"] } as never), /unknown option "request.tensor"/);
  });
});

Deno.test("a damaged part is refused before its rows are handed out; a part swapped for another valid one too", async () => {
  await withDir(async (dir) => {
    const c = replica(4);
    const address = `${dir}/a.ckpt`;
    const { manifest, digest } = await saveSharded(address, c, { writers: 2, splitBytes: SPLIT });
    const slice = manifest.tensors.find((t) => t.name === "embed")!.slices[1]!;
    const path = `${address}.parts/${manifest.saveId}/${manifest.parts[slice.part]!.name}`;
    const original = await Deno.readFile(path);
    const flipped = original.slice();
    flipped[slice.offset + slice.length - 100]! ^= 0x10;
    await Deno.writeFile(path, flipped);
    await assert.rejects(loadCheckpoint(address), ChecksumMismatchError);
    await assert.rejects(
      readShards(address, { rows: [{ tensor: "embed", start: 40, end: 41 }] }),
      ChecksumMismatchError,
    );
    // Rows held by the other part still read.
    await readShards(address, { rows: [{ tensor: "embed", start: 0, end: 1 }] });

    // The same part written again by a save of other data: valid on its own, but not what the manifest pins.
    const other = replica(5);
    await saveSharded(`${dir}/b.ckpt`, other, { writers: 2, splitBytes: SPLIT, saveId: manifest.saveId });
    await Deno.copyFile(`${dir}/b.ckpt.parts/${manifest.saveId}/${manifest.parts[slice.part]!.name}`, path);
    await assert.rejects(
      loadCheckpoint(address),
      (e) => e instanceof ChecksumMismatchError || e instanceof SyntaxError,
    );
    await Deno.writeFile(path, original);
    assertSameCheckpoint(await loadCheckpoint(address, { sha256: digest }), c);
    await assert.rejects(loadCheckpoint(address, { sha256: "0".repeat(64) }), ChecksumMismatchError);
    // A missing part names it.
    await Deno.remove(path);
    await assert.rejects(loadCheckpoint(address), Deno.errors.NotFound);
  });
});

Deno.test("loadCheckpoint restores a sharded checkpoint into given buffers", async () => {
  await withDir(async (dir) => {
    const c = replica(2);
    const address = `${dir}/a.ckpt`;
    await saveSharded(address, c, { writers: 2, splitBytes: SPLIT });
    const buffer = new Float32Array(64 * 256);
    const back = await loadCheckpoint(address, { into: new Map([["embed", buffer]]) });
    assert.equal(back.tensors.find((t) => t.name === "embed")!.data.buffer, buffer.buffer);
    assert.deepEqual(buffer, c.tensors.find((t) => t.name === "embed")!.data);
  });
});

Deno.test("verifyShards checks every part whole against the manifest, keeping no tensor", async () => {
  await withDir(async (dir) => {
    const address = `${dir}/a.ckpt`;
    const { manifest, digest } = await saveSharded(address, replica(6), { writers: 3, splitBytes: SPLIT });
    const ok = await verifyShards(address);
    assert.equal(ok.digest, digest);
    assert.equal(ok.bytes, manifest.parts.reduce((n, p) => n + p.bytes, 0));
    // A flipped bit in a part's metadata record, which no slice read touches, is found.
    const path = `${address}.parts/${manifest.saveId}/${manifest.parts[0]!.name}`;
    const bytes = await Deno.readFile(path);
    bytes[40]! ^= 1;
    await Deno.writeFile(path, bytes);
    await assert.rejects(verifyShards(address), (e) => e instanceof ChecksumMismatchError || e instanceof SyntaxError);
    await Deno.remove(path);
    await assert.rejects(verifyShards(address), /No such file or directory/);
  });
});
