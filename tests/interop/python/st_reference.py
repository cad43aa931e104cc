"""The reference safetensors implementation (the `safetensors` package of the peers' environment)
as the other side of tests/interop/safetensors_reference_test.ts: one process per batch.

    python st_reference.py BATCH.json

BATCH.json: {"write": [{"out": PATH, "tensors": [{"name", "dtype", "shape", "data": BASE64}],
"metadata": {..} | null}], "read": [PATH, ...]}. Writes each "write" file with `serialize`, then
reads each "read" file with `deserialize` (tensors) and `safe_open` (`__metadata__`), and prints
one JSON object: {"version", "written": [error or null], "read": [{"ok": true, "metadata",
"tensors": [{"name", "dtype", "shape", "sha256"}]} | {"ok": false, "error"}]}.
"""

import base64
import ctypes
import hashlib
import json
import sys

import safetensors
from safetensors import TensorSpec, deserialize, safe_open, serialize

# safetensors' header names to the dtype names TensorSpec takes.
SPEC_DTYPES = {
    "BOOL": "bool", "I8": "int8", "U8": "uint8", "I16": "int16", "U16": "uint16", "I32": "int32",
    "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16", "F32": "float32",
    "F64": "float64", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2": "float8_e5m2", "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu",
    "C64": "complex64",
}


def write(job):
    buffers = []  # kept alive until serialize returns
    specs = {}
    for t in job["tensors"]:
        data = bytearray(base64.b64decode(t["data"]))
        buffers.append(data)
        ptr = ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data)) if data else 0
        specs[t["name"]] = TensorSpec(dtype=SPEC_DTYPES[t["dtype"]], shape=t["shape"], data_ptr=ptr, data_len=len(data))
    out = serialize(specs, metadata=job["metadata"])
    with open(job["out"], "wb") as f:
        f.write(out)


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    tensors = deserialize(raw)
    with safe_open(path, "numpy") as f:
        metadata = f.metadata()
    return {
        "ok": True,
        "metadata": metadata,
        "tensors": [
            {"name": name, "dtype": t["dtype"], "shape": list(t["shape"]), "sha256": hashlib.sha256(t["data"]).hexdigest()}
            for name, t in tensors
        ],
    }


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        batch = json.load(f)
    written = []
    for job in batch.get("write", []):
        try:
            write(job)
            written.append(None)
        except Exception as e:  # noqa: BLE001 - every refusal is an answer
            written.append(f"{type(e).__name__}: {e}")
    results = []
    for path in batch.get("read", []):
        try:
            results.append(read(path))
        except Exception as e:  # noqa: BLE001
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    # ensure_ascii keeps any lone surrogate a key could hold printable; JSON.parse restores it.
    json.dump({"version": safetensors.__version__, "written": written, "read": results}, sys.stdout)


main()
