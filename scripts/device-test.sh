#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .device/ carried
# (scripts/device-prepare.sh builds it). GPU tests must fail, not skip, when no GPU is found.
# Writes logs and results under $OUT (or ./device-out).
#   scripts/device-test.sh [tests|bench|all|profile|difftest|faults|q1|tuner|regret|compare|check|startup|compile|files|groupby|spill|harm ...]
#   (default: all = tests and bench; profile, difftest, faults, q1 and tuner run when named;
#   several names run in one call, in this script's order)
# tuner: `grouper bench tuner` (the runtime tuner against the exhaustive search over launch
# shapes; TUNER_ARGS adds arguments), JSON at $OUT/tuner.json, its SVG plots in $OUT/tplots.tgz.
# regret: for each backend in REGRET_BACKENDS (default "gpu"), `grouper calibrate` (CAL_ARGS)
# stores the device profile, then `grouper bench regret` (REGRET_ARGS) scores auto with it
# against every fixed strategy; JSON, the profile and an archive of the SVG plots under $OUT.
# q1: `grouper bench q1` (TPC-H Q1 from host RAM in every transfer mode, hybrid, CPU, DuckDB;
# Q1_ARGS adds arguments, e.g. --sf 10), JSON at $OUT/q1.json.
# difftest: `grouper difftest` against DuckDB on every CPU and GPU target for DIFFTEST_MINUTES
# (default 6), JSON and shrunk mismatches under $OUT. faults: the GPU fault battery through the
# CLI (out of GPU memory with the memory taken by torch, injected NVRTC failure): `--backend gpu`
# must fail with one clear line, `auto` with a GPU strategy must fall back and answer right.
# profile: Nsight Compute on the aggregation kernel of the points in PROFILE
# ("log2groups:strategy ...", 2^PROFILE_ROWS_LOG2 rows, dense then scattered keys), and the SASS
# of each kernel's source (atomics: native or CAS loops) under $OUT/profile/.
# compare: the same `grouper bench gpu-sweep` (COMPARE_ARGS) with .device/bin/grouper-before.xz
# (an earlier build, e.g. before a restructuring; keep its grouper.xz aside before
# device-prepare.sh, which empties .device/) and the current grouper, taking turns point set
# by point set, JSON at $OUT/compare-{before,after}-N.json.
# groupby: `grouper bench groupby` (GROUPBY_ARGS), JSON at $OUT/groupby.json.
# check: `grouper bench check` (CHECK_ARGS; e.g. --record to write the baseline) against
# bench/results/baseline-<machine>.json, JSON at $OUT/check.json (and the baseline when recorded).
# BENCH_ARGS adds arguments to `grouper bench gpu-sweep`; TEST_FILTER selects GPU tests.
# DuckDB for the Q1 peer comes from wheels carried in .whl/ (see scripts/device-prepare.sh).
# The kernel cache and profiles come back as $OUT/cache.txz; copied to .device/cache.txz, the
# next call starts from them. Past 8 files (what a call brings back), everything comes back in
# one archive, $OUT/all.tar.
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
modes=" ${*:-all} "
# Whether mode $1 was asked for.
wants() { [[ $modes == *" $1 "* ]]; }
status=0
# RUN_LIMIT=seconds bounds each benchmark run (the call's own limit would kill this script
# before it saves the kernel cache); their JSON is written point by point.
limited() { if [ -n "${RUN_LIMIT:-}" ]; then timeout -k 10 "$RUN_LIMIT" "$@"; else "$@"; fi; }
# shellcheck source=scripts/device-cache.sh
. scripts/device-cache.sh
restore_cache
# A call brings back at most 8 files from $OUT (the device tool's limit; past it the rest are
# left out, as two sweeps' JSON were once): with more, everything goes into one archive,
# $OUT/all.tar, written aside and renamed before the files it holds are removed.
bundle() {
  local n
  n=$(find "$OUT" -type f | wc -l)
  if [ "$n" -gt 8 ]; then
    tar -C "$OUT" -cf /tmp/device-all.tar . && find "$OUT" -mindepth 1 -delete \
      && mv /tmp/device-all.tar "$OUT/all.tar" && echo "device-test: $n files bundled in all.tar"
  fi
}
trap 'save_cache; bundle' EXIT
trap 'exit 143' TERM INT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
if wants tests || wants all; then
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
if [ -f .device/bin/grouper.xz ] && { wants bench || wants all; }; then
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
if wants profile; then
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  mkdir -p "$OUT/profile"
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for p in ${PROFILE:-0:perfect_registers 6:perfect_shared 10:perfect_shared 6:block_local 18:perfect_global}; do
    g=${p%%:*} s=${p#*:}
    args=(bench gpu-sweep --rows-log2 "${PROFILE_ROWS_LOG2:-26}" --min-groups-log2 "$g" --max-groups-log2 "$g"
      --reps 1 --strategies "$s" --tpch-sf --torch-python /bin/false --out /tmp/profile.json)
    GROUPER_DUMP_KERNEL=1 /tmp/grouper "${args[@]}" > "$OUT/profile/$g-$s.run.txt" 2> "$OUT/profile/$g-$s.cu.txt"
    # The first source printed for this strategy is the dense one; compile it alone for its SASS.
    awk -v s="strategy $s," '/^\/\/ grouper generated kernel/{on = !done && index($0, s) > 0; if (on) done = 1} on' \
      "$OUT/profile/$g-$s.cu.txt" > /tmp/k.cu
    if nvcc -cubin -arch=sm_90 -std=c++17 -o /tmp/k.cubin /tmp/k.cu 2> "$OUT/profile/$g-$s.nvcc.txt"; then
      cuobjdump -sass /tmp/k.cubin > "$OUT/profile/$g-$s.sass.txt"
    fi
    [ -n "$ncu" ] && "$ncu" --clock-control none --kernel-name agg_rows --launch-count 4 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
      /tmp/grouper "${args[@]}" > "$OUT/profile/$g-$s.ncu.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per" "$OUT/profile/$g-$s.ncu.txt" | head -4
  done
  # A device call brings back at most 8 files: one archive.
  tar -C "$OUT" -czf "$OUT/profile.tgz" profile && rm -rf "$OUT/profile"
fi
if wants q1; then
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  /tmp/grouper demo --backend hybrid --explain 2>&1 | grep -o "GroupByExec.*" | tee "$OUT/hybrid-explain.txt"
  # shellcheck disable=SC2086
  limited /tmp/grouper bench q1 --python python3 --out "$OUT/q1.json" ${Q1_ARGS:-} 2>&1 | tee "$OUT/q1.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if wants tuner; then
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  # shellcheck disable=SC2086
  limited /tmp/grouper bench tuner --out "$OUT/tuner.json" --plots "$OUT/tplots" ${TUNER_ARGS:-} 2>&1 | tee "$OUT/tuner.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  [ -d "$OUT/tplots" ] && tar -C "$OUT" -czf "$OUT/tplots.tgz" tplots && rm -rf "$OUT/tplots"
fi
if wants regret; then
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  for b in ${REGRET_BACKENDS:-gpu}; do
    if [ -z "${SKIP_CALIBRATE:-}" ]; then
      # shellcheck disable=SC2086
      /tmp/grouper calibrate --devices "$b" ${CAL_ARGS:-} 2>&1 | tee "$OUT/calibrate-$b.log"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
    fi
    # shellcheck disable=SC2086
    limited /tmp/grouper bench regret --backend "$b" --out "$OUT/regret-$b.json" --plots "$OUT/plots" ${REGRET_ARGS:-} 2>&1 | tee "$OUT/regret-$b.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
  cp "$GROUPER_CACHE_DIR"/profile-*.json "$OUT/" 2>/dev/null
  [ -d "$OUT/plots" ] && tar -C "$OUT" -czf "$OUT/plots.tgz" plots && rm -rf "$OUT/plots"
fi
if wants difftest || wants faults; then
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
fi
if wants difftest; then
  /tmp/grouper difftest --python python3 --seed "${DIFFTEST_SEED:-7}" --minutes "${DIFFTEST_MINUTES:-6}" \
    --save "$OUT/difftest-cases" --json "$OUT/difftest-gpu.json" 2>&1 | tail -60 | tee "$OUT/difftest.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  [ -d "$OUT/difftest-cases" ] && tar -C "$OUT" -czf "$OUT/difftest-cases.tgz" difftest-cases && rm -rf "$OUT/difftest-cases"
fi
if wants faults; then
  f="$OUT/faults.log"
  printf 'k,v\n1,10\n1,20\n2,5\n' > /tmp/g.csv
  sql="SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k"
  want=$'k,s\n1,30\n2,5'
  check() { # name, expected exit code, glob pattern the output must contain
    local name=$1 code=$2 pat=$3 out rc
    out=$(cat /tmp/fault.out); rc=$(cat /tmp/fault.rc)
    # shellcheck disable=SC2053
    if [ "$rc" = "$code" ] && [[ $out == *$pat* ]] && [[ $out != *panicked* ]]; then
      echo "ok   $name" | tee -a "$f"
    else
      echo "FAIL $name (exit $rc): $out" | tee -a "$f"; status=1
    fi
  }
  run() { "$@" > /tmp/fault.out 2>&1; echo $? > /tmp/fault.rc; }
  run /tmp/grouper query "$sql" --table t=/tmp/g.csv --backend gpu --format csv
  check "gpu backend answers" 0 "$want"
  GROUPER_INJECT_NVRTC_FAILURE=1 GROUPER_CACHE_DIR=/tmp/nvrtc-empty run /tmp/grouper query "$sql" --table t=/tmp/g.csv --backend gpu
  check "NVRTC failure, --backend gpu: clear error" 2 "error: *kernel compilation failed"
  GROUPER_INJECT_NVRTC_FAILURE=1 GROUPER_CACHE_DIR=/tmp/nvrtc-empty run /tmp/grouper query "$sql" --table t=/tmp/g.csv --strategy global --format csv
  check "NVRTC failure, auto: CPU answer" 0 "$want"
  GROUPER_INJECT_NVRTC_FAILURE=1 GROUPER_CACHE_DIR=/tmp/nvrtc-empty run /tmp/grouper query "$sql" --table t=/tmp/g.csv --strategy global --explain
  check "NVRTC failure, auto: explain says why" 0 "backend=cpu (GPU failed"
  /tmp/grouper gen synthetic --rows 150000000 --groups 1000 -o /tmp/big.parquet > /dev/null 2>&1
  # Out of GPU memory for real: torch holds all but 1 GiB (room for a CUDA context) while
  # grouper runs a query whose key column alone needs 1.2 GB.
  python3 - <<'PY' &
import time, torch
free, _ = torch.cuda.mem_get_info()
hold = torch.empty(free - (1 << 30), dtype=torch.uint8, device="cuda")
open("/tmp/held", "w").write(str(hold.numel()))
time.sleep(120)
PY
  holder=$!
  for _ in $(seq 60); do [ -f /tmp/held ] && break; sleep 1; done
  big="SELECT k, count(*) AS n FROM '/tmp/big.parquet' GROUP BY k"
  # Raw: compressed, the key column would fit (10 bits a row).
  run /tmp/grouper query "$big" --backend gpu --resident --transfer raw
  check "GPU out of memory, --backend gpu: clear error" 2 "error: *out of GPU memory"
  run /tmp/grouper query "SELECT count(*) AS groups, sum(n) AS n FROM ($big)" --strategy perfect_global --resident --transfer raw --format csv
  check "GPU out of memory, auto: CPU answer" 0 $'groups,n\n1000,150000000'
  kill $holder 2>/dev/null; wait $holder 2>/dev/null; rm -f /tmp/held
fi
if wants compare && [ -f .device/bin/grouper-before.xz ]; then
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  xz -dc .device/bin/grouper-before.xz > /tmp/grouper-before && chmod +x /tmp/grouper-before
  # Point sets in turns (before, after, before, after): clocks and load drift over minutes.
  for turn in 1 2; do
    for who in before after; do
      bin=/tmp/grouper; [ "$who" = before ] && bin=/tmp/grouper-before
      echo "== $who, turn $turn"
      # shellcheck disable=SC2086
      limited "$bin" bench gpu-sweep --torch-python /bin/false --python python3 \
        --out "$OUT/compare-$who-$turn.json" ${COMPARE_ARGS:-} 2>&1 | tee -a "$OUT/compare.log" \
        | grep -vE "^ *$"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
    done
  done
fi
if wants check; then
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  # shellcheck disable=SC2086
  limited /tmp/grouper bench check --out "$OUT/check.json" --data /tmp/bench-check ${CHECK_ARGS:-} 2>&1 | tee "$OUT/check.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  cp bench/results/baseline-*.json "$OUT/" 2>/dev/null
fi
if wants startup; then
  # The fixed cost of a fresh process: the driver's start-up steps (scripts/gpu-startup.py,
  # twice: the first may pay the device's own initialization), then one `grouper query` process
  # per run on a 1,000-row Parquet file under each backend (scripts/startup-bench.py).
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  for i in 1 2; do python3 scripts/gpu-startup.py | tee "$OUT/gpu-startup-$i.log"; done
  python3 scripts/startup-bench.py /tmp/grouper "$OUT/startup.json" | tee "$OUT/startup.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if wants compile; then
  # Where a cold GPU query's compile time goes: TPC-H Q1 (SF 0.1, built-in data) under each GPU
  # strategy, first with an empty kernel cache (NVRTC to the device's CUBIN, then its load), then
  # again with the CUBIN on disk (its load alone), each as one fresh process with
  # --explain (compile= in the GroupByExec line) and its wall time.
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  for s in perfect_registers perfect_shared perfect_global block_local thread_private global; do
    for pass in cold warm; do
      [ $pass = cold ] && rm -rf /tmp/compile-cache
      t0=$(date +%s.%N)
      line=$(GROUPER_CACHE_DIR=/tmp/compile-cache timeout -k 5 200 /tmp/grouper demo --sf 0.1 \
        --backend gpu --strategy $s --explain 2>&1 | grep -oE "compile[^,]*" | head -2 | tr '\n' ' ')
      t1=$(date +%s.%N)
      printf '%-18s %-5s wall %6.2f s  %s\n' "$s" "$pass" "$(python3 -c "print($t1 - $t0)")" "$line" \
        | tee -a "$OUT/compile.log"
    done
  done
fi
if wants files; then
  # `grouper bench files`: TPC-H from Parquet written by tpchgen-cli (carried as
  # .device/bin/tpchgen-cli.xz) at FILES_SF (22 queries, default 10) and Q1 alone at
  # FILES_Q1_SF (default 30), one fresh process per query, against --backend datafusion and
  # DuckDB; FILES_ARGS adds arguments (e.g. --engine gpu=--backend gpu). JSON and SVGs in $OUT.
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  xz -dc .device/bin/tpchgen-cli.xz > /tmp/tpchgen-cli && chmod +x /tmp/tpchgen-cli
  # shellcheck disable=SC2086
  limited /tmp/grouper bench files --data /tmp/tpch --sf "${FILES_SF:-10}" \
    --q1-sf "${FILES_Q1_SF:-30}" --runs "${FILES_RUNS:-3}" --tpchgen /tmp/tpchgen-cli \
    --python python3 --out "$OUT/files.json" ${FILES_ARGS:-} 2>&1 | tee "$OUT/files.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if wants groupby; then
  # `grouper bench groupby`: the db-benchmark group-by questions on its G1 data in memory,
  # auto, cpu and DataFusion alone against DuckDB (in-process timings). GROUPBY_ARGS, e.g.
  # "--rows 1e7,1e8 --runs 3"; the JSON is rewritten after each question.
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  # shellcheck disable=SC2086
  limited /tmp/grouper bench groupby --python python3 --out "$OUT/groupby.json" ${GROUPBY_ARGS:-} 2>&1 | tee "$OUT/groupby.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if wants spill; then
  # scripts/spill-bench.py: aggregations larger than their memory budget, grouper --backend cpu,
  # DataFusion alone and DuckDB in fresh processes under one limit (wall time, peak RSS, answers
  # against DuckDB's). SPILL_RUNS="shape:rows:limit ..." (default "u:2e7:128M q10:1e8:2G"),
  # SPILL_TIMEOUT seconds per run (default 200), SPILL_ENGINES (default grouper,duckdb,datafusion);
  # JSON per point at $OUT/spill-*.json.
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  for point in ${SPILL_RUNS:-u:2e7:128M q10:1e8:2G}; do
    IFS=: read -r shape rows limit <<< "$point"
    limited python3 scripts/spill-bench.py --grouper /tmp/grouper --shape "$shape" --rows "$rows" \
      --limit "$limit" --data /tmp/spill-data --timeout "${SPILL_TIMEOUT:-200}" \
      --engines "${SPILL_ENGINES:-grouper,duckdb,datafusion}" \
      --out "$OUT/spill-$shape-$rows-$limit.json" 2>&1 | tee -a "$OUT/spill.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
fi
if wants harm; then
  # `grouper bench harm`: random GROUP BY cases, auto against --backend datafusion in fresh
  # processes (the timing twin of difftest). HARM_ARGS, e.g. "--cases 200 --first-seed 200";
  # RUN_LIMIT bounds the call (the JSON is rewritten after every case). JSON, log and the
  # reproducers of harmful cases under $OUT.
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  # shellcheck disable=SC2086
  limited /tmp/grouper bench harm --data /tmp/harm --save "$OUT/harm-cases" \
    --out "$OUT/harm.json" ${HARM_ARGS:-} 2>&1 | tee "$OUT/harm.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if wants pages; then
  # Parquet pages decoded on the GPU, checked and shown: TPC-H at PAGES_SF (default 1) from
  # tpchgen-cli; Q1 and Q6 with --explain under --backend gpu (pages) and --no-gpu-pages, each
  # answer compared with the CPU's.
  xz -dc .device/bin/grouper.xz > /tmp/grouper && chmod +x /tmp/grouper
  xz -dc .device/bin/tpchgen-cli.xz > /tmp/tpchgen-cli && chmod +x /tmp/tpchgen-cli
  sf=${PAGES_SF:-1}; d=/tmp/tpch/sf$sf
  [ -f $d/lineitem.parquet ] || /tmp/tpchgen-cli parquet --quiet -s $sf --tables lineitem --output-dir $d
  # Where a large scale factor's time goes (PAGES_TIMING_SF, e.g. 30): --timing and --explain.
  if [ -n "${PAGES_TIMING_SF:-}" ]; then
    t=/tmp/tpch/sf$PAGES_TIMING_SF
    [ -f $t/lineitem.parquet ] || /tmp/tpchgen-cli parquet --quiet -s $PAGES_TIMING_SF --tables lineitem --output-dir $t
    cat $t/lineitem.parquet > /dev/null
    # GROUPER_TRACE=1 adds the timeline (GPU start, compiles, the stream's readers and copies).
    # PAGES_TIMING_FLAGS: the runs' flags, separated by ';'.
    IFS=';' read -ra sets <<< "${PAGES_TIMING_FLAGS:---backend gpu;--backend gpu;--backend cpu}"
    for flags in "${sets[@]}"; do
      s0=$(date +%s.%N)
      # shellcheck disable=SC2086
      /tmp/grouper query $flags --timing --explain --table lineitem=$t/lineitem.parquet \
        "$(cat crates/grouper-cli/src/bench/tpch/q01.sql)" > /tmp/timing.log 2>&1
      s1=$(date +%s.%N)
      grep -oE "timing:.*|compile=[^,]*|prepare=[^,]*|kernels=[^;]*|\[trace.*" /tmp/timing.log \
        | tee -a "$OUT/pages.log"
      echo " [$flags, wall $(python3 -c "print(round($s1 - $s0, 3))") s]" | tee -a "$OUT/pages.log"
    done
  fi
  # And two filters whose row groups the GPU's reader prunes by their statistics (tpchgen-cli
  # writes lineitem in l_orderkey order): about a sixth of SF 1's kept (p1), none (p0).
  pruned="SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice), avg(l_discount), count(*) FROM lineitem WHERE l_orderkey %s GROUP BY l_returnflag, l_linestatus ORDER BY 1, 2"
  for q in 01 06 p1 p0; do
    case $q in
      p1) sql=$(printf "$pruned" "<= 1000000") ;;
      p0) sql=$(printf "$pruned" "< 0") ;;
      *) sql=$(cat crates/grouper-cli/src/bench/tpch/q$q.sql) ;;
    esac
    for mode in cpu gpu gpu-batches; do
      flags="--backend $mode"; [ $mode = gpu-batches ] && flags="--backend gpu --no-gpu-pages"
      # shellcheck disable=SC2086
      /tmp/grouper query $flags --table lineitem=$d/lineitem.parquet --format csv \
        --output /tmp/q$q-$mode.csv "$sql" 2>&1 | tail -2
      # shellcheck disable=SC2086
      /tmp/grouper query $flags --explain --table lineitem=$d/lineitem.parquet "$sql" 2>&1 \
        | grep -oE "GroupByExec.*" | cut -c1-1500 | tee -a "$OUT/pages.log"
      if [ $mode != cpu ]; then
        if cmp -s /tmp/q$q-cpu.csv /tmp/q$q-$mode.csv; then echo "q$q $mode: same answer as the CPU" | tee -a "$OUT/pages.log"
        else echo "q$q $mode: ANSWER DIFFERS from the CPU" | tee -a "$OUT/pages.log"; diff /tmp/q$q-cpu.csv /tmp/q$q-$mode.csv | head -5; status=1; fi
      fi
    done
  done
fi
echo "device-test: exit $status"
exit $status
