import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { ChecksumMismatchError, encodeCheckpoint, loadCheckpoint } from "../../../mod.ts";
import { jsonCodec } from "../../../src/format/codecs/json.ts";
import type { Checkpoint } from "../../../src/format/types.ts";
import { assertSameCheckpoint, collect, edgeCheckpoint, feeds, randomCheckpoint } from "../../_util.ts";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const HEADER = '{"ckpt":"jsonl","version":1}\n';

/** Builds a JSON checkpoint from record line groups, with correct digests unless a digest is given. */
function build(records: string[][], end?: (digest: string, tensors: number) => string): string {
  let text = HEADER;
  let tensors = 0;
  for (const lines of records) {
    const body = lines.map((l) => l + "\n").join("");
    if (lines[0]!.startsWith('{"tensor"')) tensors++;
    text += body + `{"sha256":"${sha(body)}"}\n`;
  }
  return text + (end ? end(sha(text), tensors) : `{"end":{"tensors":${tensors},"sha256":"${sha(text)}"}}\n`);
}
const META = ['{"metadata":{"step":1}}'];
const W = '{"tensor":{"name":"w","dtype":"float32","shape":[2],"group":"params"}}';

async function decode(text: string | Uint8Array): Promise<Checkpoint> {
  return await loadCheckpoint(typeof text === "string" ? new TextEncoder().encode(text) : text);
}

Deno.test("json codec round-trips every dtype exactly (-0, NaN payloads, subnormals, int64 past 2^53), fed three ways", async () => {
  const ckpt = edgeCheckpoint();
  const bytes = await collect(encodeCheckpoint(ckpt, { codec: "json" }));
  for (const feed of feeds(bytes, 7)) assertSameCheckpoint(await loadCheckpoint(feed.stream()), ckpt);
});

Deno.test("json codec round-trips random checkpoints", async () => {
  for (let seed = 100; seed < 130; seed++) {
    const ckpt = randomCheckpoint(seed);
    const bytes = await collect(encodeCheckpoint(ckpt, { codec: "json" }));
    assertSameCheckpoint(await decode(bytes), ckpt);
  }
});

Deno.test("json codec output is JSON Lines: every line parses alone, values readable", async () => {
  const text = await new Response(encodeCheckpoint(edgeCheckpoint(), { codec: "json" })).text();
  const lines = text.trimEnd().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines[0], { ckpt: "jsonl", version: 1 });
  assert.equal(lines[1].metadata.step, 1234);
  assert.deepEqual(lines[3].tensor, { name: "f32", dtype: "float32", shape: [3, 4], group: "params" });
  // float32 values in their shortest float32 digits (1e-45 reads back as the smallest subnormal).
  assert.deepEqual(lines[4].data.slice(0, 10), [
    0,
    "-0",
    "NaN",
    "Infinity",
    "-Infinity",
    1e-45,
    3.4028235e38,
    0.1,
    -1.5,
    1.1754942e-38,
  ]);
  assert.deepEqual(lines[4].data.slice(10), ["NaN:7fc00001", "NaN:ffbfffff"]);
  const i64 = lines.findIndex((l) => l.tensor?.name === "optimizer/iter");
  assert.deepEqual(lines[i64 + 1].data, ["-9223372036854775808", "9223372036854775807", "9007199254740993", "0"]);
  assert.ok(lines.at(-1).end.sha256.match(/^[0-9a-f]{64}$/));
});

Deno.test("json codec splits large tensors across lines of at most 4096 values", async () => {
  const data = new Float32Array(10000).map((_, i) => i);
  const text = await new Response(
    encodeCheckpoint({ metadata: { step: 0 }, tensors: [{ name: "big", dtype: "float32", shape: [10000], data }] }, {
      codec: "json",
    }),
  ).text();
  const counts = text.split("\n").filter((l) => l.startsWith('{"data"')).map((l) => JSON.parse(l).data.length);
  assert.deepEqual(counts, [4096, 4096, 1808]);
});

