import assert from "node:assert/strict";
import { join } from "node:path";
import {
  ChecksumMismatchError,
  decodeCheckpoint,
  loadCheckpoint,
  ObjectNotFoundError,
  readCheckpointIndex,
  safetensorsCodec,
  saveCheckpoint,
} from "../../mod.ts";
import { assertSameTensors, edgeCheckpoint, edgeTensors, withDir } from "../_util.ts";
import { buildRaw, meta, tensor } from "../format/codecs/_binary_builder.ts";

async function sha256sum(path: string): Promise<string> {
  const out = await new Deno.Command("sha256sum", { args: [path] }).output();
  return new TextDecoder().decode(out.stdout).split(" ")[0]!;
}

Deno.test("loadCheckpoint({ only }) seeks through the index and reads nothing else", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.ckpt");
    await saveCheckpoint(path, edgeCheckpoint());
    const index = await readCheckpointIndex(path);
    // Corrupt the data of every tensor except "i64"/"mask": a full load fails, a selective one does not.
    const bytes = await Deno.readFile(path);
    for (const e of index.tensors) {
      if (e.name === "mask" || e.name === "u64") continue;
      bytes[e.offset + e.length - 40]! ^= 0xff;
    }
    await Deno.writeFile(path, bytes);
    await assert.rejects(() => loadCheckpoint(path), ChecksumMismatchError);
    const some = await loadCheckpoint(path, { only: ["mask", "u64"] });
    assert.equal(some.metadata.step, 1234);
    assertSameTensors(some.tensors, edgeTensors().filter((t) => t.name === "u64" || t.name === "mask"));
    // A selected tensor whose bytes are corrupt is refused.
    await assert.rejects(() => loadCheckpoint(path, { only: ["f32"] }), ChecksumMismatchError);
  });
});

Deno.test("loadCheckpoint({ only }) works on every codec and names missing tensors", async () => {
  await withDir(async (dir) => {
    for (const [codec, compression] of [["binary", "none"], ["binary", "gzip"], ["json", "none"]] as const) {
      const path = join(dir, `${codec}-${compression}.ckpt`);
      await saveCheckpoint(path, edgeCheckpoint(), { codec, compression });
      const got = await loadCheckpoint(path, { only: ["f16", "scalar"] });
      assertSameTensors(got.tensors, edgeTensors().filter((t) => t.name === "f16" || t.name === "scalar"));
      await assert.rejects(() => loadCheckpoint(path, { only: ["f16", "nope"] }), /no tensor named "nope"/);
    }
  });
});

Deno.test("readCheckpointIndex lists tensors and metadata without reading data", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.ckpt");
    const { bytes } = await saveCheckpoint(path, edgeCheckpoint());
    const index = await readCheckpointIndex(path);
    assert.equal(index.bytes, bytes);
    assert.deepEqual(index.metadata, edgeCheckpoint().metadata);
    assert.deepEqual(index.tensors.map((t) => t.name), edgeTensors().map((t) => t.name));
    assert.deepEqual(index.tensors[0]!.shape, [3, 4]);
    await Deno.writeFile(path, new Uint8Array(10));
    await assert.rejects(() => readCheckpointIndex(path), /file of 10 bytes is too short/);
  });
});

Deno.test("loadCheckpoint({ sha256 }) refuses bytes with another digest", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.ckpt");
    const { sha256 } = await saveCheckpoint(path, edgeCheckpoint(), { sha256sum: true });
    assert.equal(sha256, await sha256sum(path));
    await loadCheckpoint(path, { sha256: sha256!.toUpperCase() });
    const wrong = sha256!.replace(/^./, (c) => (c === "0" ? "1" : "0"));
    await assert.rejects(() => loadCheckpoint(path, { sha256: wrong }), (e: ChecksumMismatchError) => {
      assert.ok(e instanceof ChecksumMismatchError);
      assert.equal(e.expected, wrong);
      assert.equal(e.actual, sha256);
      return true;
    });
    await assert.rejects(() => loadCheckpoint(path, { sha256: "abc" }), TypeError);
  });
});

