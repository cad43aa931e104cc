"""One rank of PyTorch DCP for bench/shard_dcp.ts, as a process (the python of
scripts/peers_venv.sh): joins the gloo process group (tcp on 127.0.0.1) when there is more than
one rank, builds its tensors (outside the timing), prints "ready", waits for a line on stdin, then
runs dcp.save or dcp.load, prints one JSON line (ms, cpuMs) and waits for stdin to close
(bench/_shard_procs.ts reads its peak memory meanwhile).

    python bench/_dcp_one.py '{"op": "save"|"load", "dir": DIR, "index": I, "count": N,
                               "port": P, "per": ELEMENTS, "names": [...], "sync_dir": true}'

A save holds exactly `names` (the tensors ckpt's plan gives writer I of N), each `per` float32
values; FileSystemWriter fsyncs each file it writes and .metadata (sync_files=True, its default)
but not the directory, so with sync_dir rank 0 then fsyncs the checkpoint's directory and its
parent, inside the timing, as ckpt's durable save does. A load fills torch.empty tensors of
`names` in place; DCP stores no checksum, so nothing is verified.
"""
import json
import os
import resource
import sys
import time
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    # One rank alone has no process group: DCP then warns that it assumes a single process, as intended.
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    a = json.loads(sys.argv[1])
    count, index = a["count"], a["index"]
    if count > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a['port']}", rank=index, world_size=count)
        dist.barrier()  # the group's connections made before the clock starts
    if a["op"] == "save":
        state = {}
        for name in a["names"]:
            seed = int(name[5:7])  # layerNN/kernel: the same tensor on every rank that holds it
            values = np.random.default_rng(seed).random(a["per"], dtype=np.float32) - np.float32(0.5)
            state[name] = torch.from_numpy(values)
    else:
        state = {name: torch.empty(a["per"], dtype=torch.float32) for name in a["names"]}
    print("ready", flush=True)
    sys.stdin.readline()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    if a["op"] == "save":
        dcp.save(state, checkpoint_id=a["dir"])
        if a["sync_dir"] and index == 0:
            fsync_path(a["dir"])
            fsync_path(os.path.dirname(os.path.abspath(a["dir"])))
    else:
        dcp.load(state, checkpoint_id=a["dir"])
    ms = (time.perf_counter() - t) * 1000
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000
    print(json.dumps({"ms": ms, "cpuMs": cpu}), flush=True)
    sys.stdin.read()
    if count > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
