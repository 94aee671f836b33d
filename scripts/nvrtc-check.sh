#!/usr/bin/env bash
# Compiles every generated kernel with NVRTC for sm_90, on a machine without a GPU or CUDA
# toolkit: NVRTC (and its builtins) come from the package registry's nvidia-cuda-nvrtc wheel,
# unpacked under target/nvrtc, and cudarc loads it through LD_LIBRARY_PATH.
# Usage: scripts/nvrtc-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/nvrtc
if ! ls "$dir"/nvidia/cu*/lib/libnvrtc.so* >/dev/null 2>&1; then
  mkdir -p "$dir"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$dir" nvidia-cuda-nvrtc
  python3 -m zipfile -e "$dir"/nvidia_cuda_nvrtc-*.whl "$dir"
fi
lib=$(cd "$(dirname "$(ls "$dir"/nvidia/cu*/lib/libnvrtc.so* | head -1)")" && pwd)
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  cargo test -q -p grouper-gpu --lib codegen::tests::generated_kernels_compile_with_nvrtc -- --ignored
