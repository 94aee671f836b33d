#!/usr/bin/env bash
# On the GPU machine (a device call carrying .device/ from scripts/device-prepare.sh): issue 28's
# checks and experiments. A co-processed shell batch (--coprocess: the GPU takes the costliest
# query, MEDIAN, which the GPU lacks, falls back to the CPU), then `bench seeds luan`: the
# co-processing workloads (Fig. 15), then the CPU part (schemes, hash functions, distributions,
# data size), resumable: run it with SEEDS_DIR holding an earlier call's JSON of the same commit
# (bench/results/seeds, carried with the tree) and it measures only the points still missing.
# Everything lands under $OUT as it goes. SEEDS_SECS bounds the CPU part (default 300).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 GROUPER_CACHE_DIR=/tmp/grouper-kernels
export GROUPER_COMMIT=$(cat .device/COMMIT)
O=$OUT; G=/tmp/grouper
[ -x $G ] || { xz -dc .device/bin/grouper.xz > $G && chmod +x $G; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
echo "== co-processed shell batch ($(date +%T))"
printf '%s\n' \
  "CREATE TABLE big AS SELECT value % 64 AS k, value AS v FROM generate_series(1, 50000000);" \
  "CREATE TABLE small AS SELECT value % 7 AS k, value AS v FROM generate_series(1, 1000);" \
  ".timer on" ".mode csv" \
  "SELECT k, count(*) AS n, sum(v) AS s FROM big GROUP BY k ORDER BY k LIMIT 3;" \
  "SELECT k, count(*) AS n FROM small GROUP BY k ORDER BY k;" \
  "SELECT k, median(v) AS m FROM big GROUP BY k ORDER BY k LIMIT 2;" \
  | GROUPER_REQUIRE_GPU=1 timeout 180 $G --coprocess > $O/coprocess-shell.txt 2>&1
echo "rc=$?"; tail -22 $O/coprocess-shell.txt
mkdir -p $O/seeds; cp -r ${SEEDS_DIR:-bench/results/seeds}/. $O/seeds/ 2>/dev/null
echo "== seeds luan coprocess ($(date +%T))"
GROUPER_REQUIRE_GPU=1 timeout 240 $G bench seeds luan --parts coprocess --reps 3 --out-dir $O/seeds 2>&1 | tail -12
echo "== seeds luan cpu ($(date +%T))"
timeout ${SEEDS_SECS:-300} $G bench seeds luan --parts cpu --reps 3 --resume --out-dir $O/seeds > $O/seeds-cpu.log 2>&1
echo "rc=$? $(grep -c ' ms$' $O/seeds-cpu.log) points measured"; tail -3 $O/seeds-cpu.log