Deno.test("saveCheckpoint returns the stream digest by default, and loadCheckpoint({ sha256 }) accepts it", async () => {
  await withDir(async (dir) => {
    for (const [codec, compression] of [["binary", "none"], ["binary", "gzip"], ["json", "none"]] as const) {
      const path = join(dir, `a-${codec}-${compression}.ckpt`);
      const saved = await saveCheckpoint(path, edgeCheckpoint(), { codec, compression });
      // The binary codec computes no file digest unless asked for (JSON's costs nothing).
      assert.equal(saved.sha256 === undefined, codec === "binary", `${codec} ${compression}`);
      assert.notEqual(saved.digest, await sha256sum(path));
      const stored = codec === "binary" && compression === "none"
        ? (await readCheckpointIndex(path)).streamSha256
        : saved.digest;
      assert.equal(saved.digest, stored);
      // From a path and from a stream, by either digest.
      await loadCheckpoint(path, { sha256: saved.digest });
      await loadCheckpoint(await Deno.readFile(path), { sha256: saved.digest });
      await loadCheckpoint(await Deno.readFile(path), { sha256: await sha256sum(path) });
      const wrong = saved.digest.replace(/^./, (c) => (c === "0" ? "1" : "0"));
      await assert.rejects(() => loadCheckpoint(path, { sha256: wrong }), ChecksumMismatchError);
      const bytes = await Deno.readFile(path);
      await assert.rejects(() => loadCheckpoint(bytes, { sha256: wrong }), ChecksumMismatchError);
    }
  });
});

Deno.test("loadCheckpoint({ sha256: stream digest }) still refuses a file whose body was changed", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.ckpt");
    const { digest } = await saveCheckpoint(path, edgeCheckpoint());
    const bytes = await Deno.readFile(path);
    const body = (await readCheckpointIndex(path)).tensors[0]!;
    bytes[body.offset + body.length - 33]! ^= 1; // the last byte of the first tensor's body
    await Deno.writeFile(path, bytes);
    await assert.rejects(() => loadCheckpoint(path, { sha256: digest }), ChecksumMismatchError);
  });
});

Deno.test("random-access reads reject inconsistent indexes from literal bytes", async (t) => {
  const f32 = new Uint8Array(new Float32Array([1, 2]).buffer);
  const W = { name: "w", dtype: "float32", shape: [2], group: "params" };
  const cases: [string, Uint8Array, RegExp][] = [
    [
      "index offset outside the file",
      buildRaw({ records: [meta(), tensor(W, f32)], indexOffset: 1n << 40n }),
      /footer points to an index at 1099511627776, outside the file/,
    ],
    [
      "index entry points elsewhere",
      buildRaw({
        records: [meta(), tensor(W, f32)],
        index: JSON.stringify({ tensors: [{ ...W, offset: 80, length: 158 }] }),
      }),
      /index entry "w" points to 80, expected 74/,
    ],
    [
      "index entry length wrong",
      buildRaw({
        records: [meta(), tensor(W, f32)],
        index: JSON.stringify({ tensors: [{ ...W, offset: 74, length: 100 }] }),
      }),
      /index entries end at 174, but the index starts at 232/,
    ],
    [
      "index entry disagrees with record",
      buildRaw({
        records: [meta(), tensor(W, f32)],
        index: JSON.stringify({ tensors: [{ ...W, name: "v", offset: 74, length: 158 }] }),
      }),
      /tensor record disagrees with its index entry "v"|no tensor named "w"/,
    ],
    [
      "index entry duplicated",
      buildRaw({
        records: [meta(), tensor(W, f32), tensor({ ...W, name: "x" }, f32)],
        index: JSON.stringify({ tensors: [{ ...W, offset: 74, length: 158 }, { ...W, offset: 232, length: 158 }] }),
      }),
      /index lists "w" twice/,
    ],
    [
      "bad index digest",
      buildRaw({ records: [meta(), tensor(W, f32)] }).map((b, i, a) => (i === a.length - 49 ? b ^ 1 : b)),
      /Checksum mismatch for record at offset 232/,
    ],
  ];
  for (const [name, bytes, pattern] of cases) {
    await t.step(name, async () => {
      await withDir(async (dir) => {
        const path = join(dir, "x.ckpt");
        await Deno.writeFile(path, bytes);
        await assert.rejects(() => loadCheckpoint(path, { only: ["w"] }), pattern);
      });
    });
  }
});

Deno.test("loadCheckpoint rejects sources that are not byte sources", async () => {
  await assert.rejects(() => loadCheckpoint(42 as unknown as string), /source must be a path, a file: URL/);
  await assert.rejects(() => loadCheckpoint(new URL("ftp://example.com/x.ckpt")), TypeError, "unsupported scheme ftp:");
  await assert.rejects(() => loadCheckpoint("/nonexistent/x.ckpt"), Deno.errors.NotFound);
});

