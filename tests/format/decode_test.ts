import assert from "node:assert/strict";
import { join } from "node:path";
import { decodeCheckpoint, loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import type { TensorInput } from "../../src/format/types.ts";
import { collect, edgeCheckpoint, feeds } from "../_util.ts";
import { encodeCheckpoint, sniffCheckpoint } from "../../mod.ts";
import { bytesOf } from "../../src/format/dtype.ts";

function bigTensors(n = 300_000): TensorInput[] {
  return Array.from({ length: 6 }, (_, i) => ({
    name: `t${i}`,
    dtype: "float32" as const,
    shape: [n + i],
    data: new Float32Array(n + i).map((_, j) => i * 1e6 + j),
  }));
}

Deno.test("decodeCheckpoint({ reuseBuffers }) gives each tensor intact while it is current, from files and streams", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "a.ckpt");
    // Large bodies from a file (read straight into the shared buffer); small ones fed three ways.
    const tensors = bigTensors();
    await saveCheckpoint(path, { metadata: { step: 1 }, tensors });
    for (const source of [() => path]) {
      let i = 0;
      const buffers = new Set<ArrayBufferLike>();
      for await (const r of decodeCheckpoint(source(), { reuseBuffers: true })) {
        if (r.type !== "tensor") continue;
        assert.deepEqual(bytesOf(r.tensor.data), bytesOf(tensors[i]!.data), `tensor ${i}`);
        buffers.add(r.tensor.data.buffer);
        i++;
      }
      assert.equal(i, tensors.length);
      // One shared buffer from a file, grown once when a larger tensor comes.
      if (typeof source() === "string") assert.equal(buffers.size, 2);
    }
    const small = bigTensors(2_000);
    const bytes = await collect(encodeCheckpoint({ metadata: { step: 1 }, tensors: small }));
    for (const feed of feeds(bytes, 5)) {
      let i = 0;
      for await (const r of decodeCheckpoint(feed.stream(), { reuseBuffers: true })) {
        if (r.type !== "tensor") continue;
        assert.deepEqual(bytesOf(r.tensor.data), bytesOf(small[i]!.data), `${feed.name}: tensor ${i}`);
        i++;
      }
      assert.equal(i, small.length);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decodeCheckpoint from a binary file path verifies like the stream path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "a.ckpt");
    await saveCheckpoint(path, { metadata: { step: 1 }, tensors: bigTensors() });
    const bytes = await Deno.readFile(path);
    bytes[bytes.length - 200_000]! ^= 1; // inside the last body
    await Deno.writeFile(path, bytes);
    await assert.rejects(async () => {
      for await (const _ of decodeCheckpoint(path)) { /* drain */ }
    }, /Checksum mismatch for tensor "t5"/);
    await Deno.writeFile(path, bytes.subarray(0, bytes.length - 300_000));
    await assert.rejects(async () => {
      for await (const _ of decodeCheckpoint(path)) { /* drain */ }
    }, /stream ends at offset \d+ with \d+ bytes of tensor "t5" missing/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("decodeCheckpoint hands out metadata before reading any tensor", async () => {
  const reader = decodeCheckpoint(encodeCheckpoint(edgeCheckpoint())).getReader();
  const first = await reader.read();
  assert.equal(first.value?.type, "metadata");
  await reader.cancel();
});

Deno.test({
  name: "a failed or abandoned decode closes its file at once (no file handle left open)",
  ignore: Deno.build.os !== "linux", // counts /proc/PID/fd
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = join(dir, "bad.ckpt");
      // Deno asks --allow-all to read /proc itself; ls in a subprocess lists what our descriptors
      // point to, and none may point to the file (other tests' threads may open descriptors meanwhile).
      const handles = async () => {
        const out = await new Deno.Command("ls", { args: ["-l", `/proc/${Deno.pid}/fd`] }).output();
        return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l.endsWith(path)).length;
      };
      // A JSON checkpoint whose metadata digest is wrong, followed by plenty of bytes never read.
      await Deno.writeTextFile(
        path,
        '{"ckpt":"jsonl","version":1}\n{"metadata":{"step":1}}\n{"sha256":"' + "0".repeat(64) + '"}\n' +
          "x".repeat(8 << 20),
      );
      for (let i = 0; i < 5; i++) await assert.rejects(() => loadCheckpoint(path), /Checksum mismatch for metadata/);
      assert.equal(await handles(), 0, "failed loads left the file open");
      // A valid checkpoint abandoned after its metadata: open while read, closed once cancelled.
      const good = join(dir, "good.ckpt");
      await saveCheckpoint(good, { metadata: { step: 1 }, tensors: bigTensors() }, { codec: "json" });
      const reader = decodeCheckpoint(good).getReader();
      assert.equal((await reader.read()).value?.type, "metadata");
      const whileOpen = await new Deno.Command("ls", { args: ["-l", `/proc/${Deno.pid}/fd`] }).output();
      assert.ok(new TextDecoder().decode(whileOpen.stdout).includes(good), "the check can see an open file");
      await reader.cancel();
      const after = await new Deno.Command("ls", { args: ["-l", `/proc/${Deno.pid}/fd`] }).output();
      assert.ok(!new TextDecoder().decode(after.stdout).includes(good), "a cancelled decode left the file open");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("load, decode and sniff take a Blob and a Response, giving the same checkpoint as bytes", async () => {
  const input = {
    metadata: { step: 9 },
    tensors: [{ name: "w", dtype: "int32" as const, shape: [3], data: new Int32Array([1, -2, 3]) }],
  };
  for (const compression of ["none", "gzip"] as const) {
    const bytes = new Uint8Array(await new Response(encodeCheckpoint(input, { compression })).arrayBuffer());
    const fromBytes = await loadCheckpoint(bytes);
    assert.deepEqual(await loadCheckpoint(new Blob([bytes])), fromBytes);
    assert.deepEqual(await loadCheckpoint(new Response(bytes)), fromBytes);
    const kinds: string[] = [];
    for await (const r of decodeCheckpoint(new Blob([bytes]))) kinds.push(r.type);
    assert.deepEqual(kinds, ["metadata", "tensor"]);
    const found = await sniffCheckpoint(new Response(bytes));
    assert.equal(found.compression, compression);
    await found.bytes.cancel();
  }
});

Deno.test("a Response that is not ok, or whose body was read, is a TypeError naming the status", async () => {
  await assert.rejects(
    () => loadCheckpoint(new Response("nope", { status: 404, statusText: "Not Found" })),
    (e: Error) => e instanceof TypeError && /HTTP 404 Not Found/.test(e.message),
  );
  const used = new Response(new Uint8Array([1]));
  await used.arrayBuffer();
  await assert.rejects(
    () => loadCheckpoint(used),
    (e: Error) => e instanceof TypeError && /already read/.test(e.message),
  );
});

Deno.test("bytes no codec recognises: the source stream is cancelled (so a file it reads closes)", async () => {
  let cancelled = false;
  const source = new ReadableStream<Uint8Array>({
    pull: (c) => c.enqueue(new Uint8Array(100)),
    cancel: () => void (cancelled = true),
  });
  await assert.rejects(
    loadCheckpoint(source),
    /^SyntaxError: Cannot decode checkpoint: unrecognised format at offset 0 /,
  );
  assert.ok(cancelled, "source left open");
});
