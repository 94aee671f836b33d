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
. scripts/wheel.sh
nd="$PWD/target/nvdisasm/nvidia/cu13/bin/nvdisasm"
if [ ! -x "$nd" ]; then
  unpack_wheel 'nvidia-cuda-nvdisasm==13.*' target/nvdisasm
  chmod +x "$nd"
fi
rm -rf target/sass && mkdir -p target/sass
# The NVRTC check compiles the kernels (and must pass) and writes their CUBINs here.
GROUPER_CUBIN_DIR="$PWD/target/sass" scripts/nvrtc-check.sh >/dev/null
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
