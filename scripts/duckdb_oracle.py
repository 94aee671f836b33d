#!/usr/bin/env python3
"""DuckDB as the differential oracle of `grouper difftest`.

Reads one JSON request a line on stdin: {"parquet": PATH, "sql": SQL}. Loads PATH as table t
and answers one JSON line on stdout: {"ok": true, "rows": [[value, ...], ...]} or
{"ok": false, "error": "one line"}. Values are tagged so that nothing is lost in JSON:
{"i": "123"} integer (HUGEINT included), {"d": "-1.50"} decimal, {"f": "1.5"} float
(repr, so nan and inf survive), {"s": ...} string, {"b": ...} boolean, {"t": days} date,
null for NULL. The first line out is {"version": ...}.
"""
import datetime
import decimal
import json
import sys

import duckdb

EPOCH = datetime.date(1970, 1, 1)


def enc(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return {"b": v}
    if isinstance(v, int):
        return {"i": str(v)}
    if isinstance(v, decimal.Decimal):
        return {"d": format(v, "f")}
    if isinstance(v, float):
        return {"f": repr(v)}
    if isinstance(v, str):
        return {"s": v}
    if isinstance(v, datetime.datetime):
        return {"s": v.isoformat()}
    if isinstance(v, datetime.date):
        return {"t": (v - EPOCH).days}
    return {"s": repr(v)}


def main():
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    print(json.dumps({"version": duckdb.__version__}), flush=True)
    loaded = None
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["parquet"] != loaded:
                path = req["parquet"].replace("'", "''")
                con.execute(f"CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet('{path}')")
                loaded = req["parquet"]
            rows = con.execute(req["sql"]).fetchall()
            out = {"ok": True, "rows": [[enc(v) for v in r] for r in rows]}
        except Exception as e:  # every DuckDB error is an answer, not a crash
            text = f"{type(e).__name__}: {e}".strip().splitlines()
            out = {"ok": False, "error": text[0] if text else type(e).__name__}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
