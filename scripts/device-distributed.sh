#!/usr/bin/env bash
# On the GPU machine (a device call carrying .device/ from scripts/device-prepare.sh): Q1 by
# backend in one process (co-processing included), then grouper-distributed with a GPU worker
# (its partial phase runs co-processing's partial path): Q1 and the db-benchmark questions through
# three workers against one process, the plan with --explain, and `bench check --only gpu`.
# Writes everything under $OUT as it goes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 GROUPER_CACHE_DIR=/tmp/grouper-kernels PYTHONUNBUFFERED=1
O=$OUT; G=/tmp/grouper
xz -dc .device/bin/grouper.xz > $G && chmod +x $G
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
cat .device/COMMIT | tee $O/commit.txt
$G devices 2>&1 | head -5 | tee $O/devices.txt
D=/tmp/d; mkdir -p $D
( time $G gen tpch --sf 1 -o $D/tpch ) 2>&1 | tail -3
$G gen groupby --rows 2e6 --k 100 --nas 5 -o $D/x.parquet 2>&1 | tail -1
Q1=$(cat crates/grouper-cli/src/bench/tpch/q01.sql)
echo "== Q1 by backend (one process)" | tee -a $O/log.txt
for b in cpu gpu hybrid auto datafusion; do
  s=$(date +%s.%N)
  GROUPER_REQUIRE_GPU=1 timeout 120 $G query --backend $b --table lineitem=$D/tpch/lineitem/ "$Q1" --format csv > $O/q1-$b.csv 2> $O/q1-$b.err
  echo "$b rc=$? $(python3 -c "print(round($(date +%s.%N)-$s,3))") s $(md5sum < $O/q1-$b.csv)" | tee -a $O/log.txt
done
GROUPER_REQUIRE_GPU=1 $G query --backend hybrid --explain --table lineitem=$D/tpch/lineitem/ "$Q1" > $O/q1-hybrid-explain.txt 2>&1
echo "== workers" | tee -a $O/log.txt
GROUPER_TRACE=1 GROUPER_REQUIRE_GPU=1 $G worker --listen 127.0.0.1:50061 --backend gpu --threads 4 > $O/w1.out 2> $O/w1.err &
$G worker --listen 127.0.0.1:50062 --backend cpu --threads 4 > $O/w2.out 2> $O/w2.err &
GROUPER_TRACE=1 $G worker --listen 127.0.0.1:50063 --backend auto --threads 4 > $O/w3.out 2> $O/w3.err &
sleep 2; cat $O/w1.out $O/w2.out $O/w3.out | tee -a $O/log.txt
W=http://127.0.0.1:50061,http://127.0.0.1:50062,http://127.0.0.1:50063
python3 - "$G" "$W" "$D" "$O" <<'PY'
import csv, io, subprocess, sys, re, json
G, W, D, O = sys.argv[1:]
src = open("crates/grouper-cli/src/bench/groupby.rs").read()
qs = [m.group(1) for m in re.finditer(r'\(\s*"(SELECT[^"]*)"', src)][:10]
q1 = open("crates/grouper-cli/src/bench/tpch/q01.sql").read()
def run(sql, dist):
    args = [G, "query", "--backend", "cpu", "--grouper-only", "--threads", "8", "--format", "csv",
            "--table", f"lineitem={D}/tpch/lineitem/", "--table", f"x={D}/x.parquet", sql]
    if dist: args[2:2] = ["--workers", W, "--bytes-per-task", "8M"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode: return None, p.stderr.strip()[-300:]
    rows = sorted(csv.reader(io.StringIO(p.stdout)))
    return rows, None
def same(a, b):
    if len(a) != len(b): return f"{len(a)} rows vs {len(b)}"
    for ra, rb in zip(a, b):
        for x, y in zip(ra, rb):
            if x == y: continue
            try:
                fx, fy = float(x), float(y)
                if abs(fx - fy) <= 1e-9 * max(abs(fx), abs(fy)) + 1e-6: continue
            except ValueError: pass
            return f"{ra} vs {rb}"
    return None
res = []
for sql in [q1] + qs:
    one, e1 = run(sql, False); many, e2 = run(sql, True)
    bad = e1 or e2 or same(one, many)
    res.append({"sql": sql[:80], "rows": len(one or []), "equal": bad is None, "why": bad})
    print(("OK  " if bad is None else "BAD ") + sql[:70], bad or "", flush=True)
json.dump(res, open(f"{O}/dist.json", "w"), indent=1)
p = subprocess.run([G, "query", "--backend", "cpu", "--grouper-only", "--workers", W, "--bytes-per-task", "8M",
    "--table", f"lineitem={D}/tpch/lineitem/", "--explain", q1], capture_output=True, text=True, timeout=300)
open(f"{O}/dist-explain-q1.txt", "w").write(p.stdout + p.stderr)
PY
sleep 1; kill -INT %1 %2 %3; sleep 2
grep -iE "gpu|route|hybrid|partial" $O/w1.err | head -20 | tee -a $O/log.txt

echo "== bench check --only gpu ($(date +%T))" | tee -a $O/log.txt
timeout -k 5 220 $G bench check --only gpu --out $O/check-gpu.json 2>&1 | tail -5 | tee -a $O/log.txt
