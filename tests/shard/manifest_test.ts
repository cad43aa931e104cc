import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { ChecksumMismatchError } from "../../mod.ts";
import { decodeShardManifest, encodeShardManifest, type ShardManifest } from "../../src/shard/manifest.ts";

const enc = new TextEncoder();
const D = "d".repeat(64);

/** The manifest bytes for a JSON line written out by hand: the magic line, the line, its trailer. */
function framed(json: string): Uint8Array {
  const head = `ckpt-shards 1\n${json}\n`;
  return enc.encode(`${head}sha256 ${createHash("sha256").update(head).digest("hex")}\n`);
}

const part = (i: number, n: number, bytes = 4096) =>
  `{"name":"part-${String(i).padStart(5, "0")}-of-${
    String(n).padStart(5, "0")
  }.ckpt","bytes":${bytes},"digest":"${D}"}`;
const slice = (p: number, s: number, e: number, offset = 128, length = 200) =>
  `{"part":${p},"rows":[${s},${e}],"offset":${offset},"length":${length},"digest":"${D}"}`;
const tensor = (name: string, rows: number, slices: string) =>
  `{"name":${JSON.stringify(name)},"dtype":"float32","shape":[${rows},2],"group":"params","slices":[${slices}]}`;
const manifest = (parts: string, tensors: string, extra = "") =>
  `{"version":1,"saveId":"step-1","commit":"${
    "0".repeat(32)
  }","metadata":{"step":1},"parts":[${parts}],"tensors":[${tensors}]${extra}}`;

