#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .device/ carried
# (scripts/device-prepare.sh builds it). GPU tests must fail, not skip, when no GPU is found.
# Writes logs and results under $OUT (or ./device-out).
#   scripts/device-test.sh [tests|bench|all]   (default: all)
# BENCH_ARGS adds arguments to `grouper bench gpu-sweep`; TEST_FILTER selects GPU tests.
# DuckDB for the Q1 peer comes from wheels carried in .whl/ (see scripts/device-prepare.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GROUPER_REQUIRE_GPU=1
export GROUPER_CACHE_DIR=/tmp/grouper-kernels
OUT=${OUT:-./device-out}
export GROUPER_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
mkdir -p "$OUT"
what=${1:-all}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
if [ "$what" = tests ] || [ "$what" = all ]; then
  mkdir -p /tmp/grouper-tests
  for z in .device/tests/*.xz; do
    t=/tmp/grouper-tests/$(basename "$z" .xz)
    xz -dc "$z" > "$t" && chmod +x "$t"
    echo "== $(basename "$t")"
    # shellcheck disable=SC2086
    "$t" --include-ignored --test-threads=1 ${TEST_FILTER:-} 2>&1 | tee -a "$OUT/tests.log" | grep -E "^test |test result|panicked|FAILED|differs" | tail -40
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
fi
if [ -f .device/bin/grouper.xz ] && { [ "$what" = bench ] || [ "$what" = all ]; }; then
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  /tmp/grouper devices | tee "$OUT/devices.txt" || status=1
  if [ -n "${SMOKE:-}" ]; then
    # A few end-to-end queries through DataFusion on the GPU, with --explain.
    /tmp/grouper demo --backend gpu --explain 2>&1 | tail -25 | tee "$OUT/smoke.log" || status=1
    /tmp/grouper demo --backend gpu --resident --explain 2>&1 | grep -o "GroupByExec.*" | tee -a "$OUT/smoke.log" || status=1
  fi
  # shellcheck disable=SC2086
  /tmp/grouper bench gpu-sweep --python python3 --out "$OUT/gpu-sweep.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
echo "device-test: exit $status"
exit $status
