#!/usr/bin/env python3
"""Times one query in DuckDB on data loaded into an in-memory table (the peer in grouper's
benchmarks). Usage: duckdb_runner.py PARQUET TABLE THREADS REPS SQL...
PARQUET may be a glob. Prints JSON: {"version": ..., "results": [{"median_ms", "runs_ms",
"rows"}]} with each query's result rows as strings. Loading is not timed."""
import json
import sys
import time

import duckdb

path, table, threads, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
queries = sys.argv[5:]
con = duckdb.connect()
con.execute(f"SET threads TO {threads}")
con.execute(f"CREATE TABLE {table} AS SELECT * FROM read_parquet('{path}')")
out = []
for sql in queries:
    con.execute(sql).fetchall()  # warm-up
    runs = []
    rows = []
    for _ in range(reps):
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        runs.append((time.perf_counter() - t) * 1e3)
    runs.sort()
    out.append({"median_ms": runs[len(runs) // 2], "runs_ms": runs,
                "rows": [[str(v) for v in r] for r in rows]})
print(json.dumps({"version": duckdb.__version__, "results": out}))
