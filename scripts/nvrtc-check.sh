#!/usr/bin/env bash
# Compiles every generated kernel with NVRTC for sm_90, on a machine without a GPU or CUDA
# toolkit: NVRTC 13 (cudarc is built for CUDA 13) and its builtins come from the package
# registry's nvidia-cuda-nvrtc wheel, unpacked under target/nvrtc, and cudarc loads it through
# LD_LIBRARY_PATH. Fails unless the one test ran and passed.
# Usage: scripts/nvrtc-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
lib="$PWD/target/nvrtc/nvidia/cu13/lib"
if [ ! -e "$lib/libnvrtc.so.13" ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" 'nvidia-cuda-nvrtc==13.*'
  rm -rf target/nvrtc && mkdir -p target/nvrtc
  python3 -m zipfile -e "$(ls "$tmp"/nvidia_cuda_nvrtc-*.whl | head -1)" target/nvrtc
  rm -rf "$tmp"
fi
out=$(LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  cargo test -q -p grouper-gpu --lib -- --ignored --exact \
  codegen::tests::generated_kernels_compile_with_nvrtc 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -3
echo "$out" | grep -q "1 passed" || { echo "nvrtc-check: the test did not run"; exit 1; }
