#!/usr/bin/env bash
# Compiles every generated kernel with NVRTC for sm_90, on a machine without a GPU or CUDA
# toolkit: NVRTC 13 (cudarc is built for CUDA 13) and its builtins come from the package
# registry's nvidia-cuda-nvrtc wheel, unpacked under target/nvrtc, and cudarc loads it through
# LD_LIBRARY_PATH. Fails unless the one test ran and passed. With GROUPER_CUBIN_DIR set, the
# test also writes each kernel's CUBIN there (cubin-diff.sh, sass.sh).
# Usage: scripts/nvrtc-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/wheel.sh
lib="$PWD/target/nvrtc/nvidia/cu13/lib"
[ -e "$lib/libnvrtc.so.13" ] || unpack_wheel 'nvidia-cuda-nvrtc==13.*' target/nvrtc
out=$(LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  cargo test -q -p grouper-gpu --lib -- --ignored --exact \
  codegen::tests::generated_kernels_compile_with_nvrtc 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -3
echo "$out" | grep -q "1 passed" || { echo "nvrtc-check: the test did not run"; exit 1; }
