#!/usr/bin/env python3
"""Times TPC-H Q1 through `grouper serve` as a client sees it (ADBC, wall time from execute to
the last batch): over the registered file table, then over an in-memory copy made with SQL,
first run and warm runs. Prints one JSON object.

    .venv/bin/python scripts/flight_q1.py --uri grpc://127.0.0.1:50051 [--runs 6]
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight_sql

Q1 = (Path(__file__).resolve().parent.parent / "crates/grouper-cli/src/bench/tpch/q01.sql").read_text()


def timed(cur, sql):
    start = time.perf_counter()
    cur.execute(sql)
    table = cur.fetch_arrow_table()
    return time.perf_counter() - start, table.num_rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--uri", required=True)
    p.add_argument("--runs", type=int, default=6)
    args = p.parse_args()
    out = {}
    with flight_sql.connect(args.uri, autocommit=True) as conn, conn.cursor() as cur:
        files = [timed(cur, Q1) for _ in range(args.runs)]
        out["files_ms"] = [round(t * 1000, 1) for t, _ in files]
        copy, _ = timed(cur, "CREATE OR REPLACE TABLE lineitem_mem AS SELECT * FROM lineitem")
        out["create_table_ms"] = round(copy * 1000, 1)
        mem = [timed(cur, Q1.replace("FROM lineitem", "FROM lineitem_mem")) for _ in range(args.runs)]
        out["memory_ms"] = [round(t * 1000, 1) for t, _ in mem]
        out["memory_warm_median_ms"] = round(statistics.median(t for t, _ in mem[1:]) * 1000, 1)
        out["rows"] = mem[-1][1]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
