# Sourced by device-test.sh and device-seeds.sh on the GPU machine: the kernel cache (NVRTC's
# CUBINs, keyed by source, architecture and driver, so valid across commits) and the device
# profiles travel between calls as .device/cache.txz, since NVRTC compiles dominate a cold run
# (the hashing schemes' GPU test alone compiled for more than 250 s) and the machine's /tmp does
# not outlive it. Copy a call's $OUT/cache.txz to .device/cache.txz for the next; device-prepare.sh
# keeps it when it rebuilds .device/.
# shellcheck shell=bash

# Unpacks the cache an earlier call brought back, when carried in .device/.
restore_cache() {
  local c
  for c in .device/cache.tgz .device/cache.txz; do
    [ -f "$c" ] && mkdir -p "$GROUPER_CACHE_DIR" && tar -C "$GROUPER_CACHE_DIR" -xf "$c"
  done
  return 0
}

# xz: a device call returns files of at most 16 MiB (kernels compress several times).
# Written aside and renamed: an archive cut short by the call's time limit never comes back.
save_cache() {
  [ -d "$GROUPER_CACHE_DIR" ] && XZ_OPT="-9 -T0" tar -C "$GROUPER_CACHE_DIR" -cJf /tmp/cache.txz . \
    && mv /tmp/cache.txz "$OUT/cache.txz"
}
