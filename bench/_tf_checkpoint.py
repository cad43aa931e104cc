"""TensorFlow's own checkpoint (tf.train.Checkpoint) on the same state as bench/native_compare.ts:
float32 variables of the given shapes, each with Adam's two slots (m, v), written with
`Checkpoint.write` and read back into the variables with `Checkpoint.read`, timed per trial.

    python bench/_tf_checkpoint.py DIR TRIALS SHAPES_JSON   # prints one JSON line
"""
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

directory, trials, shapes = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
rng = tf.random.Generator.from_seed(1)
variables = {}
for i, shape in enumerate(shapes):
    for slot in ("w", "m", "v"):
        variables[f"{slot}{i}"] = tf.Variable(rng.uniform(shape, -1, 1, dtype=tf.float32))
checkpoint = tf.train.Checkpoint(**variables)
writes, reads = [], []
for t in range(trials):
    prefix = os.path.join(directory, f"tf-{t}")
    t0 = time.perf_counter()
    path = checkpoint.write(prefix)
    writes.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    checkpoint.read(path).assert_consumed()
    reads.append(time.perf_counter() - t0)
nbytes = sum(v.numpy().nbytes for v in variables.values())
print(json.dumps({"tensorflow": tf.__version__, "bytes": nbytes, "write": writes, "read": reads}))