Deno.test("loadCheckpoint({ only }) seeks through any codec that reads by name: safetensors reads only its ranges", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "m.safetensors");
    const tensors = [
      { name: "mask", dtype: "bool" as const, shape: [4], data: new Uint8Array([1, 0, 1, 0]) },
      { name: "w", dtype: "float32" as const, shape: [2], data: new Float32Array([1.5, -2]) },
    ];
    await saveCheckpoint(path, { metadata: { step: 3 }, tensors }, { codec: safetensorsCodec });
    // Make the bool tensor invalid (a 2): a full load must refuse it, a load of "w" never reads it.
    const bytes = await Deno.readFile(path);
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    bytes[8 + headerLength] = 2;
    await Deno.writeFile(path, bytes);
    await assert.rejects(() => loadCheckpoint(path, { codecs: [safetensorsCodec] }), /not 0 or 1/);
    const some = await loadCheckpoint(path, { only: ["w"], codecs: [safetensorsCodec] });
    assert.equal(some.metadata.step, 3);
    assertSameTensors(some.tensors, [tensors[1]!]);
    await assert.rejects(() => loadCheckpoint(path, { only: ["nope"], codecs: [safetensorsCodec] }), RangeError);
  });
});

Deno.test("loadCheckpoint reads a safetensors file by default, whole, by name, gzipped and through decodeCheckpoint", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "model.safetensors");
    const tensors = [{ name: "w", dtype: "float32" as const, shape: [2], data: new Float32Array([1.5, -2]) }];
    await saveCheckpoint(path, { metadata: { step: 4 }, tensors }, { codec: safetensorsCodec });
    const whole = await loadCheckpoint(path);
    assert.equal(whole.metadata.step, 4);
    assertSameTensors(whole.tensors, tensors);
    assertSameTensors((await loadCheckpoint(path, { only: ["w"] })).tensors, tensors);
    assertSameTensors((await loadCheckpoint(await Deno.readFile(path))).tensors, tensors);
    const gz = join(dir, "model.safetensors.gz");
    await saveCheckpoint(gz, { metadata: { step: 4 }, tensors }, { codec: safetensorsCodec, compression: "gzip" });
    assertSameTensors((await loadCheckpoint(gz)).tensors, tensors);
    const kinds: string[] = [];
    for await (const record of decodeCheckpoint(path)) kinds.push(record.type);
    assert.deepEqual(kinds, ["metadata", "tensor"]);
  });
});

Deno.test("loadCheckpoint and saveCheckpoint reject option names they do not know, naming them", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.ckpt");
    const ckpt = { metadata: { step: 1 }, tensors: [] };
    await assert.rejects(
      () => saveCheckpoint(path, ckpt, { compresion: "gzip" } as never),
      (e) =>
        e instanceof TypeError && /unknown option "compresion" \(known options: codec, compression/.test(e.message),
    );
    await assert.rejects(() => Deno.stat(path), Deno.errors.NotFound, "nothing written");
    await saveCheckpoint(path, ckpt);
    await assert.rejects(
      () => loadCheckpoint(path, { codec: safetensorsCodec } as never),
      (e) =>
        e instanceof TypeError &&
        /^Cannot load checkpoint: unknown option "codec": a load recognises the format from the bytes/.test(
          e.message,
        ) &&
        /codecs: \[codec\]/.test(e.message),
    );
    await assert.rejects(() => loadCheckpoint(path, { maxTensorByte: 5 } as never), /unknown option "maxTensorByte"/);
    await assert.rejects(() => loadCheckpoint(path, null as never), /options must be an object/);
    assert.equal((await loadCheckpoint(path, { maxTensorBytes: 5, codecs: [] })).metadata.step, 1);
  });
});

Deno.test("a sha256 option given as undefined is an error, not a check skipped", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.ckpt");
    // Without sha256sum: true a save returns no file SHA-256; `{ sha256 }` then holds undefined.
    const { sha256, digest } = await saveCheckpoint(path, { metadata: { step: 1 }, tensors: [] });
    assert.equal(sha256, undefined);
    for (const only of [undefined, ["x"]]) {
      await assert.rejects(
        () => loadCheckpoint(path, only ? { sha256, only } : { sha256 }),
        (e) =>
          e instanceof TypeError &&
          /^Invalid sha256 option: undefined \(a save returns its digest as `digest`/.test(e.message),
      );
    }
    assert.equal((await loadCheckpoint(path, { sha256: digest })).metadata.step, 1);
  });
});

