"""Timing for the PyTorch peers (torch_sweep.py, torch_sort.py): `fn` once to warm up, then
`reps` runs timed with CUDA events; the median in milliseconds."""
import torch


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        runs.append(a.elapsed_time(b))
    runs.sort()
    return runs[len(runs) // 2]
