#!/usr/bin/env bash
# Whether a change to the kernel generator changes the machine code: compiles every generated
# kernel the NVRTC check builds (scripts/nvrtc-check.sh) to sm_90 CUBINs at REV (default HEAD)
# and in the working tree, and lists each kernel as same or changed. No GPU needed: a refactor
# whose CUBINs are byte-identical needs no device run to show it changes nothing.
# Usage: scripts/cubin-diff.sh [REV]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD}
root=$PWD
out=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$out/base" >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
# The tree's kernels through the NVRTC check (which fetches NVRTC once, and must pass).
GROUPER_CUBIN_DIR="$out/after" scripts/nvrtc-check.sh >/dev/null
lib="$root/target/nvrtc/nvidia/cu13/lib"
git worktree add -q --detach "$out/base" "$rev"
tests=crates/grouper-gpu/src/codegen/tests.rs
if ! grep -q GROUPER_CUBIN_DIR "$out/base/$tests"; then
  echo "($rev's kernel checks write no CUBINs: the tree's $tests stands in for its own)"
  cp "$tests" "$out/base/$tests"
fi
# The base builds in a target folder of its own: cargo names a workspace's artifacts by their
# path in the workspace, so the base's and the tree's would overwrite each other in one (the
# first run builds arrow, parquet and cudarc there once).
(cd "$out/base" && GROUPER_CUBIN_DIR="$out/before" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  CARGO_TARGET_DIR="$root/target/cubin-base" cargo test -q -p grouper-gpu --lib -- --ignored \
  --exact codegen::tests::generated_kernels_compile_with_nvrtc >/dev/null)
changed=0
for f in "$out"/after/*.cubin; do
  k=$(basename "$f" .cubin)
  if [ ! -f "$out/before/$k.cubin" ]; then echo "new      $k"; changed=1
  elif cmp -s "$f" "$out/before/$k.cubin"; then echo "same     $k"
  else echo "changed  $k"; changed=1; fi
done
for f in "$out"/before/*.cubin; do
  [ -f "$out/after/$(basename "$f")" ] || { echo "gone     $(basename "$f" .cubin)"; changed=1; }
done
exit $changed
