#!/usr/bin/env bash
# On the GPU machine (a device call carrying .device/ from scripts/device-prepare.sh): issue 28's
# `grouper bench seeds` runs, each resumable across device calls. Steps, in the order given:
#   tests:F1,F2        grouper-gpu's GPU tests whose names hold F1 or F2 (e.g. tests:atomics
#                      after a kernel of the paper's changed; tests:schemes,every_gpu_strategy
#                      for the hashing schemes; `tests` alone runs them all, which no longer fits
#                      one call: of 26 tests, calls of 360, 108 and 120 s on an H100 at ab07a98
#                      passed 15 and were cut in two — split them, e.g. tests:gpu:: then
#                      tests:parquet_pages then tests:atomics,narrow_rows,runtime,schemes,sort::),
#                      bounded by TEST_SECS (default 240)
#   check              `bench check --only gpu` against the committed baseline of this GPU
#                      (check-gpu.json beside the results), bounded by CHECK_SECS (default 240)
#   shell              a co-processed shell batch (--coprocess: the GPU takes the costliest
#                      query; MEDIAN, which the GPU lacks, falls back to the CPU)
#   <paper>[:parts]    `bench seeds <paper> --resume [--parts parts]` with SEEDS_ARGS (e.g.
#                      --quick), bounded by SEEDS_SECS (default 240) each: luan, karnagel,
#                      rosenfeld, sort-atomics, tome
# e.g. scripts/device-seeds.sh tests:atomics sort-atomics:atomics karnagel check
# The earlier JSON comes from SEEDS_DIR (carried with the tree; default bench/results/seeds on an
# H100, bench/results/seeds/h200 on an H200: the GPU harnesses' file names do not name the GPU)
# and must be of the same commit and GPU to be kept; everything lands in $OUT/seeds.tar as each
# step ends (a call brings back at most 8 files), with each step's log beside it. The script may
# run twice in one call (e.g. with other SEEDS_ARGS): what this machine measured is never
# overwritten by the default folder's copy; a SEEDS_DIR named explicitly replaces what is there
# (a second run in one call with its own SEEDS_DIR found the first run's default copy in its
# place, kept it, and measured nothing).
# The kernel cache comes back as $OUT/cache.txz (scripts/device-cache.sh): copied to
# .device/cache.txz, the next call starts from it.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 GROUPER_CACHE_DIR=/tmp/grouper-kernels GROUPER_REQUIRE_GPU=1
# shellcheck source=scripts/device-cache.sh
. scripts/device-cache.sh
restore_cache
trap save_cache EXIT
export GROUPER_COMMIT=$(cat .device/COMMIT)
O=$OUT; G=/tmp/grouper; S=/tmp/seeds
[ -x $G ] || { xz -dc .device/bin/grouper.xz > $G && chmod +x $G; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
case "$(cat $O/gpu.txt)" in *H200*) D=bench/results/seeds/h200 ;; *) D=bench/results/seeds ;; esac
mkdir -p $S
if [ -n "${SEEDS_DIR:-}" ]; then cp -r "$SEEDS_DIR"/. $S/; else cp -rn $D/. $S/ 2>/dev/null; fi
for step in "$@"; do
  echo "== $step ($(date +%T))"
  if [ "${step%%:*}" = tests ]; then
    filters=""; [ "$step" != tests ] && filters=$(echo "${step#tests:}" | tr , ' ')
    T=/tmp/grouper-gpu-it
    [ -x $T ] || { xz -dc .device/tests/grouper-gpu-it.xz > $T && chmod +x $T; }
    # shellcheck disable=SC2086
    timeout ${TEST_SECS:-240} $T --include-ignored --test-threads=1 $filters > $S/tests.log 2>&1
    echo "rc=$?"; grep -E "^test |test result|panicked|differs" $S/tests.log | tail -12
  elif [ "$step" = check ]; then
    timeout ${CHECK_SECS:-240} $G bench check --only gpu --out $S/check-gpu.json > $S/check.log 2>&1
    echo "rc=$?"; tail -5 $S/check.log
  elif [ "$step" = shell ]; then
    printf '%s\n' \
      "CREATE TABLE big AS SELECT value % 64 AS k, value AS v FROM generate_series(1, 50000000);" \
      "CREATE TABLE small AS SELECT value % 7 AS k, value AS v FROM generate_series(1, 1000);" \
      ".timer on" ".mode csv" \
      "SELECT k, count(*) AS n, sum(v) AS s FROM big GROUP BY k ORDER BY k LIMIT 3;" \
      "SELECT k, count(*) AS n FROM small GROUP BY k ORDER BY k;" \
      "SELECT k, median(v) AS m FROM big GROUP BY k ORDER BY k LIMIT 2;" \
      | timeout 180 $G --coprocess > $S/coprocess-shell.txt 2>&1
    echo "rc=$?"; tail -22 $S/coprocess-shell.txt
  else
    paper=${step%%:*}; parts=""
    [ "$paper" != "$step" ] && parts="--parts ${step#*:}"
    log=$S/$(echo "$step" | tr ":," "--").log
    # shellcheck disable=SC2086
    timeout ${SEEDS_SECS:-240} $G bench seeds $paper --resume --out-dir $S $parts ${SEEDS_ARGS:-} > $log 2>&1
    echo "rc=$? $(grep -c ' ms$\|"ms"' $log) lines timed"; tail -3 $log | cut -c1-300
  fi
  tar -C $S -cf $O/seeds.tar .
done
