#!/usr/bin/env python3
"""PyTorch peer of `grouper bench radix-sort`: torch.sort(keys, stable=True) of ROWS keys
uniform below 2^BITS (int32 keys below 2^31, int64 above: torch has no uint32 sort), which
returns the sorted keys and their positions (int64), as grouper's sort returns keys and row ids.
Usage: torch_sort.py ROWS REPS BITS1 BITS2 ...
Prints one JSON object: {"torch": version, "device": name, "points": {BITS: ms}}.
Timed with CUDA events, median of REPS after a warm-up."""
import json
import sys

import torch
from torch_timing import timed

rows, reps = int(sys.argv[1]), int(sys.argv[2])
widths = [int(b) for b in sys.argv[3:]]
dev = torch.device("cuda")

points = {}
for bits in widths:
    dtype = torch.int32 if bits <= 31 else torch.int64
    keys = torch.randint(0, 1 << bits, (rows,), dtype=dtype, device=dev)
    points[str(bits)] = timed(lambda: torch.sort(keys, stable=True), reps)
    del keys
    torch.cuda.empty_cache()
print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "points": points}))
