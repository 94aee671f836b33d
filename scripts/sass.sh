#!/usr/bin/env bash
# The SASS of every kernel the NVRTC check builds (scripts/nvrtc-check.sh), without a GPU:
# CUBINs for sm_90 from the tree, disassembled with nvdisasm from the package registry's
# nvidia-cuda-nvdisasm wheel (unpacked under target/nvdisasm), into target/sass/NAME.sass, and a
# line a kernel: instructions, shared-memory atomics native and as compare-and-swap loops
# (a double's or a 64-bit integer's atomicAdd on shared memory is one on sm_90), and global
# atomics. The device's `device-test.sh profile` gives the SASS of a sweep point's own kernel.
# Usage: scripts/sass.sh [NAME-SUBSTRING]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/nvrtc-check.sh >/dev/null  # fetches NVRTC once, and the tree's kernels must compile
nd="$PWD/target/nvdisasm/nvidia/cu13/bin/nvdisasm"
if [ ! -x "$nd" ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" 'nvidia-cuda-nvdisasm==13.*'
  rm -rf target/nvdisasm && mkdir -p target/nvdisasm
  python3 -m zipfile -e "$(ls "$tmp"/nvidia_cuda_nvdisasm-*.whl | head -1)" target/nvdisasm
  chmod +x "$nd"
  rm -rf "$tmp"
fi
rm -rf target/sass && mkdir -p target/sass
GROUPER_CUBIN_DIR="$PWD/target/sass" LD_LIBRARY_PATH="$PWD/target/nvrtc/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  cargo test -q -p grouper-gpu --lib -- --ignored --exact \
  codegen::tests::generated_kernels_compile_with_nvrtc >/dev/null
printf '%-32s %8s %10s %10s %8s\n' kernel instrs smem-atom smem-cas gmem-atom
for c in target/sass/*.cubin; do
  k=$(basename "$c" .cubin)
  [[ $k == *"${1:-}"* ]] || { rm "$c"; continue; }
  "$nd" -c "$c" > "target/sass/$k.sass"
  rm "$c"
  n() { grep -cE "$1" "target/sass/$k.sass" || true; }
  printf '%-32s %8s %10s %10s %8s\n' "$k" "$(n '/\*[0-9a-f]{4}\*/')" "$(n 'ATOMS\.(ADD|INC|MIN|MAX|AND|OR|XOR|EXCH|POPC)')" \
    "$(n 'ATOMS\.CAS')" "$(n '(ATOMG|RED)\.')"
done
