#!/usr/bin/env bash
# On the GPU machine (a device call carrying .device/ from scripts/device-prepare.sh): the GPU's
# hashing schemes (issue 28). Their GPU tests first (every scheme through trap and grow; the
# property test, which draws linear, chained and chained_plus), then the rest of grouper-gpu's
# GPU tests unless SCHEMES_TESTS_ONLY=1, then `bench seeds luan --parts gpu` (SEEDS_ARGS, default
# --quick; resumable: SEEDS_DIR holding an earlier call's luan-gpu.json of the same commit),
# bounded by SEEDS_SECS (default 240). Everything lands under $OUT as it goes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 GROUPER_CACHE_DIR=/tmp/grouper-kernels GROUPER_REQUIRE_GPU=1
export GROUPER_COMMIT=$(cat .device/COMMIT)
O=$OUT; G=/tmp/grouper; T=/tmp/grouper-gpu-it
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
xz -dc .device/tests/grouper-gpu-it.xz > $T && chmod +x $T
xz -dc .device/bin/grouper.xz > $G && chmod +x $G
echo "== scheme tests ($(date +%T))"
timeout ${SCHEMES_TEST_SECS:-240} $T --include-ignored --test-threads=1 schemes every_gpu_strategy atomics 2>&1 \
  | tee $O/schemes-tests.log | grep -E "^test |test result|panicked|differs" | tail -12
if [ "${SCHEMES_TESTS_ONLY:-0}" != 1 ]; then
  echo "== the other GPU tests ($(date +%T))"
  timeout ${OTHER_TEST_SECS:-240} $T --include-ignored --test-threads=1 --skip schemes --skip every_gpu_strategy --skip atomics 2>&1 \
    | tee $O/gpu-tests.log | grep -E "test result|panicked|FAILED|differs" | tail -8
fi
mkdir -p $O/seeds; cp -r ${SEEDS_DIR:-bench/results/seeds}/. $O/seeds/ 2>/dev/null
echo "== seeds luan gpu ($(date +%T))"
timeout ${SEEDS_SECS:-240} $G bench seeds luan --parts gpu --resume --out-dir $O/seeds ${SEEDS_ARGS:---quick} > $O/seeds-gpu.log 2>&1
echo "rc=$? $(grep -c ' ms$' $O/seeds-gpu.log) points measured"; tail -4 $O/seeds-gpu.log
rm -f $O/seeds/luan-cpu* $O/seeds/sort-atomics* 2>/dev/null
