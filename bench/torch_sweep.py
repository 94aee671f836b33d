#!/usr/bin/env python3
"""PyTorch peers of `grouper bench gpu-sweep`, on the same data: SUM(v), COUNT(*) by key.
Usage: torch_sweep.py R_FILE V_FILE ROWS REPS G1 G2 ...
R_FILE holds ROWS uint32 draws r, V_FILE ROWS float32 values; for each G the dense keys are
r % G and the scattered keys (dense + 1) * 0x79E3779B9 (as grouper's benchmark builds them).
  dense:   torch.zeros(G).index_add_(0, k, v) (+ a count) on the pre-densified keys
  general: torch.unique(keys, return_inverse=True) + index_add_ on the scattered keys
Prints one JSON object: {"torch": version, "device": name, "points": {G: {"dense_ms", "general_ms"}}}.
Timed with CUDA events, median of REPS after a warm-up."""
import json
import sys

import numpy as np
import torch
from torch_timing import timed

r_file, v_file, rows, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
groups = [int(g) for g in sys.argv[5:]]
dev = torch.device("cuda")
r = torch.from_numpy(np.fromfile(r_file, dtype=np.uint32, count=rows).astype(np.int64)).to(dev)
v = torch.from_numpy(np.fromfile(v_file, dtype=np.float32, count=rows)).to(dev)
ones = torch.ones(rows, dtype=torch.float32, device=dev)

out = {}
for g in groups:
    dense = r % g
    scattered = (dense + 1) * 0x79E3779B9

    def dense_fn():
        s = torch.zeros(g, dtype=torch.float32, device=dev).index_add_(0, dense, v)
        c = torch.zeros(g, dtype=torch.float32, device=dev).index_add_(0, dense, ones)
        return s, c

    def general_fn():
        uniq, inv = torch.unique(scattered, return_inverse=True)
        n = uniq.numel()
        s = torch.zeros(n, dtype=torch.float32, device=dev).index_add_(0, inv, v)
        c = torch.zeros(n, dtype=torch.float32, device=dev).index_add_(0, inv, ones)
        return uniq, s, c

    out[g] = {"dense_ms": timed(dense_fn, reps), "general_ms": timed(general_fn, reps)}
    del dense, scattered
    torch.cuda.empty_cache()
print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "points": out}))
