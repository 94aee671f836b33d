#!/usr/bin/env python3
"""DuckDB over Parquet files, the peer of `grouper bench files`.

Usage: duckdb_files.py DIR THREADS RUNS OUT_DIR NAME=SQL_FILE...

Each table of DIR (`<table>.parquet`, as tpchgen-cli writes, or `<table>/*.parquet`) becomes a
view over read_parquet, so every run reads the files (from the OS page cache), as grouper's
fresh processes do. Each query runs RUNS times in this one process; the time is the query's
wall time inside DuckDB (DuckDB's process start and import are not counted: the comparison
favours DuckDB). Its rows of the last run go to OUT_DIR/NAME.csv (NULL as an empty field,
dates ISO). One JSON line per query on stdout as it finishes, then {"version": ...}.
"""
import csv
import json
import os
import sys
import time

import duckdb


def tables(folder):
    out = {}
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        if entry.endswith(".parquet") and os.path.isfile(path):
            out[entry[: -len(".parquet")]] = path
        elif os.path.isdir(path):
            out[entry] = os.path.join(path, "*.parquet")
    return out


def cell(v):
    if v is None:
        return ""
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def main():
    folder, threads, runs, out_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.makedirs(out_dir, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"SET threads TO {threads}")
    for name, path in tables(folder).items():
        quoted = path.replace("'", "''")
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{quoted}')")
    for arg in sys.argv[5:]:
        name, sql_file = arg.split("=", 1)
        with open(sql_file) as f:
            sql = f.read()
        times, rows, error = [], [], None
        try:
            for _ in range(max(runs, 1)):
                t = time.perf_counter()
                rows = con.execute(sql).fetchall()
                times.append((time.perf_counter() - t) * 1e3)
        except Exception as e:  # an error is a result of the run, not a crash of it
            error = f"{type(e).__name__}: {e}".strip().splitlines()[0]
        with open(os.path.join(out_dir, f"{name}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            for r in rows:
                w.writerow([cell(v) for v in r])
        print(json.dumps({"name": name, "runs_ms": times, "rows": len(rows), "error": error}),
              flush=True)
    print(json.dumps({"version": duckdb.__version__}), flush=True)


if __name__ == "__main__":
    main()
