"""An independent safetensors reader and writer, written from the public specification with
json, struct and numpy only (no safetensors package), used by tests/interop/python_test.ts.

    st_spec.py write OUT   writes a file with one tensor of every dtype; prints its manifest
    st_spec.py read IN     validates a file and prints its manifest

A manifest is JSON: {"metadata": {...}, "tensors": [{"name", "dtype", "shape", "sha256"}]}
in data order, sha256 being that of the tensor's little-endian bytes as numpy holds them.
"""
import hashlib
import json
import struct
import sys

import numpy as np

# safetensors dtype -> numpy dtype (little endian). BF16 has no numpy type: kept as raw uint16.
DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


def fail(why):
    raise SystemExit("invalid safetensors: " + why)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        fail("duplicate key")
    return dict(pairs)


def digest(array):
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > 100_000_000 or 8 + n > len(blob):
        fail("bad header length")
    text = blob[8:8 + n].decode("utf-8")
    if not text.startswith("{"):
        fail("header does not start with {")
    header = json.loads(text, object_pairs_hook=no_duplicates)
    metadata = header.pop("__metadata__", {})
    if not all(isinstance(v, str) for v in metadata.values()):
        fail("__metadata__ values must be strings")
    data = blob[8 + n:]
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    position = 0
    tensors = []
    for name, info in entries:
        begin, end = info["data_offsets"]
        if begin != position or end < begin:
            fail("offsets of %r are not contiguous" % name)
        dtype = np.dtype(DTYPES[info["dtype"]])
        count = int(np.prod(info["shape"], dtype=np.int64))
        if end - begin != count * dtype.itemsize:
            fail("byte length of %r does not match its shape" % name)
        array = np.frombuffer(data, dtype=dtype, count=count, offset=begin).reshape(info["shape"])
        tensors.append({"name": name, "dtype": info["dtype"], "shape": list(info["shape"]), "sha256": digest(array)})
        position = end
    if position != len(data):
        fail("data is %d bytes, offsets cover %d" % (len(data), position))
    return {"metadata": metadata, "tensors": tensors}


def sample():
    f32 = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, 1e-45, 3.4028235e38], dtype="<f4")
    return [
        ("a/f64", "F64", np.array([[0.1, -2.5], [np.pi, -np.inf]], dtype="<f8")),
        ("a/f32", "F32", f32.reshape(2, 4)),
        ("a/f16", "F16", np.array([1.0, -0.5, 65504.0, np.nan], dtype="<f2")),
        ("a/bf16", "BF16", np.array([0x3F80, 0xC000, 0x7FC0], dtype="<u2")),  # 1, -2, NaN as bf16 bits
        ("b/i64", "I64", np.array([-(2**63), 2**63 - 1, 0], dtype="<i8")),
        ("b/u64", "U64", np.array([2**64 - 1, 1], dtype="<u8")),
        ("b/i32", "I32", np.array([-(2**31), 7], dtype="<i4")),
        ("b/u32", "U32", np.array([2**32 - 1], dtype="<u4")),
        ("b/i16", "I16", np.array([-32768, 32767], dtype="<i2")),
        ("b/u16", "U16", np.array([65535], dtype="<u2")),
        ("b/i8", "I8", np.array([-128, 127], dtype="i1")),
        ("b/u8", "U8", np.arange(5, dtype="u1")),
        ("c/bool", "BOOL", np.array([True, False, True])),
        ("c/scalar", "F32", np.array(2.0, dtype="<f4")),
        ("c/empty", "I32", np.zeros((0, 3), dtype="<i4")),
    ]


def write(path):
    tensors = sample()
    # Data in reverse order of the list, header keys in list order: readers must go by offsets.
    offsets, position, blobs = {}, 0, []
    for name, _, array in reversed(tensors):
        raw = np.ascontiguousarray(array).tobytes()
        offsets[name] = (position, position + len(raw))
        position += len(raw)
        blobs.append(raw)
    header = {"__metadata__": {"format": "np", "ckpt.step": "12"}}
    for name, st, array in tensors:
        header[name] = {"dtype": st, "shape": list(array.shape), "data_offsets": list(offsets[name])}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    return read(path)


if __name__ == "__main__":
    command, path = sys.argv[1], sys.argv[2]
    print(json.dumps(write(path) if command == "write" else read(path)))
