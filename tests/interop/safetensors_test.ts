import assert from "node:assert/strict";
import { decodeCheckpoint, encodeCheckpoint, loadCheckpoint, readCheckpointIndex, saveCheckpoint } from "../../mod.ts";
import type { Checkpoint, CheckpointInput, TensorInput } from "../../src/format/types.ts";
import {
  createSafetensorsCodec,
  decodeSafetensorsHeader,
  encodeSafetensorsHeader,
  safetensorsCodec,
} from "../../src/interop/safetensors.ts";
import { readSafetensorsHeader, readSafetensorsTensors } from "../../src/interop/safetensors_read.ts";
import { assertSameCheckpoint, collect, edgeCheckpoint, feeds, randomCheckpoint } from "../_util.ts";
import { REFERENCE_WRITTEN } from "./_safetensors_reference_cases.ts";

const utf8 = new TextEncoder();

/** A file from literal parts: the 8-byte length (`n`, default the header's length), the header text, the data bytes. */
function st(header: string | Uint8Array, data: number[] | Uint8Array = [], n?: bigint): Uint8Array {
  const h = typeof header === "string" ? utf8.encode(header) : header;
  const out = new Uint8Array(8 + h.byteLength + data.length);
  new DataView(out.buffer).setBigUint64(0, n ?? BigInt(h.byteLength), true);
  out.set(h, 8);
  out.set(data, 8 + h.byteLength);
  return out;
}

const F32_12 = [0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]; // float32 [1, 2]

/** Straight through the safetensors decoder (no detection), so malformed headers get its precise errors. */
async function decode(bytes: Uint8Array | ReadableStream<Uint8Array>, limits = {}): Promise<Checkpoint> {
  const source = bytes instanceof Uint8Array ? ReadableStream.from([bytes]) : bytes;
  const out: Checkpoint = { metadata: { step: 0 }, tensors: [] };
  for await (const r of source.pipeThrough(safetensorsCodec.decoder(limits))) {
    if (r.type === "metadata") out.metadata = r.metadata;
    else out.tensors.push(r.tensor);
  }
  return out;
}

Deno.test("safetensorsCodec.detect needs the 8-byte length and a header starting with {", () => {
  assert.ok(safetensorsCodec.detect(new Uint8Array([2, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x7d])));
  assert.ok(!safetensorsCodec.detect(new Uint8Array([8, 0, 0, 0, 0])));
  assert.ok(!safetensorsCodec.detect(new Uint8Array([2, 0, 0, 0, 0, 0, 0, 0, 0x5b, 0x5d])));
});

