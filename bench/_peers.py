"""One save or one load by one of ckpt's peers, timed inside its own process (run by
bench/compare_save.ts and bench/peer_facts.ts with the python of scripts/peers_venv.sh).

    python bench/_peers.py save PEER RAW OUT      # PEER: see SAVES
    python bench/_peers.py load PEER RAW OUT      # PEER: see LOADS
    python bench/_peers.py load PEER RAW OUT --check

RAW is a file of float32 values; it is cut into 16 MiB tensors named layer{i}/kernel (the same
tensors ckpt's rows save), built before the clock starts. Each operation prints one JSON line:
`seconds` (until the checkpoint is complete and, for the durable rows, durable; for a load, until
every tensor is in memory), `blocked` (for the asynchronous saves: how long save() held the
caller), `elements`; with --check a load also compares every value with RAW and says `match`,
and an exception becomes `error` (the bit-flip check in bench/peer_facts.ts).
"""
import json
import os
import sys
import time

import numpy as np

STEP = 4 * 1024 * 1024  # float32 elements per tensor: 16 MiB


def tensors(raw):
    a = np.fromfile(raw, dtype=np.float32)
    return {f"layer{i}/kernel": a[i * STEP:(i + 1) * STEP] for i in range((a.size + STEP - 1) // STEP)}


def fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def clear(path):
    """Removes what a previous trial left at `path`, before the clock starts."""
    import shutil
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def tf_name(name):
    return name.replace("/", "__")  # tf.train.Checkpoint's attribute names cannot hold "/"


# --- saves: each returns (seconds until complete, seconds save() blocked the caller or None) -----


def save_orbax_standard(arrays, out):
    import jax
    import orbax.checkpoint as ocp
    state = {k: jax.device_put(v) for k, v in arrays.items()}
    jax.block_until_ready(state)
    clear(out)
    ckptr = ocp.StandardCheckpointer()
    t = time.perf_counter()
    ckptr.save(out, state)
    blocked = time.perf_counter() - t
    ckptr.wait_until_finished()
    seconds = time.perf_counter() - t
    ckptr.close()
    return seconds, blocked


def save_orbax_manager(arrays, out):
    """A CheckpointManager keeping 2, saving the step after the latest one it finds (as a training loop would)."""
    import jax
    import orbax.checkpoint as ocp
    state = {k: jax.device_put(v) for k, v in arrays.items()}
    jax.block_until_ready(state)
    mngr = ocp.CheckpointManager(out, options=ocp.CheckpointManagerOptions(max_to_keep=2))
    step = (mngr.latest_step() or 0) + 1
    t = time.perf_counter()
    mngr.save(step, args=ocp.args.StandardSave(state))
    blocked = time.perf_counter() - t
    mngr.wait_until_finished()
    seconds = time.perf_counter() - t
    mngr.close()
    return seconds, blocked


def torch_state(arrays):
    import torch
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def save_dcp(arrays, out):
    import torch.distributed.checkpoint as dcp
    state = torch_state(arrays)
    clear(out)
    t = time.perf_counter()
    dcp.save(state, checkpoint_id=out)
    return time.perf_counter() - t, None


def save_dcp_async(arrays, out):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    # async_save needs a process group (it stages on the caller's thread and writes on another).
    clear(f"{out}.pg")  # a file store left by a trial that died would be taken for a live group
    dist.init_process_group("gloo", init_method=f"file://{out}.pg", rank=0, world_size=1)
    state = torch_state(arrays)
    clear(out)
    t = time.perf_counter()
    future = dcp.async_save(state, checkpoint_id=out)
    blocked = time.perf_counter() - t
    future.result()
    seconds = time.perf_counter() - t
    dist.destroy_process_group()
    clear(f"{out}.pg")
    return seconds, blocked


def save_safetensors(arrays, out):
    from safetensors.torch import save_file
    state = torch_state(arrays)
    t = time.perf_counter()
    save_file(state, out)
    return time.perf_counter() - t, None


def save_safetensors_durable(arrays, out):
    """save_file to a new file, then what an atomic save adds: fsync it, rename it over, fsync the directory."""
    from safetensors.torch import save_file
    state = torch_state(arrays)
    t = time.perf_counter()
    save_file(state, out + ".tmp")
    fsync_path(out + ".tmp")
    os.rename(out + ".tmp", out)
    fsync_path(os.path.dirname(os.path.abspath(out)), directory=True)
    return time.perf_counter() - t, None


def tf_checkpoint(arrays):
    import tensorflow as tf
    return tf.train.Checkpoint(**{tf_name(k): tf.Variable(v) for k, v in arrays.items()})


def save_tf(arrays, out):
    ckpt = tf_checkpoint(arrays)
    clear(out)
    os.makedirs(out)
    t = time.perf_counter()
    ckpt.write(os.path.join(out, "ckpt"))
    return time.perf_counter() - t, None


def save_torch(arrays, out):
    """torch.save straight to the file (the reference; no fsync)."""
    import torch
    state = torch_state(arrays)
    t = time.perf_counter()
    torch.save(state, out)
    return time.perf_counter() - t, None


SAVES = {
    "torch": save_torch,
    "orbax": save_orbax_standard,
    "orbax-manager": save_orbax_manager,
    "dcp": save_dcp,
    "dcp-async": save_dcp_async,
    "safetensors": save_safetensors,
    "safetensors-durable": save_safetensors_durable,
    "tf": save_tf,
}

# --- loads: each returns {name: numpy-compatible array} -----------------------------------------


def load_orbax(raw_shapes, out):
    import jax
    import numpy as np
    import orbax.checkpoint as ocp
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    abstract = {k: jax.ShapeDtypeStruct(s, np.float32, sharding=sharding) for k, s in raw_shapes.items()}
    ckptr = ocp.StandardCheckpointer()
    restored = ckptr.restore(out, abstract)
    jax.block_until_ready(restored)
    ckptr.close()
    return restored


def load_dcp(raw_shapes, out):
    """dcp.load fills a state dict in place: its tensors are allocated (torch.empty: not yet touched) first."""
    import torch
    import torch.distributed.checkpoint as dcp
    state = {k: torch.empty(s, dtype=torch.float32) for k, s in raw_shapes.items()}
    dcp.load(state, checkpoint_id=out)
    return state


def load_safetensors(raw_shapes, out):
    """load_file maps the file: the tensors' pages are read when first touched."""
    from safetensors.torch import load_file
    return load_file(out)


def load_safetensors_touched(raw_shapes, out):
    """load_file, then one byte of every 4 KiB page of every tensor read, so every page is in memory."""
    import torch
    from safetensors.torch import load_file
    state = load_file(out)
    for v in state.values():
        v.view(-1).view(torch.uint8)[::4096].sum()
    return state


def load_tf(raw_shapes, out):
    """Checkpoint.read into the variables of a model built first (tf.Variable of zeros), as a TF job resumes."""
    import tensorflow as tf
    variables = {tf_name(k): tf.Variable(tf.zeros(s, tf.float32)) for k, s in raw_shapes.items()}
    ckpt = tf.train.Checkpoint(**variables)
    ckpt.read(os.path.join(out, "ckpt")).assert_consumed()
    return {k: variables[tf_name(k)] for k in raw_shapes}


def load_torch(raw_shapes, out):
    import torch
    return torch.load(out)


LOADS = {
    "torch": load_torch,
    "orbax": load_orbax,
    "dcp": load_dcp,
    "safetensors": load_safetensors,
    "safetensors-touched": load_safetensors_touched,
    "tf": load_tf,
}


# What each peer imports, loaded before any clock starts (importing torch or TensorFlow takes seconds).
MODULES = {
    "orbax": ["jax", "orbax.checkpoint"],
    "dcp": ["torch", "torch.distributed.checkpoint"],
    "safetensors": ["torch", "safetensors.torch"],
    "torch": ["torch"],
    "tf": ["tensorflow"],
}


def to_numpy(value):
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def main(argv):
    op, peer, raw, out = argv[:4]
    check = "--check" in argv[4:]
    out = os.path.abspath(out)
    import importlib
    for m in MODULES[peer.split("-")[0]]:
        importlib.import_module(m)
    if op == "save":
        arrays = tensors(raw)
        # Steady state, as in a training loop that checkpoints periodically (and as ckpt's rows
        # run): one small save first, elsewhere, starts the peer's threads and code paths.
        first = next(iter(arrays))
        SAVES[peer]({first: arrays[first][:2 ** 21]}, out + ".warm")
        clear(out + ".warm")
        seconds, blocked = SAVES[peer](arrays, out)
        print(json.dumps({"seconds": seconds, **({} if blocked is None else {"blocked": blocked})}))
        return
    if op != "load":
        raise SystemExit(f"unknown op {op!r}: save or load")
    n = os.path.getsize(raw) // 4
    shapes = {f"layer{i}/kernel": (min(STEP, n - i * STEP),) for i in range((n + STEP - 1) // STEP)}
    fn = LOADS[peer]
    if check:
        expected = tensors(raw)
        try:
            state = fn(shapes, out)
        except BaseException as e:  # what a flipped bit makes the peer say (DCP's CheckpointException is a BaseException)
            print(json.dumps({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}))
            return
        # Bit for bit (the values are random bits: some are NaN, which no float comparison equals).
        match = all(to_numpy(state[k]).tobytes() == v.tobytes() for k, v in expected.items())
        print(json.dumps({"match": bool(match)}))
        return
    t = time.perf_counter()
    state = fn(shapes, out)
    seconds = time.perf_counter() - t
    print(json.dumps({"seconds": seconds, "elements": int(sum(int(np.prod(np.shape(v))) for v in state.values()))}))


if __name__ == "__main__":
    main(sys.argv[1:])