Deno.test("json codec is deterministic", async () => {
  const a = await collect(encodeCheckpoint(edgeCheckpoint(), { codec: "json" }));
  const b = await collect(encodeCheckpoint(edgeCheckpoint(), { codec: "json" }));
  assert.deepEqual(a, b);
});

Deno.test("json builder reproduces the encoder byte for byte", async () => {
  const real = await new Response(
    encodeCheckpoint({
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
    }, { codec: "json" }),
  ).text();
  assert.equal(build([META, [W, '{"data":[1,2]}']]), real);
});

Deno.test("json decoder rejects every truncation and every flipped byte", async () => {
  const bytes = new TextEncoder().encode(build([META, [W, '{"data":[1,2]}']]));
  for (let n = 0; n < bytes.length; n++) await assert.rejects(() => decode(bytes.slice(0, n)), Error, `prefix ${n}`);
  for (let i = 0; i < bytes.length; i++) {
    const bad = bytes.slice();
    bad[i]! ^= 0x01;
    await assert.rejects(() => decode(bad), Error, `flip at ${i}`);
  }
});

Deno.test("json decoder errors name the problem and the line", async (t) => {
  const cases: [string, string, ErrorConstructor | typeof ChecksumMismatchError, RegExp][] = [
    [
      "unknown version",
      '{"ckpt":"jsonl","version":2}\n',
      SyntaxError,
      /line 1 at offset 0: unsupported format version 2/,
    ],
    ["header with spaces", '{"ckpt":"jsonl", "version":1}\n', SyntaxError, /header must be exactly/],
    ["malformed JSON", build([META, [W, '{"data":[1,2]']]), SyntaxError, /line 5 at offset \d+: not valid JSON/],
    ["not an object", build([META, [W, "[1,2]"]]), SyntaxError, /line 5 at offset \d+: not a JSON object/],
    [
      "two keys",
      build([META, [W, '{"data":[1,2],"x":1}']]),
      SyntaxError,
      /line 5 .*expected an object with one key, got 2/,
    ],
    [
      "missing digest",
      HEADER + META[0] + "\n" + W + "\n",
      SyntaxError,
      /line 3 .*expected \{"sha256": "<64 hex digits>"\} after metadata/,
    ],
    [
      "tensor digest",
      build([META, [W, '{"data":[1,2]}']]).replace(/("sha256":")[0-9a-f](?=[0-9a-f]{63}"\}\}?\n\{"end)/, "$1x"),
      SyntaxError,
      /expected \{"sha256"/,
    ],
    [
      "wrong tensor digest",
      build([META, [W, '{"data":[1,2]}']]).replace(sha(W + '\n{"data":[1,2]}\n'), sha("x")),
      ChecksumMismatchError,
      /tensor "w" at line 6/,
    ],
    [
      "wrong stream digest",
      build([META], () => `{"end":{"tensors":0,"sha256":"${sha("x")}"}}\n`),
      ChecksumMismatchError,
      /stream at line 4/,
    ],
    ["end count", build([META], (d) => `{"end":{"tensors":3,"sha256":"${d}"}}\n`), SyntaxError, /end line must be/],
    ["trailing garbage", build([META]) + "\n", SyntaxError, /trailing bytes after the end line/],
    [
      "no newline at end",
      build([META]).slice(0, -1),
      SyntaxError,
      /line 4 at offset \d+ ends without a newline \(truncated stream\)/,
    ],
    [
      "too few values",
      build([META, [W, '{"data":[1]}']]),
      SyntaxError,
      /line 6 .*expected a data line for tensor "w", 1 of 2 elements read/,
    ],
    [
      "too many values",
      build([META, [W, '{"data":[1,2,3]}']]),
      SyntaxError,
      /data line holds 3 elements, tensor "w" needs 2 more/,
    ],
    [
      "out of float32 range",
      build([META, [W, '{"data":[1,1e39]}']]),
      SyntaxError,
      /tensor "w" element 1 1e\+39 is out of range for float32/,
    ],
    [
      "below float32's smallest subnormal",
      build([META, [W, '{"data":[1e-46,1]}']]),
      SyntaxError,
      /tensor "w" element 0 1e-46 is too small for float32 \(it would read as 0\)/,
    ],
    ["string value", build([META, [W, '{"data":[1,"one"]}']]), SyntaxError, /element 1 is "one", not a number/],
    [
      "bad NaN bits",
      build([META, [W, '{"data":[1,"NaN:7f800000"]}']]),
      SyntaxError,
      /NaN bits 7f800000 that are not a float32 NaN/,
    ],
    [
      "int out of range",
      build([META, ['{"tensor":{"name":"i","dtype":"int8","shape":[1],"group":"p"}}', '{"data":[128]}']]),
      SyntaxError,
      /element 0 128 is out of range for int8/,
    ],
    [
      "int64 out of range",
      build([META, [
        '{"tensor":{"name":"i","dtype":"int64","shape":[1],"group":"p"}}',
        '{"data":["9223372036854775808"]}',
      ]]),
      SyntaxError,
      /out of range for int64/,
    ],
    [
      "int64 as unsafe number",
      build([META, ['{"tensor":{"name":"i","dtype":"int64","shape":[1],"group":"p"}}', '{"data":[9007199254740993]}']]),
      SyntaxError,
      /not an int64 \(a decimal string\)/,
    ],
    [
      "bool as number",
      build([META, ['{"tensor":{"name":"b","dtype":"bool","shape":[1],"group":"p"}}', '{"data":[1]}']]),
      SyntaxError,
      /is 1, not true or false/,
    ],
    [
      "float16 not representable",
      build([META, ['{"tensor":{"name":"h","dtype":"float16","shape":[1],"group":"p"}}', '{"data":[0.1]}']]),
      SyntaxError,
      /0.1 is not exactly a float16/,
    ],
    [
      "duplicate names",
      build([META, [W, '{"data":[1,2]}'], [W, '{"data":[1,2]}']]),
      SyntaxError,
      /duplicate tensor name "w"/,
    ],
    [
      "__proto__",
      build([META, ['{"tensor":{"name":"__proto__","dtype":"int8","shape":[0],"group":"p"}}']]),
      SyntaxError,
      /reserved/,
    ],
    [
      "negative shape",
      build([META, ['{"tensor":{"name":"a","dtype":"int8","shape":[-1],"group":"p"}}']]),
      SyntaxError,
      /dimension 0 is -1/,
    ],
    [
      "shape over cap",
      build([META, ['{"tensor":{"name":"a","dtype":"int8","shape":[1e15],"group":"p"}}']]),
      RangeError,
      /over maxTensorBytes/,
    ],
    ["tensor before metadata", build([[W, '{"data":[1,2]}']]), SyntaxError, /line 2 .*tensor before the metadata/],
    ["unknown record", build([META, ['{"weights":{}}']]), SyntaxError, /unexpected "weights" line/],
    ["invalid UTF-8", HEADER.replace("}", "") + "\n", SyntaxError, /not a ckpt JSON stream/],
  ];
  for (const [name, text, cls, pattern] of cases) {
    await t.step(name, async () => {
      await assert.rejects(() => decode(text), (e: Error) => {
        assert.ok(e instanceof cls, `expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
        assert.match(e.message, pattern);
        return true;
      });
    });
  }
});

Deno.test("json decoder caps line length", async () => {
  const text = build([META, [W, '{"data":[1,2]}']]);
  await assert.rejects(
    () => loadCheckpoint(new TextEncoder().encode(text), { maxLineBytes: 40 }),
    /line 3 at offset 53 is longer than maxLineBytes 40/,
  );
  // A line that never ends is refused once it passes the cap, without waiting for more bytes.
  const endless = ReadableStream.from((async function* () {
    yield new TextEncoder().encode(HEADER);
    for (;;) yield new Uint8Array(1024).fill(0x20);
  })());
  await assert.rejects(() => loadCheckpoint(endless, { maxLineBytes: 4096 }), RangeError);
});

Deno.test("jsonCodec.detect recognises its header", () => {
  assert.ok(jsonCodec.detect(new TextEncoder().encode(HEADER)));
  assert.ok(!jsonCodec.detect(new TextEncoder().encode('{"other":1}')));
});
