#!/usr/bin/env python3
"""Times the CUDA driver's start-up steps one by one (ctypes, no toolkit needed): loading
libcuda, cuInit, device count and properties, the primary context, a stream, loading libnvrtc.
Prints one line per step and a JSON object at the end (milliseconds). Each step is what
grouper's `Gpu::open` does, in its order, so the sum is the fixed cost a process pays on its
first GPU use."""
import ctypes, json, sys, time

steps = {}

def timed(name, f):
    t = time.perf_counter()
    r = f()
    steps[name] = round((time.perf_counter() - t) * 1e3, 3)
    print(f"{name:28s} {steps[name]:9.3f} ms", flush=True)
    return r

cuda = timed("dlopen libcuda", lambda: ctypes.CDLL("libcuda.so.1"))
v = ctypes.c_int()
timed("cuDriverGetVersion", lambda: cuda.cuDriverGetVersion(ctypes.byref(v)))
timed("cuInit", lambda: cuda.cuInit(0))
n = ctypes.c_int()
timed("cuDeviceGetCount", lambda: cuda.cuDeviceGetCount(ctypes.byref(n)))
dev = ctypes.c_int()
timed("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(dev), 0))
name = ctypes.create_string_buffer(256)
timed("cuDeviceGetName", lambda: cuda.cuDeviceGetName(name, 256, dev))
ctx = ctypes.c_void_p()
timed("cuDevicePrimaryCtxRetain", lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
timed("cuCtxSetCurrent", lambda: cuda.cuCtxSetCurrent(ctx))
stream = ctypes.c_void_p()
timed("cuStreamCreate", lambda: cuda.cuStreamCreate(ctypes.byref(stream), 1))
buf = ctypes.c_void_p()
timed("cuMemHostAlloc 64 MiB", lambda: cuda.cuMemHostAlloc(ctypes.byref(buf), 64 << 20, 0))
for lib in ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]:
    try:
        timed(f"dlopen {lib}", lambda: ctypes.CDLL(lib))
        break
    except OSError:
        pass
print(json.dumps({"device": name.value.decode(), "driver": v.value, "steps_ms": steps}))
