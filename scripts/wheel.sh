# Sourced by the scripts that take a CUDA tool from the package registry instead of a toolkit
# (nvrtc-check.sh, sass.sh).
# unpack_wheel SPEC DEST: downloads the one wheel SPEC names (pip's requirement form, e.g.
# 'nvidia-cuda-nvrtc==13.*') and unpacks it into DEST, emptied first.
unpack_wheel() {
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$1"
  rm -rf "$2" && mkdir -p "$2"
  python3 -m zipfile -e "$(ls "$tmp"/*.whl | head -1)" "$2"
  rm -rf "$tmp"
}
