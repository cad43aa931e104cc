// The web build under Node 20: imports, hashes with node:crypto, round-trips every codec and
// writes exactly Deno's bytes, byte-grouped ones included.
import assert from "node:assert/strict";
import { join } from "node:path";
import { encodeCheckpoint } from "../../mod.ts";
import { sha256 } from "../../src/format/_hash.ts";
import { buildWeb } from "../../web/build.ts";
import { componentTest } from "../_ci.ts";

const NODE_SCRIPT = `
import * as ckpt from "./ckpt.js";
import { writeFileSync } from "node:fs";
const input = {
  metadata: { step: 42, metrics: { loss: 0.5 } },
  tensors: [
    { name: "dense/kernel", dtype: "float32", shape: [2, 3], data: new Float32Array([1, -0, NaN, Infinity, 1e-45, 0.1]) },
    { name: "step", dtype: "int64", shape: [], data: new BigInt64Array([42n]), group: "optimizer" },
  ],
};
const out = {};
for (const codec of ["binary", "json"]) {
  for (const compression of ["none", "gzip"]) {
    const chunks = [];
    const saved = await ckpt.saveCheckpoint(new WritableStream({ write: (c) => { chunks.push(c.slice()); } }), input, { codec, compression, sha256sum: true });
    const bytes = Buffer.concat(chunks);
    const back = await ckpt.loadCheckpoint(new Blob([bytes]), { sha256: saved.sha256 });
    out[codec + "/" + compression] = {
      sha256: saved.sha256,
      hex: compression === "none" ? bytes.toString("hex") : null,
      same: back.tensors.every((t, i) => Buffer.compare(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength),
        Buffer.from(input.tensors[i].data.buffer)) === 0) && back.metadata.step === 42,
    };
  }
}
// Byte-grouped: weights-like floats (the same formula as the Deno side), planes deflated by Node's zlib.
const w = new Float32Array(1 << 14);
for (let i = 0, x = 7; i < w.length; i++) { x = (x * 1103515245 + 12345) >>> 0; w[i] = ((x >>> 8) / 16777216 - 0.5) * 0.05; }
const grouped = [];
const g = await ckpt.saveCheckpoint(new WritableStream({ write: (c) => { grouped.push(c.slice()); } }),
  { metadata: { step: 1 }, tensors: [{ name: "w", dtype: "float32", shape: [w.length], data: w }] }, { compression: "bytegroup", sha256sum: true });
const gBytes = Buffer.concat(grouped);
const gBack = await ckpt.loadCheckpoint(new Blob([gBytes]));
out.bytegroup = { sha256: g.sha256, same: Buffer.compare(Buffer.from(gBack.tensors[0].data.buffer), Buffer.from(w.buffer)) === 0 };
let pathError = "";
try { await ckpt.loadCheckpoint("/tmp/x.ckpt"); } catch (e) { pathError = e.constructor.name + ": " + e.message; }
out.pathError = pathError;
writeFileSync(process.argv[2], JSON.stringify(out));
`;

function nodeOnPath(): boolean {
  try {
    return new Deno.Command("node", { args: ["--version"], stdout: "null", stderr: "null" }).outputSync().success;
  } catch {
    return false;
  }
}

componentTest({
  name: "the web build imports and round-trips checkpoints under Node",
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "ckpt-web-node-" });
    try {
      await buildWeb(dir);
      await Deno.writeTextFile(join(dir, "run.mjs"), NODE_SCRIPT);
      const result = join(dir, "result.json");
      const out = await new Deno.Command("node", {
        args: [join(dir, "run.mjs"), result],
        stdout: "piped",
        stderr: "piped",
      })
        .output();
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      const r = JSON.parse(await Deno.readTextFile(result));
      const input = {
        metadata: { step: 42, metrics: { loss: 0.5 } },
        tensors: [
          {
            name: "dense/kernel",
            dtype: "float32" as const,
            shape: [2, 3],
            data: new Float32Array([1, -0, NaN, Infinity, 1e-45, 0.1]),
          },
          { name: "step", dtype: "int64" as const, shape: [], data: new BigInt64Array([42n]), group: "optimizer" },
        ],
      };
      for (const codec of ["binary", "json"] as const) {
        const deno = new Uint8Array(await new Response(encodeCheckpoint(input, { codec })).arrayBuffer());
        const node = r[`${codec}/none`];
        assert.equal(
          node.hex,
          [...deno].map((b) => b.toString(16).padStart(2, "0")).join(""),
          `${codec}: Node wrote Deno's bytes`,
        );
        assert.equal(node.sha256, sha256().update(deno).digest("hex"));
        assert.ok(node.same && r[`${codec}/gzip`].same, `${codec} round-trips under Node`);
      }
      // Byte-grouped: Node's zlib writes the planes Deno's node:zlib writes.
      const w = new Float32Array(1 << 14);
      for (let i = 0, x = 7; i < w.length; i++) {
        x = (x * 1103515245 + 12345) >>> 0;
        w[i] = ((x >>> 8) / 16777216 - 0.5) * 0.05;
      }
      const grouped = new Uint8Array(
        await new Response(
          encodeCheckpoint({
            metadata: { step: 1 },
            tensors: [{ name: "w", dtype: "float32", shape: [w.length], data: w }],
          }, { compression: "bytegroup" }),
        ).arrayBuffer(),
      );
      assert.match(new TextDecoder().decode(grouped), /"encoding":"bytegroup"/, "the tensor was byte-grouped");
      assert.equal(r.bytegroup.sha256, sha256().update(grouped).digest("hex"), "bytegroup: Node wrote Deno's bytes");
      assert.ok(r.bytegroup.same, "bytegroup round-trips under Node");
      assert.match(r.pathError, /^TypeError: .*file/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
}, nodeOnPath() ? undefined : "no node on PATH");
