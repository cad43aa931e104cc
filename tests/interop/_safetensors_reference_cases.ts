// The byte-literal cases of the reference safetensors implementation's own tests
// (huggingface/safetensors: safetensors/src/tensor.rs and bindings/python/tests/test_simple.py),
// for tests/interop/safetensors_reference_test.ts and tests/interop/safetensors_test.ts.

const utf8 = new TextEncoder();

function file(header: string, data: number[] | Uint8Array = [], n?: number): Uint8Array {
  const h = utf8.encode(header);
  const out = new Uint8Array(8 + h.byteLength + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(n ?? h.byteLength), true);
  out.set(h, 8);
  out.set(data, 8 + h.byteLength);
  return out;
}

function raw(...parts: (string | number[])[]): Uint8Array {
  return new Uint8Array(parts.flatMap((p) => typeof p === "string" ? [...utf8.encode(p)] : p));
}

/** The byte-literal cases of the reference's own tests (safetensors/src/tensor.rs). */
export function referenceSuite(): { name: string; bytes: Uint8Array }[] {
  const le = (n: number) => [n, 0, 0, 0, 0, 0, 0, 0];
  const test = '{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}';
  const zeros = (n: number) => new Array<number>(n).fill(0);
  const attack = Object.fromEntries(
    Array.from({ length: 10 }, (_, i) => [`weight_${i}`, { dtype: "F32", shape: [2, 2], data_offsets: [0, 16] }]),
  );
  return [
    ["test_empty_shapes_allowed", raw(le(56), '{"test":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}', zeros(4))],
    ["test_deserialization", raw(le(60), test, zeros(16))],
    ["test_metadata_incomplete_buffer (extra)", raw(le(60), test, zeros(16), "extra_bogus_data_for_polyglot_file")],
    ["test_metadata_incomplete_buffer (short)", raw(le(60), test, zeros(14))],
    ["test_header_too_large", raw([60, 0, 0, 0, 0, 0xff, 0xff, 0xff], test, zeros(16))],
    ["test_header_too_small", raw()],
    ["test_invalid_header_length", raw(le(60))],
    ["test_invalid_header_non_utf8", raw(le(1), [0xff])],
    ["test_invalid_header_not_json", raw(le(1), "{")],
    ["test_whitespace_padded_header", raw(le(6), "{}\r \t\n")],
    ["test_whitespace_leading_padded_header", raw(le(6), "\t\n{}\r ")],
    ["test_zero_sized_tensor", raw(le(60), '{"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]}}')],
    ["test_invalid_info", raw(le(60), '{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}}')],
    [
      "test_validation_overflow (shape)",
      raw(le(79), '{"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}', zeros(16)),
    ],
    [
      "test_validation_overflow (elements)",
      raw(le(78), '{"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}}', zeros(16)),
    ],
    ["test_json_attack", file(JSON.stringify(attack), zeros(16))],
    // bindings/python/tests/test_simple.py
    [
      "test_deserialization_metadata",
      raw(
        le(102),
        '{"__metadata__":{"framework":"pt"},"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}       ',
        zeros(16),
      ),
    ],
  ].map(([name, bytes]) => ({ name: `reference ${name}`, bytes: bytes as Uint8Array }));
}

/** Files test_simple.py says the reference writes, byte for byte: ckpt must write them back unchanged. */
export const REFERENCE_WRITTEN: readonly (readonly [string, Uint8Array])[] = [
  [
    "test_serialization",
    raw(
      [64, 0, 0, 0, 0, 0, 0, 0],
      '{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}    ',
      [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
    ),
  ],
  [
    "test_serialization_forces_alignment",
    raw(
      [128, 0, 0, 0, 0, 0, 0, 0],
      '{"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},"test2":{"dtype":"F16","shape":[2,2],"data_offsets":[16,24]}}      ',
      new Array<number>(24).fill(0),
    ),
  ],
  [
    "test_serialization_metadata",
    raw(
      [96, 0, 0, 0, 0, 0, 0, 0],
      '{"__metadata__":{"framework":"pt"},"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}} ',
      new Array<number>(16).fill(0),
    ),
  ],
];
