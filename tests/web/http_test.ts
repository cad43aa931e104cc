// Reading a checkpoint over fetch with Range requests in Chromium, Firefox and WebKit: readCheckpointIndex
// and loadCheckpoint(url, { only }) fetch the footer and index, the head, and the wanted records,
// nothing else; the test's static server (Deno.serve, honouring Range) counts requests and bytes.
import assert from "node:assert/strict";
import { join } from "node:path";
import { readCheckpointIndex, saveCheckpoint, type TensorInput } from "../../mod.ts";
import { sha256 } from "../../src/format/_hash.ts";
import { randomBytes } from "../storage/_contract.ts";
import { browserTest } from "./_browser.ts";

type Lib = typeof import("./page/core_entry.ts");
declare const m: Lib;

const MiB = 2 ** 20;
const TAIL = 64 * 1024; // openRandomAccess's first read: the footer and index
const HEAD = 4096; // its read of the header and metadata

function tensors(n: number, bytes: number): TensorInput[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `layer${i}/kernel`,
    dtype: "float32" as const,
    shape: [bytes / 4],
    data: new Float32Array(randomBytes(bytes, 300 + i).buffer),
  }));
}

const hex = (t: TensorInput) =>
  sha256().update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)).digest("hex");

browserTest(
  "Range reads over fetch",
  { entries: { core: "tests/web/page/core_entry.ts" } },
  async (t, ctx) => {
    const { page, filesDir, served } = ctx;
    const ts = tensors(6, MiB);
    await saveCheckpoint(join(filesDir, "m.ckpt"), { metadata: { step: 9 }, tensors: ts });
    const size = (await Deno.stat(join(filesDir, "m.ckpt"))).size;
    const index = await readCheckpointIndex(join(filesDir, "m.ckpt"));
    const ofFile = () => served.filter((s) => s.path === "/files/m.ckpt");

    await t.step("readCheckpointIndex(url) reads two ranges: the tail (footer, index) and the head", async () => {
      served.length = 0;
      const r = await page.evaluate(async () => {
        const index = await m.readCheckpointIndex(new URL("/files/m.ckpt", location.href).href);
        return { step: index.metadata.step, bytes: index.bytes, tensors: index.tensors.map((t) => [t.name, t.offset]) };
      });
      assert.equal(r.step, 9);
      assert.equal(r.bytes, size);
      assert.deepEqual(r.tensors, index.tensors.map((t) => [t.name, t.offset]));
      assert.deepEqual(ofFile().map((s) => [s.method, s.range, s.status, s.bytes]), [
        ["GET", `bytes=-${TAIL}`, 206, TAIL],
        ["GET", `bytes=0-${HEAD - 1}`, 206, HEAD],
      ]);
    });

    await t.step(
      "loadCheckpoint(url, { only }) fetches the tail, the head and each wanted record, verified",
      async () => {
        served.length = 0;
        const wanted = ["layer4/kernel", "layer1/kernel"];
        const r = await page.evaluate(async (only: string[]) => {
          const back = await m.loadCheckpoint(new URL("/files/m.ckpt", location.href).href, { only });
          const digests = [];
          for (const t of back.tensors) {
            const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength).slice();
            const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
            digests.push([t.name, [...d].map((b) => b.toString(16).padStart(2, "0")).join("")]);
          }
          return { step: back.metadata.step, digests };
        }, wanted);
        assert.equal(r.step, 9);
        assert.deepEqual(r.digests, [["layer1/kernel", hex(ts[1]!)], ["layer4/kernel", hex(ts[4]!)]]);
        const log = ofFile();
        assert.deepEqual(log.slice(0, 2).map((s) => s.range), [`bytes=-${TAIL}`, `bytes=0-${HEAD - 1}`]);
        // One range per wanted record, each inside that record (reads start up to 63 bytes early, aligned).
        const records = log.slice(2);
        assert.equal(records.length, 2, log.map((s) => `${s.method} ${s.range}`).join("\n"));
        for (const [i, name] of ["layer1/kernel", "layer4/kernel"].entries()) {
          const e = index.tensors.find((x) => x.name === name)!;
          const [, from, to] = /^bytes=(\d+)-(\d+)$/.exec(records[i]!.range ?? "")!.map(Number);
          assert.ok(
            from! >= e.offset - 63 && from! <= e.offset,
            `${name}: range ${records[i]!.range}, record at ${e.offset}`,
          );
          assert.ok(to! < e.offset + e.length, `${name}: range ${records[i]!.range} runs past the record`);
          assert.ok(to! - from! + 1 >= MiB, `${name}: range ${records[i]!.range} is shorter than the tensor`);
        }
        const bytes = log.reduce((n, s) => n + s.bytes, 0);
        assert.ok(log.every((s) => s.status === 206));
        assert.ok(bytes <= TAIL + HEAD + 2 * (MiB + 256), `${bytes} bytes fetched`);
        assert.ok(bytes < size / 2);
      },
    );

    await t.step("a corrupt wanted record is a ChecksumMismatchError; the others still load", async () => {
      const bad = await Deno.readFile(join(filesDir, "m.ckpt"));
      const e = index.tensors.find((x) => x.name === "layer2/kernel")!;
      bad[e.offset + e.length - 100]! ^= 0x01;
      await Deno.writeFile(join(filesDir, "bad.ckpt"), bad);
      const r = await page.evaluate(async () => {
        const url = new URL("/files/bad.ckpt", location.href).href;
        const ok = await m.loadCheckpoint(url, { only: ["layer3/kernel"] });
        try {
          await m.loadCheckpoint(url, { only: ["layer2/kernel"] });
          return { ok: ok.tensors.length, error: "no error" };
        } catch (err) {
          return { ok: ok.tensors.length, error: `${(err as Error).name}: ${(err as Error).message}` };
        }
      });
      assert.equal(r.ok, 1);
      assert.match(r.error, /^ChecksumMismatchError: .*layer2\/kernel/);
    });

    await t.step("an empty range and a missing object read as they do in Deno", async () => {
      const r = await page.evaluate(async () => {
        const store = new m.HttpStore(new URL("/files/", location.href));
        const empty = await store.get("m.ckpt", { range: { offset: 10, length: 0 } });
        const got = new Uint8Array(await new Response(empty.body).arrayBuffer()).byteLength;
        let missing = "";
        try {
          await m.readCheckpointIndex(new URL("/files/nope.ckpt", location.href).href);
        } catch (err) {
          missing = `${(err as Error).name}: ${(err as Error).message}`;
        }
        return { size: empty.info.size, length: empty.length, got, missing };
      });
      assert.deepEqual([r.size, r.length, r.got], [size, 0, 0]);
      assert.match(r.missing, /^ObjectNotFoundError: .*nope\.ckpt/);
    });
  },
);