Deno.test("a load that recognises nothing lists the formats it tried, the caller's codecs first", async () => {
  const text = new TextEncoder().encode("hello, not a checkpoint");
  await assert.rejects(
    () => loadCheckpoint(text),
    (e) =>
      e instanceof SyntaxError &&
      e.message ===
        "Cannot decode checkpoint: unrecognised format at offset 0 (first bytes 68 65 6c 6c 6f 2c 20 6e); tried ckpt binary, ckpt JSON, safetensors, gzip",
  );
  const mine = { ...safetensorsCodec, name: "mine", detect: () => false };
  await assert.rejects(
    () => loadCheckpoint(text, { codecs: [mine] }),
    /; tried mine, ckpt binary, ckpt JSON, safetensors, gzip$/,
  );
});

Deno.test("corruption messages: truncated, the format a random access cannot read, the tensor of a bad digest, a missing file", async () => {
  await withDir(async (dir) => {
    const ckpt = {
      metadata: { step: 1 },
      tensors: [
        { name: "fc1/kernel", dtype: "float32" as const, shape: [64], data: new Float32Array(64) },
        { name: "b", dtype: "float32" as const, shape: [2], data: new Float32Array(2) },
      ],
    };
    const path = join(dir, "a.ckpt");
    await saveCheckpoint(path, ckpt);
    const full = await Deno.readFile(path);

    // Truncated: every reader says so.
    const cut = join(dir, "cut.ckpt");
    await Deno.writeFile(cut, full.subarray(0, full.length - 8));
    for (
      const read of [
        () => readCheckpointIndex(cut),
        () => loadCheckpoint(cut, { only: ["b"] }),
        () => loadCheckpoint(cut),
      ]
    ) {
      await assert.rejects(read, (e) => e instanceof SyntaxError && /truncated/.test(e.message));
    }

    // One flipped byte in a tensor, found through `only`: the tensor is named.
    const flipped = join(dir, "flip.ckpt");
    const bytes = full.slice();
    const entry = (await readCheckpointIndex(path)).tensors[0]!;
    bytes[entry.offset + entry.length - 40]! ^= 1;
    await Deno.writeFile(flipped, bytes);
    await assert.rejects(
      () => loadCheckpoint(flipped, { only: ["fc1/kernel"] }),
      (e) =>
        e instanceof ChecksumMismatchError &&
        /^Checksum mismatch for tensor "fc1\/kernel" at offset \d+/.test(e.message),
    );

    // readCheckpointIndex on gzip and JSON checkpoints names the format and what to do.
    const gz = join(dir, "a.ckpt.gz");
    await saveCheckpoint(gz, ckpt, { compression: "gzip" });
    await assert.rejects(
      () => readCheckpointIndex(gz),
      /not a ckpt binary file: it is a gzip-compressed checkpoint.*loadCheckpoint/,
    );
    const json = join(dir, "a.jsonl");
    await saveCheckpoint(json, ckpt, { codec: "json" });
    await assert.rejects(
      () => readCheckpointIndex(json),
      /not a ckpt binary file: it is a ckpt JSON Lines checkpoint.*convert/,
    );

    // A missing file: the CLI's wording, not the raw OS error.
    await assert.rejects(
      () => loadCheckpoint(join(dir, "nope.ckpt")),
      (e) =>
        e instanceof Deno.errors.NotFound &&
        e.message === `Cannot read ${JSON.stringify(join(dir, "nope.ckpt"))}: No such file or directory`,
    );
    // The same wording (and class) from the random-access readers, which go through the store.
    for (
      const read of [
        () => readCheckpointIndex(join(dir, "nope.ckpt")),
        () => loadCheckpoint(join(dir, "nope.ckpt"), { only: ["a"] }),
      ]
    ) {
      await assert.rejects(
        read,
        (e) =>
          e instanceof ObjectNotFoundError &&
          e.message === `Cannot read ${JSON.stringify(join(dir, "nope.ckpt"))}: No such file or directory`,
      );
    }
    await assert.rejects(
      () => loadCheckpoint(dir),
      (e) => e instanceof TypeError && e.message === `Cannot read ${JSON.stringify(dir)}: it is a directory`,
    );
  });
});
