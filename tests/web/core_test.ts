// Checkpoints moved both ways between Deno and each browser engine (Chromium, Firefox, WebKit),
// compared byte for byte; typed errors in the page. Runs the web build (the same modules a page
// gets) in real browsers.
import assert from "node:assert/strict";
import { join } from "node:path";
import { type CheckpointSource, encodeCheckpoint, loadCheckpoint, safetensorsCodec } from "../../mod.ts";
import { assertSameBytes, edgeCheckpoint } from "../_util.ts";
import { sha256 } from "../../src/format/_hash.ts";
import { writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { browserTest } from "./_browser.ts";

type Lib = typeof import("./page/core_entry.ts");
declare const m: Lib;

async function bytesOf(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(s).arrayBuffer());
}

async function gunzip(b: Uint8Array): Promise<Uint8Array> {
  return await bytesOf(new Blob([b as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new DecompressionStream("gzip")));
}

const CASES = [
  { codec: "binary", compression: "none" },
  { codec: "binary", compression: "gzip" },
  { codec: "binary", compression: "bytegroup" },
  { codec: "json", compression: "none" },
  { codec: "json", compression: "gzip" },
  { codec: "safetensors", compression: "none" },
  { codec: "safetensors", compression: "gzip" },
] as const;

browserTest("core round trips", { entries: { core: "tests/web/page/core_entry.ts" } }, async (t, ctx) => {
  const { page, filesDir, uploads, engine } = ctx;

  await t.step("the page's SHA-256 of a save is Deno's", async () => {
    const r = await page.evaluate(async () => {
      const s = await m.saveCheckpoint(new WritableStream(), { metadata: { step: 0 }, tensors: [] }, {
        sha256sum: true,
      });
      return { from: typeof (ReadableStream as unknown as { from?: unknown }).from, sha: s.sha256 };
    });
    if (engine === "chromium") {
      assert.equal(r.from, "undefined", "this Chromium has ReadableStream.from: the fallback goes untested here");
    }
    const deno = await bytesOf(encodeCheckpoint({ metadata: { step: 0 }, tensors: [] }));
    assert.equal(r.sha, sha256().update(deno).digest("hex"));
  });

  for (const c of CASES) {
    await t.step(
      `${c.codec}/${c.compression}: Deno's bytes load in the page and re-encode to the same bytes`,
      async () => {
        const codec = c.codec === "safetensors" ? safetensorsCodec : c.codec;
        const input = edgeCheckpoint();
        const denoBytes = await bytesOf(encodeCheckpoint(input, { codec, compression: c.compression }));
        const name = `${c.codec}-${c.compression}.ckpt`;
        await Deno.writeFile(join(filesDir, name), denoBytes);
        const r = await page.evaluate(
          async (name: string, codecName: string, compression: "none" | "gzip" | "bytegroup") => {
            const codec = codecName === "safetensors" ? m.safetensorsCodec : codecName as "binary" | "json";
            const opts = { codecs: codecName === "safetensors" ? [m.safetensorsCodec] : [] };
            const res = await fetch(`/files/${name}`);
            const blob = await res.blob();
            // Every source kind: Blob, Response, ReadableStream, bytes.
            const fromBlob = await m.loadCheckpoint(blob, opts);
            const fromResponse = await m.loadCheckpoint(new Response(blob), opts);
            const fromStream = await m.loadCheckpoint(blob.stream(), opts);
            const fromBytes = await m.loadCheckpoint(new Uint8Array(await blob.arrayBuffer()), opts);
            // With no codecs given: every format the library registers (safetensors too) is recognised.
            const byDefault = await m.loadCheckpoint(blob);
            const same = [fromResponse, fromStream, fromBytes, byDefault].every((x) =>
              x.tensors.length === fromBlob.tensors.length &&
              x.tensors.every((t, i) => t.name === fromBlob.tensors[i]!.name)
            );
            const sniff = await m.sniffCheckpoint(blob, opts);
            await sniff.bytes.cancel();
            // Re-encode what was loaded, to a WritableStream, and send the bytes back.
            const chunks: Uint8Array[] = [];
            const saved = await m.saveCheckpoint(
              new WritableStream({ write: (c) => void chunks.push(c.slice()) }),
              fromBlob,
              { codec, compression, sha256sum: true },
            );
            const out = new Blob(chunks as BlobPart[]);
            await fetch(`/upload/${name}`, { method: "PUT", body: out });
            return {
              same,
              sniffed: [sniff.codec.name, sniff.compression],
              sha256: saved.sha256,
              bytes: saved.bytes,
              names: fromBlob.tensors.map((t) => t.name),
            };
          },
          name,
          c.codec,
          c.compression,
        );
        assert.ok(r.same, "every source kind gives the same checkpoint");
        assert.deepEqual(r.sniffed, [c.codec, c.compression]);
        const back = uploads.get(name)!;
        assert.equal(back.byteLength, r.bytes);
        assert.equal(r.sha256, sha256().update(back).digest("hex"), "the page's digest is of the bytes it wrote");
        if (c.compression === "none" || c.compression === "bytegroup") {
          // Byte-grouped planes are Huffman-only raw deflate by the same JavaScript encoder in
          // either runtime: the same bytes.
          assertSameBytes(back, denoBytes, `${engine} wrote exactly Deno's bytes`);
        } else {
          // Both sides' gzip streams must carry the same codec bytes; the gzip framing itself comes
          // from each runtime's zlib.
          assert.deepEqual(await gunzip(back), await gunzip(denoBytes));
        }
        // And the page's bytes load in Deno, bit for bit the same tensors.
        const opts = { codecs: c.codec === "safetensors" ? [safetensorsCodec] : [] };
        const fromPage = await loadCheckpoint(back as CheckpointSource, opts);
        const fromDeno = await loadCheckpoint(denoBytes, opts);
        assert.deepEqual(fromPage, fromDeno);
        assert.deepEqual(r.names, fromDeno.tensors.map((t) => t.name));
      },
    );
  }

  await t.step(
    "TF.js artifacts on OPFS: the same objects as a Deno export, read back bit for bit, old shards removed",
    async () => {
      const r = await page.evaluate(async () => {
        const model = (step: number) => ({
          metadata: { step },
          tensors: [
            {
              name: "dense/kernel",
              dtype: "float32" as const,
              shape: [300],
              data: new Float32Array(300).map((_, i) => i / 7),
            },
            { name: "n", dtype: "int8" as const, shape: [3], data: new Int8Array([-1, 0, 1]) },
            { name: "mask", dtype: "bool" as const, shape: [4], data: new Uint8Array([1, 0, 0, 1]) },
          ],
        });
        const first = await m.writeTfjsArtifacts("opfs:///tfjs/mlp", model(3), { shardBytes: 500 });
        const back = await m.readTfjsArtifacts("opfs:///tfjs/mlp/model.json");
        const second = await m.writeTfjsArtifacts("opfs:///tfjs/mlp", model(4), { shardBytes: 4000 });
        const store = await m.OpfsStore.open("tfjs/mlp");
        const objects: Record<string, number[]> = {};
        for await (const o of store.list()) {
          objects[o.key] = [...new Uint8Array(await new Response((await store.get(o.key)).body).arrayBuffer())];
        }
        return {
          first: first.shards,
          step: back.metadata.step,
          back: back.tensors.map((t) => [t.name, t.dtype, Array.from(t.data as ArrayLike<number>)]),
          removed: second.removed,
          objects,
        };
      });
      assert.deepEqual(r.first, [1, 2, 3].map((i) => `opfs:///tfjs/mlp/weights-shard${i}of3.bin`));
      assert.equal(r.step, 3);
      assert.deepEqual(r.back, [
        ["dense/kernel", "float32", [...new Float32Array(300).map((_, i) => i / 7)]],
        ["n", "int8", [-1, 0, 1]],
        ["mask", "bool", [1, 0, 0, 1]],
      ]);
      assert.deepEqual(r.removed, r.first);
      // Deno writes the same objects for the same checkpoint.
      const dir = await Deno.makeTempDir({ prefix: "ckpt-web-tfjs-" });
      try {
        await writeTfjsArtifacts(dir, {
          metadata: { step: 4 },
          tensors: [
            { name: "dense/kernel", dtype: "float32", shape: [300], data: new Float32Array(300).map((_, i) => i / 7) },
            { name: "n", dtype: "int8", shape: [3], data: new Int8Array([-1, 0, 1]) },
            { name: "mask", dtype: "bool", shape: [4], data: new Uint8Array([1, 0, 0, 1]) },
          ],
        }, { shardBytes: 4000 });
        const files = Object.fromEntries(
          [...Deno.readDirSync(dir)].map((e) => [e.name, [...Deno.readFileSync(join(dir, e.name))]]),
        );
        assert.deepEqual(r.objects, files);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    },
  );

  await t.step(
    "a tensor of 1 MiB or more loads with one WebCrypto call over its record (a stream, a Blob, OPFS), bit for bit; a flipped byte is Deno's error",
    async () => {
      const n = 3 * 2 ** 18; // 3 MiB of float32
      const data = new Float32Array(n).map((_, i) => (i % 1000) * 0.25);
      const input = {
        metadata: { step: 1 },
        tensors: [
          { name: "big", dtype: "float32" as const, shape: [n], data },
          { name: "bias", dtype: "float32" as const, shape: [3], data: new Float32Array([1, 2, 3]) },
        ],
      };
      const good = await bytesOf(encodeCheckpoint(input));
      const bad = good.slice();
      bad[good.byteLength >> 1]! ^= 1; // inside the big tensor's body
      await Deno.writeFile(join(filesDir, "big.ckpt"), good);
      await Deno.writeFile(join(filesDir, "big-bad.ckpt"), bad);
      const expected = await loadCheckpoint(bad).then(() => "no error", (e: Error) => e.message);
      const r = await page.evaluate(async () => {
        const { sizes, digest, restore } = m.countWebDigests();
        const store = await m.OpfsStore.open("web-load");
        try {
          const blob = async (name: string) => await (await fetch(`/files/${name}`)).blob();
          await store.put("big.ckpt", new Uint8Array(await (await blob("big.ckpt")).arrayBuffer()));
          await store.put("big-bad.ckpt", new Uint8Array(await (await blob("big-bad.ckpt")).arrayBuffer()));
          const sources = {
            stream: async (name: string) => (await fetch(`/files/${name}`)).body!,
            blob,
            opfs: (name: string) => Promise.resolve({ store, key: name }),
          };
          const out = [];
          for (const [how, open] of Object.entries(sources)) {
            sizes.length = 0;
            const back = await m.loadCheckpoint(await open("big.ckpt"));
            const calls = [...sizes];
            const t = back.tensors[0]!.data as Float32Array;
            const view = new Uint8Array(t.buffer as ArrayBuffer, t.byteOffset, t.byteLength);
            const hash = [...new Uint8Array(await digest("SHA-256", view))];
            const error = await m.loadCheckpoint(await open("big-bad.ckpt")).then(
              () => "no error",
              (e: Error) => `${e instanceof m.ChecksumMismatchError}: ${e.message}`,
            );
            out.push({ how, calls, hash, error, names: back.tensors.map((x) => x.name) });
          }
          return out;
        } finally {
          restore();
          await store.delete("big.ckpt");
          await store.delete("big-bad.ckpt");
        }
      });
      for (const { how, calls, hash, error, names } of r) {
        assert.deepEqual(names, ["big", "bias"], how);
        assert.deepEqual(hash, [...sha256().update(new Uint8Array(data.buffer)).digest()], `${how}: Deno's tensor`);
        assert.equal(error, `true: ${expected}`, how);
        assert.equal(calls.length, 1, `${how}: one WebCrypto call, for the big tensor's record: ${calls}`);
        assert.ok(calls[0]! > data.byteLength && calls[0]! < data.byteLength + 1024);
      }
    },
  );

  await t.step(
    "a checkpoint of more than one 16 MiB piece loads from OPFS with each large record hashed on a worker, bit for bit; a flipped byte is Deno's error",
    async () => {
      const n = 2 ** 20; // 4 MiB of float32 each
      const tensors = Array.from({ length: 6 }, (_, k) => ({
        name: `layer${k}`,
        dtype: "float32" as const,
        shape: [n],
        data: new Float32Array(n).map((_, i) => (i % 997) * 0.5 + k),
      }));
      const good = await bytesOf(encodeCheckpoint({ metadata: { step: 2 }, tensors }));
      const bad = good.slice();
      bad[good.byteLength - 2 ** 21]! ^= 1; // inside the last tensor's body
      await Deno.writeFile(join(filesDir, "pieces.ckpt"), good);
      await Deno.writeFile(join(filesDir, "pieces-bad.ckpt"), bad);
      const expected = await loadCheckpoint(bad).then(() => "no error", (e: Error) => e.message);
      const r = await page.evaluate(async () => {
        const { sizes, digest, restore } = m.countWebDigests();
        const store = await m.OpfsStore.open("web-load");
        try {
          for (const name of ["pieces.ckpt", "pieces-bad.ckpt"]) {
            await store.put(name, new Uint8Array(await (await fetch(`/files/${name}`)).arrayBuffer()));
          }
          sizes.length = 0;
          const back = await m.loadCheckpoint({ store, key: "pieces.ckpt" });
          const calls = [...sizes];
          const hashes = [];
          for (const t of back.tensors) {
            const view = new Uint8Array(t.data.buffer as ArrayBuffer, t.data.byteOffset, t.data.byteLength);
            hashes.push([...new Uint8Array(await digest("SHA-256", view))]);
          }
          const error = await m.loadCheckpoint({ store, key: "pieces-bad.ckpt" }).then(
            () => "no error",
            (e: Error) => `${e instanceof m.ChecksumMismatchError}: ${e.message}`,
          );
          return { calls, hashes, error };
        } finally {
          restore();
          await store.delete("pieces.ckpt");
          await store.delete("pieces-bad.ckpt");
        }
      });
      assert.deepEqual(r.calls, [], "hashed on the worker, not on the page's thread");
      assert.deepEqual(r.hashes, tensors.map((t) => [...sha256().update(new Uint8Array(t.data.buffer)).digest()]));
      assert.equal(r.error, `true: ${expected}`);
    },
  );

  await t.step(
    "a tensor of 1 MiB or more with room in front (snapshot's buffers) saves to OPFS with one WebCrypto call over its record, Deno's bytes",
    async () => {
      const n = 3 * 2 ** 18; // 3 MiB of float32
      const values = (i: number) => (i % 1000) * 0.25;
      const input = {
        metadata: { step: 2 },
        tensors: [
          { name: "big", dtype: "float32" as const, shape: [n], data: new Float32Array(n).map((_, i) => values(i)) },
          { name: "bias", dtype: "float32" as const, shape: [3], data: new Float32Array([1, 2, 3]) },
        ],
      };
      const deno = await bytesOf(encodeCheckpoint(input));
      const r = await page.evaluate(async (n: number) => {
        const { sizes, digest, restore } = m.countWebDigests();
        try {
          const big = { name: "big", dtype: "float32" as const, shape: [n] };
          const bias = { name: "bias", dtype: "float32" as const, shape: [3] };
          // Laid out as snapshot lays tensors out: one buffer, room for a record prefix before each.
          const [rb, rs] = [m.prefixRoom(big), m.prefixRoom(bias)];
          const buffer = new ArrayBuffer(rb + n * 4 + rs + 12);
          const a = new Float32Array(buffer, rb, n);
          for (let i = 0; i < n; i++) a[i] = (i % 1000) * 0.25;
          const b = new Float32Array(buffer, rb + n * 4 + rs, 3);
          b.set([1, 2, 3]);
          m.reserveHeadroom(a, rb);
          m.reserveHeadroom(b, rs);
          const store = await m.OpfsStore.open("web-save");
          await m.saveCheckpoint({ store, key: "big.ckpt" }, {
            metadata: { step: 2 },
            tensors: [{ ...big, data: a }, { ...bias, data: b }],
          });
          const calls = [...sizes];
          const got = await store.get("big.ckpt");
          const bytes = new Uint8Array(await new Response(got.body).arrayBuffer());
          await store.delete("big.ckpt");
          const hash = [...new Uint8Array(await digest("SHA-256", bytes))];
          return { calls, size: bytes.byteLength, hash, same: a.every((x, i) => x === (i % 1000) * 0.25) };
        } finally {
          restore();
        }
      }, n);
      assert.equal(r.calls.length, 1, `one WebCrypto call, for the big tensor's record: ${r.calls}`);
      assert.ok(r.calls[0]! > n * 4 && r.calls[0]! < n * 4 + 1024);
      assert.ok(r.same, "the tensor is unchanged");
      assert.equal(r.size, deno.byteLength);
      assert.deepEqual(r.hash, [...sha256().update(deno).digest()], "the page saved Deno's bytes");
    },
  );

  await t.step(
    "a caller's own arrays save to OPFS as Deno's bytes (through a worker's sync access handle, else one createWritable() write per body and one per run of small record parts), each record of 1 MiB or more hashed with one WebCrypto call over a copy (Deno's bytes too when that call fails)",
    async () => {
      const n = 2 ** 18; // 1 MiB of float32 per tensor
      const input = {
        metadata: { step: 3 },
        tensors: [0, 1, 2].map((k) => ({
          name: `layer${k}`,
          dtype: "float32" as const,
          shape: [n],
          data: new Float32Array(n).map((_, i) => ((i + k) % 1000) * 0.25),
        })).concat([{ name: "bias", dtype: "float32" as const, shape: [3], data: new Float32Array([1, 2, 3]) }]),
      };
      const deno = await bytesOf(encodeCheckpoint(input));
      const r = await page.evaluate(async (n: number) => {
        const tensors = [0, 1, 2].map((k) => ({
          name: `layer${k}`,
          dtype: "float32" as const,
          shape: [n],
          data: new Float32Array(n).map((_, i) => ((i + k) % 1000) * 0.25),
        })).concat([{ name: "bias", dtype: "float32" as const, shape: [3], data: new Float32Array([1, 2, 3]) }]);
        const store = await m.OpfsStore.open("web-save-own");
        await store.put("warm", new Uint8Array(1)); // the engine's first write (WebKit's probe) is not counted
        const proto = (globalThis as unknown as { FileSystemWritableFileStream: { prototype: { write: unknown } } })
          .FileSystemWritableFileStream.prototype;
        const write = proto.write as (this: unknown, data: unknown) => Promise<void>;
        const sizes: number[] = [];
        proto.write = function (this: unknown, data: unknown) {
          sizes.push((data as ArrayBufferView).byteLength);
          return write.call(this, data);
        };
        const saved = async (fail: boolean) => {
          const digests = m.countWebDigests(fail);
          try {
            await m.saveCheckpoint({ store, key: "own.ckpt" }, { metadata: { step: 3 }, tensors });
          } finally {
            digests.restore();
          }
          const got = await store.get("own.ckpt");
          const bytes = new Uint8Array(await new Response(got.body).arrayBuffer());
          await store.delete("own.ckpt");
          return {
            digests: [...digests.sizes],
            size: bytes.byteLength,
            hash: [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))],
          };
        };
        try {
          const before = m.opfsWorkerWritesForTests();
          const ok = await saved(false);
          const piped = m.opfsWorkerWritesForTests() - before;
          proto.write = write;
          const failed = await saved(true);
          const same = tensors.every((t, k) => t.data.every((x, i) => x === (k < 3 ? ((i + k) % 1000) * 0.25 : i + 1)));
          return { sizes, ok, failed, same, piped };
        } finally {
          proto.write = write;
          await store.delete("warm");
        }
      }, n);
      const expected = [...sha256().update(deno).digest()];
      for (const saved of [r.ok, r.failed]) {
        assert.equal(saved.size, deno.byteLength);
        assert.deepEqual(saved.hash, expected, "the page saved Deno's bytes");
        assert.equal(saved.digests.length, 3, `WebCrypto calls: ${saved.digests}`);
        assert.ok(saved.digests.every((b) => b > n * 4 && b < n * 4 + 1024), `WebCrypto calls: ${saved.digests}`);
      }
      assert.ok(r.same, "the tensors are unchanged");
      // Chromium and Firefox: the page's bytes go to a worker's sync access handle, no
      // createWritable() write at all; WebKitGTK cannot post the file handle to a worker.
      if (engine !== "webkit") {
        assert.equal(r.piped, 1, "the save went through the worker");
        assert.deepEqual(r.sizes, [], "no createWritable() write");
        return;
      }
      assert.equal(r.piped, 0);
      // Small parts before each body (header, metadata, the digest before, the prefix), each body
      // whole, then the rest (last digest, bias, index, footer) in one: 7 writes, not 18.
      assert.equal(r.sizes.length, 7, `writes: ${r.sizes}`);
      assert.deepEqual(r.sizes.filter((_, i) => i % 2 === 1 && i < 6), [n * 4, n * 4, n * 4]);
      assert.ok(r.sizes.filter((_, i) => i % 2 === 0).every((b) => b < 64 * 1024), `writes: ${r.sizes}`);
    },
  );

  await t.step(
    "a page's save of more than the worker's buffers hold: Deno's bytes, two saves at once; one failing part way keeps the object before and leaves no temporary file",
    async () => {
      const n = 2 ** 20; // 4 MiB of float32 per tensor, 24 MiB in all: each of the 1 MiB buffers written 3 times
      const make = (step: number) => ({
        metadata: { step },
        tensors: Array.from({ length: 6 }, (_, k) => ({
          name: `layer${k}`,
          dtype: "float32" as const,
          shape: [n],
          data: new Float32Array(n).map((_, i) => (i % 1009) * 0.5 + k + step),
        })),
      });
      const expected = await Promise.all(
        [1, 2].map(async (step) => [...sha256().update(await bytesOf(encodeCheckpoint(make(step)))).digest()]),
      );
      const r = await page.evaluate(async (n: number) => {
        const make = (step: number) => ({
          metadata: { step },
          tensors: Array.from({ length: 6 }, (_, k) => ({
            name: `layer${k}`,
            dtype: "float32" as const,
            shape: [n],
            data: new Float32Array(n).map((_, i) => (i % 1009) * 0.5 + k + step),
          })),
        });
        const store = await m.OpfsStore.open("web-save-piped");
        const hashOf = async (key: string) => {
          const bytes = await new Response((await store.get(key)).body).arrayBuffer();
          return [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))];
        };
        const before = m.opfsWorkerWritesForTests();
        await Promise.all([1, 2].map((step) => m.saveCheckpoint({ store, key: `s${step}.ckpt` }, make(step))));
        const piped = m.opfsWorkerWritesForTests() - before;
        const hashes = [await hashOf("s1.ckpt"), await hashOf("s2.ckpt")];
        // Tensors from a generator that fails after three: the save stops part way.
        async function* failing() {
          for (const [k, t] of make(3).tensors.entries()) {
            if (k === 3) throw new Error("the producer failed");
            yield t;
          }
        }
        let error = "";
        try {
          await m.saveCheckpoint({ store, key: "s1.ckpt" }, { metadata: { step: 3 }, tensors: failing() });
        } catch (e) {
          error = (e as Error).message;
        }
        const after = await hashOf("s1.ckpt");
        interface Dir {
          getDirectoryHandle(name: string): Promise<Dir>;
          keys(): AsyncIterable<string>;
          removeEntry(name: string, o: { recursive: boolean }): Promise<void>;
        }
        const top = await (navigator as unknown as { storage: { getDirectory(): Promise<Dir> } }).storage
          .getDirectory();
        const temp: string[] = [];
        const tempDir = await (await top.getDirectoryHandle("web-save-piped")).getDirectoryHandle(m.OPFS_TEMP_DIR);
        for await (const name of tempDir.keys()) temp.push(name);
        await top.removeEntry("web-save-piped", { recursive: true });
        return { piped, hashes, error, after, temp };
      }, n);
      assert.equal(r.piped, engine === "webkit" ? 0 : 2, "through the worker in Chromium and Firefox");
      assert.deepEqual(r.hashes, expected, "the page saved Deno's bytes, both at once");
      assert.equal(r.error, "the producer failed");
      assert.deepEqual(r.after, expected[0], "the object before is intact");
      assert.deepEqual(r.temp, [], "no temporary file left");
    },
  );

  await t.step("errors in the page are typed and say what and where", async () => {
    const good = await bytesOf(encodeCheckpoint({
      metadata: { step: 1 },
      tensors: [{ name: "fc1/kernel", dtype: "float32", shape: [64], data: new Float32Array(64).fill(1.5) }],
    }));
    const corrupt = good.slice();
    const body = good.findIndex((_, i) =>
      good[i] === 0 && good[i + 1] === 0 && good[i + 2] === 0xc0 && good[i + 3] === 0x3f
    );
    corrupt[body + 2]! ^= 0xff; // inside the tensor body (1.5 is 00 00 c0 3f)
    const r = await page.evaluate(
      async (good: number[], corrupt: number[]) => {
        const describe = async (f: () => Promise<unknown>) => {
          try {
            await f();
            return "no error";
          } catch (e) {
            const err = e as Error;
            return `${
              err instanceof m.ChecksumMismatchError ? "ChecksumMismatchError" : err.constructor.name
            }: ${err.message}`;
          }
        };
        const g = new Uint8Array(good);
        return {
          corrupt: await describe(() => m.loadCheckpoint(new Blob([new Uint8Array(corrupt)]))),
          truncated: await describe(() => m.loadCheckpoint(new Blob([g.subarray(0, g.byteLength - 30)]))),
          path: await describe(() => m.loadCheckpoint("/runs/a.ckpt")),
          savePath: await describe(() => m.saveCheckpoint("/runs/a.ckpt", { metadata: { step: 0 }, tensors: [] })),
          http: await describe(() => m.loadCheckpoint(new Response("x", { status: 404, statusText: "Not Found" }))),
          garbage: await describe(() => m.loadCheckpoint(new Blob(["hello world"]))),
          sink: await describe(() =>
            m.saveCheckpoint(
              new WritableStream({
                write() {
                  throw new RangeError("disk full");
                },
              }),
              { metadata: { step: 0 }, tensors: [] },
            )
          ),
        };
      },
      [...good],
      [...corrupt],
    );
    assert.match(r.corrupt, /^ChecksumMismatchError: .*fc1\/kernel/);
    assert.match(r.truncated, /^SyntaxError: Cannot decode checkpoint: .*offset/);
    assert.match(r.path, /^TypeError: Cannot read checkpoint from "\/runs\/a.ckpt": file paths need Deno/);
    assert.match(r.savePath, /^TypeError: .*file path/);
    assert.match(r.http, /^TypeError: Cannot read checkpoint.*HTTP 404 Not Found/);
    assert.match(r.garbage, /^SyntaxError: Cannot decode checkpoint: unrecognised format/);
    assert.equal(r.sink, "RangeError: disk full", "a failing sink's own error, not a ReferenceError about Deno");
  });
});