async function rejects(bytes: Uint8Array, cls: ErrorConstructor, pattern: RegExp, limits = {}): Promise<void> {
  for (const feed of feeds(bytes)) {
    await assert.rejects(() => decode(feed.stream(), limits), (e: Error) => {
      assert.ok(e instanceof cls, `${feed.name}: expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
      assert.match(e.message, pattern);
      assert.doesNotMatch(e.message, /\.$/);
      return true;
    });
  }
}

async function tmp(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "ckpt-st-" });
}

Deno.test("safetensors codec round-trips every dtype and all metadata bit for bit, fed three ways", async () => {
  const ckpt = edgeCheckpoint();
  const bytes = await collect(encodeCheckpoint(ckpt, { codec: safetensorsCodec }));
  for (const feed of feeds(bytes)) assertSameCheckpoint(await decode(feed.stream()), ckpt);
});

Deno.test("safetensors codec round-trips random checkpoints (empty and scalar tensors, groups) bit for bit", async () => {
  for (let seed = 1; seed <= 30; seed++) {
    const ckpt = randomCheckpoint(seed);
    const bytes = await collect(encodeCheckpoint(ckpt, { codec: safetensorsCodec }));
    assertSameCheckpoint(await decode(bytes), ckpt);
  }
});

Deno.test("ckpt -> safetensors -> ckpt gives a binary file byte-identical to the original", async () => {
  const dir = await tmp();
  try {
    for (const ckpt of [edgeCheckpoint(), randomCheckpoint(7), randomCheckpoint(8)]) {
      const first = await saveCheckpoint(`${dir}/a.ckpt`, ckpt);
      const loaded = await loadCheckpoint(`${dir}/a.ckpt`, { sha256: first.digest });
      const st1 = await saveCheckpoint(`${dir}/a.safetensors`, loaded, { codec: safetensorsCodec });
      const fromSt = await loadCheckpoint(`${dir}/a.safetensors`, { codecs: [safetensorsCodec], sha256: st1.digest });
      const second = await saveCheckpoint(`${dir}/b.ckpt`, fromSt);
      assert.equal(second.digest, first.digest);
      assert.deepEqual(await Deno.readFile(`${dir}/b.ckpt`), await Deno.readFile(`${dir}/a.ckpt`));
      // And back again: safetensors bytes are deterministic too.
      const st2 = await saveCheckpoint(`${dir}/b.safetensors`, fromSt, { codec: safetensorsCodec });
      assert.equal(st2.digest, st1.digest);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("safetensors writer lays out the file as the specification says: length, padded header, data", async () => {
  const bytes = await collect(encodeCheckpoint({
    metadata: { step: 5 },
    tensors: [
      { name: "attn.0", dtype: "float32", shape: [1, 2], data: new Float32Array([1, 2]) },
      { name: "mask", dtype: "bool", shape: [3], data: new Uint8Array([1, 0, 1]), group: "buffers" },
    ],
  }, { codec: safetensorsCodec }));
  const json = '{"__metadata__":{"ckpt.step":"5","ckpt.groups":"{\\"mask\\":\\"buffers\\"}"},' +
    '"attn.0":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"mask":{"dtype":"BOOL","shape":[3],"data_offsets":[8,11]}}';
  const padded = json + " ".repeat((8 - (json.length % 8)) % 8);
  assert.deepEqual(bytes, st(padded, [...F32_12, 1, 0, 1]));
  assert.equal((8 + padded.length) % 8, 0);
});

Deno.test("safetensors codec reads what the reference writer produces (its own test vector)", async () => {
  // The reference implementation's serialization test: one F32 tensor [1, 2, 3], no metadata.
  const vector = new Uint8Array([
    64,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    123,
    34,
    97,
    116,
    116,
    110,
    46,
    48,
    34,
    58,
    123,
    34,
    100,
    116,
    121,
    112,
    101,
    34,
    58,
    34,
    70,
    51,
    50,
    34,
    44,
    34,
    115,
    104,
    97,
    112,
    101,
    34,
    58,
    91,
    49,
    44,
    50,
    44,
    51,
    93,
    44,
    34,
    100,
    97,
    116,
    97,
    95,
    111,
    102,
    102,
    115,
    101,
    116,
    115,
    34,
    58,
    91,
    48,
    44,
    50,
    52,
    93,
    125,
    125,
    0,
    0,
    0,
    0,
    0,
    0,
    128,
    63,
    0,
    0,
    0,
    64,
    0,
    0,
    64,
    64,
    0,
    0,
    128,
    64,
    0,
    0,
    160,
    64,
  ]);
  const back = await decode(vector);
  assert.deepEqual(back.metadata, { step: 0 });
  assert.equal(back.tensors[0]!.name, "attn.0");
  assert.deepEqual(back.tensors[0]!.shape, [1, 2, 3]);
  assert.deepEqual(back.tensors[0]!.data, new Float32Array([0, 1, 2, 3, 4, 5]));
  // An empty file from the reference: "{}" padded with six spaces.
  const empty = await decode(new Uint8Array([8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32]));
  assert.deepEqual(empty, { metadata: { step: 0 }, tensors: [] });
});

Deno.test("safetensors reader orders tensors by data offset, whatever the header order", async () => {
  const back = await decode(st(
    '{"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}',
    [1, 2, 3],
  ));
  assert.deepEqual(back.tensors.map((t) => [t.name, [...t.data]]), [["a", [1, 2]], ["b", [3]]]);
});

Deno.test("safetensors metadata: NaN and infinite metrics, custom JSON and groups survive __metadata__ (strings only)", async () => {
  const metadata = {
    step: 42,
    epoch: 2,
    createdAt: "2026-12-02T10:00:00Z",
    metrics: { loss: NaN, best: -Infinity, top: Infinity, z: -0, acc: 0.1 },
    custom: { lr: 1e-3, nested: { list: [1, "two", null, true] } },
  };
  const bytes = await collect(encodeCheckpoint({
    metadata,
    tensors: [{ name: "m", dtype: "float32", shape: [], data: new Float32Array([1]), group: "optimizer" }],
  }, { codec: safetensorsCodec }));
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  for (const v of Object.values(header.__metadata__)) assert.equal(typeof v, "string");
  assert.deepEqual(header.__metadata__, {
    "ckpt.step": "42",
    "ckpt.epoch": "2",
    "ckpt.createdAt": "2026-12-02T10:00:00Z",
    "ckpt.metrics": '{"loss":"NaN","best":"-Infinity","top":"Infinity","z":"-0","acc":0.1}',
    "ckpt.custom": '{"lr":0.001,"nested":{"list":[1,"two",null,true]}}',
    "ckpt.groups": '{"m":"optimizer"}',
  });
  const back = await decode(bytes);
  assert.deepEqual(back.metadata, metadata);
  assert.ok(Object.is(back.metadata.metrics!.z, -0));
  assert.equal(back.tensors[0]!.group, "optimizer");
});

Deno.test("safetensors metadata of other tools is kept in custom and written back at the top level", async () => {
  const foreign = st(
    '{"__metadata__":{"format":"pt","note":"hi"},"w":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}}',
    [
      0xff,
    ],
  );
  const back = await decode(foreign);
  assert.deepEqual(back.metadata, { step: 0, custom: { "safetensors.__metadata__": { format: "pt", note: "hi" } } });
  const again = await collect(encodeCheckpoint(back, { codec: safetensorsCodec }));
  const h = decodeSafetensorsHeader(again.subarray(8, 8 + Number(new DataView(again.buffer).getBigUint64(0, true))));
  assert.deepEqual(h.metadata, back.metadata);
  // Written back byte for byte: the foreign entries at the top level only, not again in ckpt.custom.
  assert.deepEqual(again, foreign);
  await assert.rejects(
    () =>
      collect(
        encodeCheckpoint({ metadata: { step: 0, custom: { "safetensors.__metadata__": { n: 1 } } }, tensors: [] }, {
          codec: safetensorsCodec,
        }),
      ),
    (e: Error) => e instanceof TypeError && /is not a string/.test(e.message),
  );
  await assert.rejects(
    () =>
      collect(
        encodeCheckpoint({
          metadata: { step: 0, custom: { "safetensors.__metadata__": { "ckpt.step": "9" } } },
          tensors: [],
        }, { codec: safetensorsCodec }),
      ),
    (e: Error) => e instanceof TypeError && /reserved prefix/.test(e.message),
  );
});

Deno.test("safetensors metadata of other tools round-trips without doubling, whatever custom holds beside it", async () => {
  const F = "safetensors.__metadata__";
  const cases: CheckpointInput["metadata"][] = [
    { step: 0, custom: { [F]: { format: "pt" } } },
    { step: 3, custom: { [F]: { format: "pt" }, mine: [1, 2] } },
    { step: 3, custom: { mine: { a: 1 }, [F]: { format: "pt", x: "y" } } },
    { step: 3, custom: { [F]: {} } },
    { step: 3, custom: { a: 1, [F]: {}, b: 2 } },
    { step: 0 },
  ];
  for (const metadata of cases) {
    const ckpt = { metadata, tensors: [{ name: "w", dtype: "int8" as const, shape: [1], data: new Int8Array([3]) }] };
    const bytes = await collect(encodeCheckpoint(ckpt, { codec: safetensorsCodec }));
    const back = await decode(bytes);
    // Exact, key order included: the binary checkpoint written after the trip is the same bytes.
    assert.deepEqual(
      await collect(encodeCheckpoint(back)),
      await collect(encodeCheckpoint(ckpt)),
      JSON.stringify(metadata),
    );
    assert.deepEqual(await collect(encodeCheckpoint(back, { codec: safetensorsCodec })), bytes);
    const text = new TextDecoder().decode(bytes);
    assert.equal(text.split('"format"').length - 1, /format/.test(JSON.stringify(metadata)) ? 1 : 0, text);
  }
  // Step 0 and nothing else: no __metadata__ at all, as the reference writes a file without metadata.
  const plain = await collect(encodeCheckpoint({ metadata: { step: 0 }, tensors: [] }, { codec: safetensorsCodec }));
  assert.equal(new TextDecoder().decode(plain.subarray(8)), "{}      ");
});

Deno.test("the files the reference's own tests say it writes, ckpt reads and writes back byte for byte", async () => {
  for (const [name, bytes] of REFERENCE_WRITTEN) {
    const back = await decode(bytes);
    assert.deepEqual(await collect(encodeCheckpoint(back, { codec: safetensorsCodec })), bytes, name);
  }
  // And from a checkpoint built by hand: test_serialization_metadata's {"test1": zeros((2, 2), int32)}.
  const ckpt = {
    metadata: { step: 0, custom: { "safetensors.__metadata__": { framework: "pt" } } },
    tensors: [{ name: "test1", dtype: "int32" as const, shape: [2, 2], data: new Int32Array(4) }],
  };
  const metadataCase = REFERENCE_WRITTEN.find(([name]) => name === "test_serialization_metadata")![1];
  assert.deepEqual(await collect(encodeCheckpoint(ckpt, { codec: safetensorsCodec })), metadataCase);
});

Deno.test("a safetensors file with a 9 MiB metadata value is written back with the same header, which loads again", async () => {
  const big = "x".repeat(9 * 2 ** 20);
  const file = st(`{"__metadata__":{"blob":"${big}"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, [5]);
  const back = await loadCheckpoint(file);
  const again = await collect(encodeCheckpoint(back, { codec: safetensorsCodec }));
  assert.equal(again.byteLength, file.byteLength + ((8 - ((file.byteLength - 9) % 8)) % 8));
  assert.deepEqual((await loadCheckpoint(again)).metadata, back.metadata);
});

Deno.test("safetensors metadata that is not valid Unicode (a lone surrogate) is refused on read and on write, naming the key", async () => {
  await rejects(
    st('{"__metadata__":{"note":"a\\ud800"}}'),
    SyntaxError,
    /"__metadata__" value for "note" is not valid Unicode \(a lone surrogate\) at offset 8/,
  );
  await rejects(
    st('{"__metadata__":{"\\udc00":"x"}}'),
    SyntaxError,
    /"__metadata__" key "\\udc00" is not valid Unicode/,
  );
  const write = (metadata: CheckpointInput["metadata"]) =>
    collect(encodeCheckpoint({ metadata, tensors: [] }, { codec: safetensorsCodec }));
  const F = "safetensors.__metadata__";
  for (
    const [metadata, pattern] of [
      [
        { step: 1, createdAt: "2026-01-01\ud800" },
        /createdAt for safetensors: value for "ckpt.createdAt" is not valid Unicode/,
      ],
      [{ step: 1, custom: { [F]: { note: "\udfff" } } }, /value for "note" is not valid Unicode \(a lone surrogate\)/],
      [{ step: 1, custom: { [F]: { "k\ud83d": "v" } } }, /key "k\\ud83d" is not valid Unicode/],
    ] as const
  ) {
    await assert.rejects(() => write(metadata), (e: Error) => e instanceof TypeError && pattern.test(e.message));
  }
  // Elsewhere a lone surrogate is JSON text inside a value (escaped by JSON.stringify), which readers take.
  const ok = { step: 1, metrics: { "l\ud800": 1 }, custom: { s: "\ud800" } };
  assert.deepEqual((await decode(await write(ok))).metadata, ok);
});

// ---- Streaming write ----

function lazyTensors(
  count: number,
  elements: number,
): { descriptors: TensorInput[]; make: () => AsyncGenerator<TensorInput> } {
  const descriptors = Array.from({ length: count }, (_, i) => ({
    name: `layer${i}/w`,
    dtype: "float32" as const,
    shape: [elements],
    data: new Float32Array(0),
    group: i % 3 === 0 ? "optimizer" : "params",
  }));
  return {
    descriptors,
    make: async function* () {
      for (let i = 0; i < count; i++) {
        const data = new Float32Array(elements);
        data.fill(i + 0.5);
        yield { ...descriptors[i]!, data };
      }
    },
  };
}

Deno.test("safetensors streaming write with announced descriptors gives the same bytes as the buffered write", async () => {
  const { descriptors, make } = lazyTensors(5, 1000);
  const codec = createSafetensorsCodec({ tensors: descriptors });
  const streamed = await collect(encodeCheckpoint({ metadata: { step: 3 }, tensors: make() }, { codec }));
  const all: TensorInput[] = [];
  for await (const t of make()) all.push(t);
  const buffered = await collect(
    encodeCheckpoint({ metadata: { step: 3 }, tensors: all }, { codec: safetensorsCodec }),
  );
  assert.deepEqual(streamed, buffered);
});

Deno.test("safetensors streaming write emits the header before the first tensor is produced", async () => {
  const { descriptors } = lazyTensors(2, 4);
  let produced = 0;
  async function* slow(): AsyncGenerator<TensorInput> {
    for (const d of descriptors) {
      produced++;
      yield { ...d, data: new Float32Array(4) };
    }
  }
  const reader = encodeCheckpoint({ metadata: { step: 1 }, tensors: slow() }, {
    codec: createSafetensorsCodec({ tensors: descriptors }),
  }).getReader();
  const first = await reader.read();
  assert.equal(produced <= 1, true, `header should go out before the tensors are drained (produced ${produced})`);
  assert.equal(first.value![8], 0x7b);
  await reader.cancel();
});

Deno.test("safetensors streaming write rejects tensors that differ from the descriptors, and a failed save keeps the old file", async () => {
  const dir = await tmp();
  try {
    const path = `${dir}/m.safetensors`;
    await saveCheckpoint(path, { metadata: { step: 1 }, tensors: [] }, { codec: safetensorsCodec });
    const before = await Deno.readFile(path);
    const d = [{ name: "a", dtype: "float32" as const, shape: [2] }, {
      name: "b",
      dtype: "int32" as const,
      shape: [1],
    }];
    const codec = createSafetensorsCodec({ tensors: d });
    const a = { name: "a", dtype: "float32" as const, shape: [2], data: new Float32Array(2) };
    const b = { name: "b", dtype: "int32" as const, shape: [1], data: new Int32Array(1) };
    const cases: [TensorInput[], RegExp][] = [
      [[a], /announced 2 tensors but 1 arrived \(next expected "b"\)/],
      [[a, b, { ...b, name: "c" }], /one more than the 2 announced/],
      [[b, a], /tensor #0 is "b" .* but the header announced "a"/],
      [[a, { ...b, shape: [1, 1] }], /tensor #1 is "b" \(int32 \[1, 1\].*announced "b" \(int32 \[1\]/],
      [[a, { ...b, group: "optimizer" }], /group optimizer\) but the header announced "b" .*group params/],
    ];
    for (const [tensors, pattern] of cases) {
      await assert.rejects(() => saveCheckpoint(path, { metadata: { step: 2 }, tensors }, { codec }), (e: Error) => {
        assert.ok(e instanceof TypeError, e.message);
        assert.match(e.message, pattern);
        return true;
      });
      assert.deepEqual(await Deno.readFile(path), before);
    }
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["m.safetensors"]);
    assert.throws(() => createSafetensorsCodec({ tensors: [d[0]!, d[0]!] }), /duplicate tensor name "a"/);
    assert.throws(
      () => createSafetensorsCodec({ tensors: [{ name: "x", dtype: "complex64" as "float32", shape: [] }] }),
      TypeError,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

async function* tensorsOf(path: string): AsyncGenerator<TensorInput> {
  for await (const record of decodeCheckpoint(path)) {
    if (record.type === "tensor") yield record.tensor;
  }
}

Deno.test("safetensors conversion of a binary checkpoint streams with descriptors from its index", async () => {
  const dir = await tmp();
  try {
    const ckpt = edgeCheckpoint();
    await saveCheckpoint(`${dir}/a.ckpt`, ckpt);
    const index = await readCheckpointIndex(`${dir}/a.ckpt`);
    const codec = createSafetensorsCodec({ tensors: index.tensors });
    await saveCheckpoint(`${dir}/a.safetensors`, { metadata: index.metadata, tensors: tensorsOf(`${dir}/a.ckpt`) }, {
      codec,
    });
    assertSameCheckpoint(await loadCheckpoint(`${dir}/a.safetensors`, { codecs: [codec] }), ckpt);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("safetensors streaming write holds one tensor at a time: 512 MiB through a subprocess stays far below", async () => {
  const script = `
    import { encodeCheckpoint } from "${new URL("../../mod.ts", import.meta.url).href}";
    import { createSafetensorsCodec } from "${new URL("../../src/interop/safetensors.ts", import.meta.url).href}";
    const count = 128, elements = 1 << 20; // 128 tensors of 4 MiB
    const descriptors = Array.from({ length: count }, (_, i) => ({ name: "t" + i, dtype: "float32", shape: [elements] }));
    async function* tensors() {
      for (let i = 0; i < count; i++) yield { ...descriptors[i], data: new Float32Array(elements).fill(i) };
    }
    let peak = 0, bytes = 0;
    const stream = encodeCheckpoint({ metadata: { step: 1 }, tensors: tensors() }, { codec: createSafetensorsCodec({ tensors: descriptors }) });
    let n = 0;
    for await (const chunk of stream) {
      bytes += chunk.byteLength;
      if (++n % 16 === 0) globalThis.gc(); // measure what is retained, not what the GC has yet to collect
      peak = Math.max(peak, Deno.memoryUsage().rss);
    }
    console.log(JSON.stringify({ bytes, peak }));
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, err);
  const { bytes, peak } = JSON.parse(new TextDecoder().decode(out.stdout));
  assert.ok(bytes > 512 * 2 ** 20, `wrote ${bytes} bytes`);
  console.log(`streamed ${Math.round(bytes / 2 ** 20)} MiB, peak RSS ${Math.round(peak / 2 ** 20)} MiB`);
  assert.ok(peak < 160 * 2 ** 20, `peak RSS ${Math.round(peak / 2 ** 20)} MiB while streaming 512 MiB`);
});

// ---- Strict read: each rule from literal bytes ----

Deno.test("safetensors reader rejects a file shorter than the 8-byte length", async () => {
  await rejects(
    new Uint8Array([8, 0, 0, 0, 0]),
    SyntaxError,
    /stream ends at offset 5 with 3 bytes of the header length missing/,
  );
});

Deno.test("safetensors reader rejects a header length over maxHeaderBytes before reading it", async () => {
  await rejects(
    st("{}", [], 1n << 32n),
    RangeError,
    /header of 4294967296 bytes exceeds maxHeaderBytes 16777216 at offset 0/,
  );
  await rejects(st('{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'), RangeError, /exceeds maxHeaderBytes 16/, {
    maxHeaderBytes: 16,
  });
});

Deno.test("a load recognises safetensors whatever its header length says, so an absurd one gets the cap message", async () => {
  for (const length of [100n * 2n ** 20n, 1n << 40n, 1n << 62n, (1n << 64n) - 1n]) {
    await assert.rejects(
      () => loadCheckpoint(st("{}", [], length)),
      (e) =>
        e instanceof RangeError &&
        new RegExp(`^Cannot decode safetensors: header of ${length} bytes exceeds maxHeaderBytes`).test(e.message),
    );
  }
});

Deno.test("safetensors reader rejects a header that runs past the end of the file", async () => {
  await rejects(st("{}", [], 100n), SyntaxError, /stream ends at offset 10 with 98 bytes of the JSON header missing/);
});

Deno.test("safetensors reader rejects a header length too small for an object", async () => {
  await rejects(st("{", [], 1n), SyntaxError, /header of 1 bytes cannot hold a JSON object at offset 0/);
});

Deno.test("safetensors reader rejects a header that is not UTF-8", async () => {
  await rejects(
    st(new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d, 0x20])),
    SyntaxError,
    /header is not valid UTF-8 at offset 8/,
  );
});

Deno.test("safetensors reader takes JSON whitespace before the header's {, as the reference does, and nothing else", async () => {
  // The reference's test_whitespace_leading_padded_header, byte for byte.
  const reference = new Uint8Array([6, 0, 0, 0, 0, 0, 0, 0, 0x09, 0x0a, 0x7b, 0x7d, 0x0d, 0x20]);
  for (const feed of feeds(reference)) {
    assert.deepEqual(await decode(feed.stream()), { metadata: { step: 0 }, tensors: [] });
  }
  assert.ok(safetensorsCodec.detect(reference));
  // Detected so, by default and with the codec named, and so loaded rather than "unrecognised format".
  const padded = st('  \n{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', [7, 9]);
  for (const options of [{}, { codecs: [safetensorsCodec] }]) {
    const back = await loadCheckpoint(padded, options);
    assert.deepEqual(back.tensors.map((t) => [t.name, [...t.data]]), [["w", [7, 9]]]);
  }
  await rejects(st("[]      "), SyntaxError, /header is not a JSON object at offset 8/);
  await rejects(st(' "a"    '), SyntaxError, /header is not a JSON object at offset 8/);
  await rejects(st("\v{}     "), SyntaxError, /expected a JSON value, found "\\u000b" at offset 8/);
  assert.ok(!safetensorsCodec.detect(st("\v{}     ")));
});

Deno.test("safetensors reader rejects a header that is not JSON, naming the byte", async () => {
  await rejects(
    st('{"a":}  '),
    SyntaxError,
    /header is not valid JSON: expected a JSON value, found "\}" at offset 13/,
  );
  await rejects(st('{"a" 1} '), SyntaxError, /expected ":", found "1" at offset 13/);
  await rejects(st("{'a':1} "), SyntaxError, /expected a string key/);
  await rejects(st('{"a":01}'), SyntaxError, /leading zero/);
  await rejects(st(`{"a":${"[".repeat(100)}`), SyntaxError, /nests deeper than 64 levels/);
});

Deno.test("safetensors reader accepts space padding and unaligned headers, and refuses other padding", async () => {
  const json = '{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}';
  for (const header of [json, json + "   ", json + " \n\t\r"]) {
    const back = await decode(st(header, [7, 8]));
    assert.deepEqual([...back.tensors[0]!.data], [7, 8]);
  }
  await rejects(
    st(json + "\0\0\0", [7, 8]),
    SyntaxError,
    /unexpected bytes after the JSON value \(only whitespace may pad the header\) at offset 61/,
  );
  await rejects(st(json + " x", [7, 8]), SyntaxError, /unexpected bytes after the JSON value/);
});

Deno.test("safetensors reader rejects duplicate tensor names and duplicate __metadata__ keys", async () => {
  await rejects(
    st('{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', [
      1,
      2,
    ]),
    SyntaxError,
    /duplicate key "w" in the object at offset 8 at offset 61/,
  );
  await rejects(st('{"__metadata__":{"k":"a","k":"b"}}'), SyntaxError, /duplicate key "k"/);
  await rejects(
    st('{"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', [1]),
    SyntaxError,
    /duplicate key "dtype"/,
  );
});

Deno.test("safetensors reader rejects __metadata__ that is not a map of strings", async () => {
  await rejects(st('{"__metadata__":{"n":1}}'), SyntaxError, /"__metadata__" value for "n" is 1, not a string/);
  await rejects(st('{"__metadata__":["a"]}'), SyntaxError, /"__metadata__" is an array, not an object of strings/);
  await rejects(st('{"__metadata__":{"ckpt.step":"-1"}}'), SyntaxError, /"ckpt.step" is "-1", not a decimal integer/);
  await rejects(st('{"__metadata__":{"ckpt.bogus":"1"}}'), SyntaxError, /unknown key "ckpt.bogus"/);
  await rejects(st('{"__metadata__":{"ckpt.metrics":"{"}}'), SyntaxError, /"ckpt.metrics" is not valid JSON/);
  await rejects(
    st('{"__metadata__":{"ckpt.groups":"{\\"x\\":\\"optimizer\\"}"}}'),
    SyntaxError,
    /names tensor "x", which the file lacks/,
  );
});

Deno.test("safetensors reader rejects malformed tensor entries", async () => {
  const one = (entry: string) => st(`{"w":${entry}}`, [0, 0, 0, 0]);
  await rejects(
    one('{"dtype":"F32","shape":[1]}'),
    SyntaxError,
    /tensor "w" has data_offsets missing, not \[begin, end\]/,
  );
  await rejects(
    one('{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}'),
    SyntaxError,
    /unknown field "extra"/,
  );
  await rejects(
    one('{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}'),
    SyntaxError,
    /data_offsets end is 4, not a non-negative integer/,
  );
  await rejects(one('{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}'), SyntaxError, /not \[begin, end\]/);
  await rejects(
    one('{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}'),
    SyntaxError,
    /shape dimension 0 is -1, not a non-negative integer/,
  );
  await rejects(one('{"dtype":"F32","shape":{},"data_offsets":[0,4]}'), SyntaxError, /shape an object, not an array/);
  await rejects(one('{"dtype":"float32","shape":[1],"data_offsets":[0,4]}'), SyntaxError, /unknown dtype "float32"/);
  for (
    const dtype of ["F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"]
  ) {
    await rejects(
      one(`{"dtype":"${dtype}","shape":[4],"data_offsets":[0,4]}`),
      RangeError,
      new RegExp(`dtype ${dtype}, which ckpt cannot hold`),
    );
  }
  // "-0" is no integer to the reference (serde_json reads a float), so neither a size nor an offset.
  await rejects(
    one('{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}'),
    SyntaxError,
    /shape dimension 0 is -0, not a non-negative integer/,
  );
  await rejects(
    st('{"w":{"dtype":"U8","shape":[1],"data_offsets":[-0,1]}}', [1]),
    SyntaxError,
    /data_offsets begin is -0, not a non-negative integer/,
  );
  await rejects(
    one('{"dtype":"F32","shape":[1],"data_offsets":[0,9007199254740993]}'),
    RangeError,
    /data_offsets end is 9007199254740993, over 2\^53 - 1/,
  );
  await rejects(
    st('{"__proto__":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
    SyntaxError,
    /tensor name "__proto__" is reserved/,
  );
  await rejects(st('{"w":[]}'), SyntaxError, /tensor "w" is an array, not an object/);
});

Deno.test("safetensors reader rejects offsets with a gap, an overlap, or an end before the begin", async () => {
  const two = (a: string, b: string, data: number[]) =>
    st(`{"a":{"dtype":"U8","shape":[2],"data_offsets":${a}},"b":{"dtype":"U8","shape":[2],"data_offsets":${b}}}`, data);
  await rejects(
    two("[0,2]", "[3,5]", [1, 2, 0, 3, 4]),
    SyntaxError,
    /tensor "b" starts at data offset 3, leaving a gap after 2/,
  );
  await rejects(
    two("[1,3]", "[3,5]", [0, 1, 2, 3, 4]),
    SyntaxError,
    /tensor "a" starts at data offset 1, leaving a gap after 0/,
  );
  await rejects(
    two("[0,2]", "[1,3]", [1, 2, 3]),
    SyntaxError,
    /tensor "b" starts at data offset 1, overlapping data that ends at 2/,
  );
  await rejects(two("[0,2]", "[0,2]", [1, 2]), SyntaxError, /overlapping data that ends at 2/);
  await rejects(two("[0,2]", "[4,2]", [1, 2]), SyntaxError, /data_offsets \[4, 2\] that end before they begin/);
});

Deno.test("safetensors reader rejects byte lengths that differ from elements times dtype size", async () => {
  await rejects(
    st('{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}', new Array(12).fill(0)),
    SyntaxError,
    /tensor "w" of dtype F32 and shape \[2, 2\] needs 16 bytes, but its data_offsets \[0, 12\] span 12/,
  );
  await rejects(
    st('{"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,3]}}', [0, 0, 0]),
    SyntaxError,
    /needs 6 bytes, but its data_offsets \[0, 3\] span 3/,
  );
});

Deno.test("safetensors reader rejects a file longer or shorter than header plus data", async () => {
  const h = '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}';
  await rejects(
    st(h, [...F32_12, 0]),
    SyntaxError,
    /bytes after the last tensor's data \(the header's offsets must cover the file exactly, 70 bytes\) at offset 70/,
  );
  await rejects(st(h, F32_12.slice(0, 5)), SyntaxError, /stream ends at offset 67 with 3 bytes of tensor "w" missing/);
  const dir = await tmp();
  try {
    await Deno.writeFile(`${dir}/long.safetensors`, st(h, [...F32_12, 0]));
    await assert.rejects(
      () => readSafetensorsHeader(`${dir}/long.safetensors`),
      /file is 71 bytes but its header accounts for 70 \(8 \+ 54 header \+ 8 data\)/,
    );
    await Deno.writeFile(`${dir}/short.safetensors`, st(h, F32_12.slice(0, 5)));
    await assert.rejects(() => readSafetensorsTensors(`${dir}/short.safetensors`, ["w"]), SyntaxError);
    await Deno.writeFile(`${dir}/cut.safetensors`, st(h).subarray(0, 20));
    await assert.rejects(
      () => readSafetensorsHeader(`${dir}/cut.safetensors`),
      /header of 54 bytes runs past the end of the 20-byte file at offset 0/,
    );
    await Deno.writeFile(`${dir}/tiny.safetensors`, new Uint8Array(3));
    await assert.rejects(
      () => readSafetensorsHeader(`${dir}/tiny.safetensors`),
      /file of 3 bytes is shorter than the 8-byte header length/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("safetensors reader rejects bool bytes other than 0 and 1", async () => {
  await rejects(
    st('{"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', [1, 2]),
    SyntaxError,
    /bool tensor "m" element 1 is 2, not 0 or 1 at offset 63/,
  );
});

Deno.test("safetensors reader enforces maxTensorBytes, maxRank and maxTensors", async () => {
  const h = '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}';
  await rejects(st(h, F32_12), RangeError, /tensor "w" has 8 bytes, over maxTensorBytes 4/, { maxTensorBytes: 4 });
  await rejects(
    st('{"w":{"dtype":"U8","shape":[1,1,1],"data_offsets":[0,1]}}', [1]),
    RangeError,
    /rank 3, over maxRank 2/,
    { maxRank: 2 },
  );
  await rejects(
    st('{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
    RangeError,
    /more than maxTensors 1 tensors/,
    { maxTensors: 1 },
  );
  await rejects(
    st(`{"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, F32_12),
    RangeError,
    /more than 2\^53 elements/,
  );
});

// ---- Partial load, detection ----

Deno.test("safetensors partial load reads only the named tensors' byte ranges", async () => {
  const dir = await tmp();
  try {
    // "bad" holds a 2 in a bool: reading it fails, so a partial load that succeeds never read it.
    const bytes = st(
      '{"__metadata__":{"ckpt.step":"9"},"bad":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}}',
      [2, ...F32_12],
    );
    await Deno.writeFile(`${dir}/p.safetensors`, bytes);
    const some = await readSafetensorsTensors(`${dir}/p.safetensors`, ["w"]);
    assert.equal(some.metadata.step, 9);
    assert.deepEqual(some.tensors.map((t) => [t.name, [...t.data]]), [["w", [1, 2]]]);
    await assert.rejects(
      () => loadCheckpoint(`${dir}/p.safetensors`, { codecs: [safetensorsCodec] }),
      /bool tensor "bad"/,
    );
    await assert.rejects(() => readSafetensorsTensors(`${dir}/p.safetensors`, ["bad"]), /bool tensor "bad"/);
    await assert.rejects(
      () => readSafetensorsTensors(`${dir}/p.safetensors`, ["w", "nope"]),
      (e: Error) => e instanceof RangeError && /no tensor named "nope"/.test(e.message),
    );
    const header = await readSafetensorsHeader(`${dir}/p.safetensors`);
    assert.deepEqual(header.tensors.map((t) => [t.name, t.offset, t.byteLength]), [["bad", 8 + header.headerBytes, 1], [
      "w",
      9 + header.headerBytes,
      8,
    ]]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("safetensors detection: recognised by default, and never mistaken for binary or JSON checkpoints", async () => {
  const ckpt: CheckpointInput = { metadata: { step: 1 }, tensors: [] };
  const stBytes = await collect(encodeCheckpoint(ckpt, { codec: safetensorsCodec }));
  assert.ok(safetensorsCodec.detect(stBytes.subarray(0, 64)));
  assert.ok(!safetensorsCodec.detect(await collect(encodeCheckpoint(ckpt))));
  assert.ok(!safetensorsCodec.detect(await collect(encodeCheckpoint(ckpt, { codec: "json" }))));
  assert.ok(!safetensorsCodec.detect(utf8.encode("hello, world")));
  assert.deepEqual((await loadCheckpoint(stBytes)).metadata, { step: 1 });
  // Through gzip as well.
  const gz = await collect(encodeCheckpoint(ckpt, { codec: safetensorsCodec, compression: "gzip" }));
  assert.deepEqual((await loadCheckpoint(gz)).metadata, { step: 1 });
});

Deno.test("encodeSafetensorsHeader refuses bad descriptors with TypeErrors naming the tensor", () => {
  assert.throws(
    () => encodeSafetensorsHeader({ step: 0 }, [{ name: "", dtype: "float32", shape: [] }]),
    /must not be empty/,
  );
  assert.throws(
    () => encodeSafetensorsHeader({ step: 0 }, [{ name: "w", dtype: "float32", shape: [-1] }]),
    /dimension 0 is -1/,
  );
  assert.throws(() => encodeSafetensorsHeader({ step: -1 }, []), TypeError);
});