const good = manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 4)},${slice(1, 4, 8)}`));

Deno.test("decodeShardManifest reads a hand-written manifest and its digest", () => {
  const bytes = framed(good);
  const { manifest: m, digest } = decodeShardManifest(bytes);
  assert.equal(m.parts[1]!.name, "part-00002-of-00002.ckpt");
  assert.deepEqual(m.tensors[0]!.slices.map((s) => s.rows), [[0, 4], [4, 8]]);
  assert.equal(digest, createHash("sha256").update(bytes.subarray(0, bytes.byteLength - 72)).digest("hex"));
  // Encoding what was decoded gives the same bytes.
  assert.deepEqual(encodeShardManifest(m).bytes, bytes);
});

Deno.test("decodeShardManifest refuses part names that leave the save's directory or prefix", () => {
  for (
    const name of [
      "../../etc/passwd",
      "/etc/passwd",
      "s3://other-bucket/part-00001-of-00002.ckpt",
      "https://example.com/part-00001-of-00002.ckpt",
      "../part-00001-of-00002.ckpt",
      "part-00001-of-00002.ckpt/..",
      "sub/part-00001-of-00002.ckpt",
      "part-00002-of-00002.ckpt", // another position's name
      "part-1-of-2.ckpt",
    ]
  ) {
    const json = good.replace('"part-00001-of-00002.ckpt"', JSON.stringify(name));
    assert.throws(
      () => decodeShardManifest(framed(json)),
      (e) => e instanceof SyntaxError && /parts\[0\] is named .* not "part-00001-of-00002\.ckpt"/.test(e.message),
      name,
    );
  }
  for (const id of ["..", ".", "../x", "a/b", "", "x".repeat(65), "/abs"]) {
    const json = good.replace('"saveId":"step-1"', `"saveId":${JSON.stringify(id)}`);
    assert.throws(() => decodeShardManifest(framed(json)), /saveId .* is not 1-64/, id);
  }
});

Deno.test("decodeShardManifest refuses duplicate, overlapping, missing and misplaced slices", () => {
  const cases: [string, RegExp][] = [
    [
      manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 5)},${slice(1, 4, 8)}`)),
      /overlaps the slice before it/,
    ],
    [
      manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 4)},${slice(0, 4, 8, 400)}`)),
      /two slices in part 0/,
    ],
    [
      manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 3)},${slice(1, 4, 8)}`)),
      /leaves rows 3\.\.4 unwritten/,
    ],
    [manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 4)}`)), /leaves rows 4\.\.8 unwritten/],
    [
      manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 4)},${slice(1, 4, 9)}`)),
      /outside \[0, 8\)/,
    ],
    [
      manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 4)},${slice(2, 4, 8)}`)),
      /names part 2 of 2/,
    ],
    [
      manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 4, 4000, 200)},${slice(1, 4, 8)}`)),
      /outside its 4096-byte part/,
    ],
    [
      manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 4, 0, 200)},${slice(1, 4, 8)}`)),
      /outside its 4096-byte part/,
    ],
    [
      manifest(
        `${part(1, 1)}`,
        `${tensor("a", 4, slice(0, 0, 4, 128, 200))},${tensor("b", 4, slice(0, 0, 4, 300, 200))}`,
      ),
      /slices of "a" and "b" share bytes of part 0/,
    ],
    [
      manifest(`${part(1, 1)}`, `${tensor("a", 4, slice(0, 0, 4))},${tensor("a", 4, slice(0, 0, 4, 400))}`),
      /"a" is listed twice/,
    ],
    [manifest(`${part(1, 1)}`, tensor("__proto__", 4, slice(0, 0, 4))), /reserved/],
    [manifest("", ""), /parts is empty/],
    [good.replace('"version":1', '"version":2'), /version 2 is not 1/],
    [good.replace('"dtype":"float32"', '"dtype":"float128"'), /unknown dtype/],
    [good.replace('"metadata":{"step":1}', '"metadata":{"step":-1}'), /metadata/],
    [good.replace('"shape":[8,2]', '"shape":[8,-2]'), /not a non-negative integer/],
    [good.replace('"commit":"', '"commit":"x'), /commit is not lowercase hex/],
    [good.replace(`"digest":"${D}"`, '"digest":"DD"'), /digest is not lowercase hex/],
    [
      manifest(`${part(1, 2)},${part(2, 2)}`, tensor("w", 8, `${slice(0, 0, 4)},${slice(1, 4, 8)}`), ',"extra":1'),
      /unknown field "extra"/,
    ],
  ];
  for (const [json, why] of cases) {
    assert.throws(
      () => decodeShardManifest(framed(json)),
      (e) => e instanceof SyntaxError && why.test(e.message),
      json,
    );
  }
});

Deno.test("decodeShardManifest refuses counts and sizes past its caps before reading anything else", () => {
  const parts = Array.from({ length: 3 }, (_, i) => part(i + 1, 3)).join(",");
  assert.throws(
    () => decodeShardManifest(framed(manifest(parts, "")), { maxParts: 2 }),
    (e) => e instanceof RangeError && /parts has 3 entries, over maxParts \(2\)/.test(e.message),
  );
  assert.throws(
    () =>
      decodeShardManifest(
        framed(manifest(part(1, 1), `${tensor("a", 1, slice(0, 0, 1))},${tensor("b", 1, slice(0, 0, 1, 400))}`)),
        { maxTensors: 1 },
      ),
    /over maxTensors \(1\)/,
  );
  assert.throws(() => decodeShardManifest(framed(good), { maxManifestBytes: 100 }), /exceed maxManifestBytes \(100\)/);
  assert.throws(() => decodeShardManifest(framed(good), { maxPartBytes: 1000 }), /over maxPartBytes \(1000\)/);
  assert.throws(
    () => decodeShardManifest(framed(good.replace('"shape":[8,2]', '"shape":[8,9007199254740991]'))),
    (e) => e instanceof RangeError && /over maxTensorBytes/.test(e.message),
  );
  assert.throws(() => decodeShardManifest(framed(good), { maxRank: 1 }), /over maxRank \(1\)/);
  assert.throws(() => decodeShardManifest(framed(good), { maxSlices: 1 }), /maxSlices/);
  assert.throws(
    () => decodeShardManifest(framed(manifest(part(1, 1), tensor("a", 4, `${slice(0, 0, 2)},${slice(0, 2, 4, 400)}`)))),
    (e) => e instanceof RangeError && /slices has 2 entries, over the number of parts \(1\)/.test(e.message),
  );
  assert.throws(() => decodeShardManifest(framed(good), { maxParts: 0 }), RangeError);
  assert.throws(() => decodeShardManifest(framed(good), { maxPart: 1 } as never), TypeError);
});

Deno.test("decodeShardManifest refuses a damaged frame: magic, trailer, digest, lines, UTF-8", () => {
  const bytes = framed(good);
  const flipped = bytes.slice();
  flipped[40]! ^= 1;
  assert.throws(() => decodeShardManifest(flipped), ChecksumMismatchError);
  assert.throws(() => decodeShardManifest(bytes.subarray(0, bytes.byteLength - 1)), /last line is not "sha256/);
  assert.throws(() => decodeShardManifest(enc.encode("ckpt-shards 2\n")), /magic line/);
  assert.throws(() => decodeShardManifest(new Uint8Array(0)), /magic line/);
  assert.throws(() => decodeShardManifest(enc.encode("ckpt-shards 1\n")), /truncated/);
  assert.throws(() => decodeShardManifest(framed(good + "\n" + good)), /more than one line/);
  assert.throws(() => decodeShardManifest(framed("{not json")), /does not parse/);
  assert.throws(() => decodeShardManifest(framed("[1]")), /the manifest is not a JSON object/);
  const bad = framed(good);
  const latin = new Uint8Array([...bad.subarray(0, 20), 0xff, ...bad.subarray(21)]);
  assert.throws(
    () => decodeShardManifest(latin),
    (e) => e instanceof SyntaxError || e instanceof ChecksumMismatchError,
  );
});

Deno.test("encodeShardManifest refuses to write a manifest no reader would accept", () => {
  const m: ShardManifest = decodeShardManifest(framed(good)).manifest;
  m.tensors[0]!.slices[1]!.rows = [5, 8];
  assert.throws(() => encodeShardManifest(m), /unwritten/);
});
