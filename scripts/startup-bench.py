#!/usr/bin/env python3
"""The fixed cost users see: one `grouper query` process per run, wall time, on a 1,000-row
Parquet file (written by `grouper gen synthetic`), under each backend. Usage:
startup-bench.py GROUPER OUT.json [RUNS]. Prints each run as it goes; the JSON has every run."""
import json, os, subprocess, sys, time

grouper, out = sys.argv[1], sys.argv[2]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
data = "/tmp/startup-tiny.parquet"
subprocess.run([grouper, "gen", "synthetic", "--rows", "1000", "--groups", "10", "-o", data],
               check=True, stdout=subprocess.DEVNULL)
sql = f"SELECT k, count(*) FROM '{data}' GROUP BY k"
result = {"what": "wall time of one grouper query process on a 1,000-row Parquet file",
          "sql": sql, "commit": os.environ.get("GROUPER_COMMIT", "unknown"), "runs": {}}
# `auto` twice: before any process started the GPU on this machine, and after `gpu` did (its
# device facts are then cached, so `auto` finds the device profile without starting the GPU).
for label, backend in [("cpu", "cpu"), ("datafusion", "datafusion"), ("auto", "auto"),
                       ("gpu", "gpu"), ("auto_after_gpu", "auto")]:
    times = []
    for r in range(runs):
        t = time.perf_counter()
        p = subprocess.run([grouper, "query", sql, "--backend", backend, "--timing"],
                           capture_output=True, text=True)
        ms = (time.perf_counter() - t) * 1e3
        times.append(round(ms, 1))
        last = p.stderr.strip().splitlines()[-1:] if p.stderr else []
        print(f"{label:14s} run {r}: {ms:8.1f} ms  rc={p.returncode} {last}", flush=True)
    result["runs"][label] = times
    result.setdefault("median_ms", {})[label] = sorted(times)[len(times) // 2]
json.dump(result, open(out, "w"), indent=1)
print(json.dumps(result["median_ms"]))
