// readSafetensorsHeader and readSafetensorsTensors from every kind of address: a memory store,
// a local HTTP server (counting requests and bytes), and S3 (Ceph RGW).
import assert from "node:assert/strict";
import { join } from "node:path";
import { saveCheckpoint } from "../../mod.ts";
import type { TensorInput } from "../../src/format/types.ts";
import { safetensorsCodec } from "../../src/interop/safetensors.ts";
import { readSafetensorsHeader, readSafetensorsTensors } from "../../src/interop/safetensors_read.ts";
import { MemoryStore } from "../../src/storage/memory.ts";
import { s3Test } from "../_s3.ts";
import { serveDirectory } from "../storage/_http_server.ts";

const MiB = 2 ** 20;

/** Three tensors of 1 MiB each, distinct bytes. */
function tensors(): TensorInput[] {
  return ["a", "b", "c"].map((name, i) => {
    const data = new Float32Array(MiB / 4);
    for (let j = 0; j < data.length; j++) data[j] = i * 1e6 + j;
    return { name, dtype: "float32", shape: [data.length], data };
  });
}

Deno.test("readSafetensorsTensors reads from { store, key }", async () => {
  const store = new MemoryStore();
  await saveCheckpoint({ store, key: "m/model.safetensors" }, { metadata: { step: 3 }, tensors: tensors() }, {
    codec: safetensorsCodec,
  });
  const header = await readSafetensorsHeader({ store, key: "m/model.safetensors" });
  assert.deepEqual(header.tensors.map((t) => t.name), ["a", "b", "c"]);
  const some = await readSafetensorsTensors({ store, key: "m/model.safetensors" }, ["b"]);
  assert.deepEqual(some.tensors.map((t) => t.name), ["b"]);
  assert.deepEqual(some.tensors[0]!.data, tensors()[1]!.data);
  assert.equal(some.metadata.step, 3);
});

Deno.test("readSafetensorsTensors over https?:// reads the header and only the named tensor's range", async () => {
  const dir = await Deno.makeTempDir();
  const server = serveDirectory(dir);
  try {
    await saveCheckpoint(join(dir, "model.safetensors"), { metadata: { step: 1 }, tensors: tensors() }, {
      codec: safetensorsCodec,
    });
    const url = `${server.url}model.safetensors`;
    const header = await readSafetensorsHeader(url);
    assert.equal(header.tensors.length, 3);
    server.log.length = 0;
    const before = server.bytesSent;
    const some = await readSafetensorsTensors(url, ["c"]);
    assert.deepEqual(some.tensors[0]!.data, tensors()[2]!.data);
    // The tail (size, and the header when it is near), the head, then tensor c alone.
    assert.ok(server.log.length <= 3, `${server.log.length} requests: ${server.log.join(", ")}`);
    assert.ok(server.bytesSent - before < 1.2 * MiB, `${server.bytesSent - before} bytes for one 1 MiB tensor`);
    await assert.rejects(readSafetensorsTensors(url, ["nope"]), RangeError);
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});

s3Test("readSafetensorsHeader and readSafetensorsTensors read s3:// addresses", async (b) => {
  const storage = {
    s3: { endpoint: b.endpoint.endpoint, region: b.endpoint.region, credentials: b.endpoint.credentials },
  };
  const address = `s3://${b.name}/hf/model.safetensors`;
  await saveCheckpoint(address, { metadata: { step: 9 }, tensors: tensors() }, { codec: safetensorsCodec, storage });
  const header = await readSafetensorsHeader(address, { storage });
  assert.deepEqual(header.tensors.map((t) => [t.name, t.byteLength]), [["a", MiB], ["b", MiB], ["c", MiB]]);
  const some = await readSafetensorsTensors(address, ["a", "c"], { storage });
  assert.deepEqual(some.tensors.map((t) => t.name), ["a", "c"]);
  assert.deepEqual(some.tensors[1]!.data, tensors()[2]!.data);
});
