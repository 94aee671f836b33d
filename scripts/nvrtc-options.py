#!/usr/bin/env python3
"""Times NVRTC on one kernel source under several option sets (GPU machine, no Rust needed):
where a cold compile's time goes (front end: PTX only; the assembler: to the device's CUBIN)
and what lower optimization levels save.
    python3 scripts/nvrtc-options.py KERNEL.cu sm_90 [REPEATS]
KERNEL.cu: a generated kernel (GROUPER_DUMP_KERNEL=1 prints each one on stderr)."""
import ctypes
import glob
import sys
import time

src = open(sys.argv[1]).read().encode()
arch = sys.argv[2]
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 2
lib = (glob.glob("/usr/local/cuda/lib64/libnvrtc.so*") or ["libnvrtc.so"])[0]
t = time.time()
nv = ctypes.CDLL(lib)
print(f"loading {lib}: {(time.time() - t) * 1e3:.1f} ms", flush=True)
base = ["--std=c++17", "--device-int128", "-default-device"]
virtual = "compute_" + arch.split("_")[1]
sets = [
    ("CUBIN (first in the process)", [f"--gpu-architecture={arch}"]),
    ("PTX only (front end)", [f"--gpu-architecture={virtual}"]),
    ("CUBIN (as grouper compiles)", [f"--gpu-architecture={arch}"]),
    ("CUBIN, ptxas -O1", [f"--gpu-architecture={arch}", "--ptxas-options=-O1"]),
    ("CUBIN, ptxas -O0", [f"--gpu-architecture={arch}", "--ptxas-options=-O0"]),
]
for name, opts in sets:
    times = []
    for _ in range(repeats):
        prog = ctypes.c_void_p()
        nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"grouper.cu", 0, None, None)
        all_opts = [o.encode() for o in base + opts]
        arr = (ctypes.c_char_p * len(all_opts))(*all_opts)
        t = time.time()
        rc = nv.nvrtcCompileProgram(prog, len(all_opts), arr)
        times.append(time.time() - t)
        size = ctypes.c_size_t()
        if "compute_" in opts[0]:
            nv.nvrtcGetPTXSize(prog, ctypes.byref(size))
        else:
            nv.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        nv.nvrtcDestroyProgram(ctypes.byref(prog))
    each = " ".join(f"{x * 1e3:.1f}" for x in times)
    print(f"{name:32s} rc={rc} {each} ms ({repeats} runs, the first in the process first) {size.value} bytes", flush=True)
