#!/usr/bin/env python3
"""Checks grouper's TPC-H Q1 answer against DuckDB's on the same Parquet files.

Usage: q1_duckdb_check.py LINEITEM_DIR GROUPER_Q1_CSV
Sums and counts must be equal to the last decimal digit; averages (DECIMAL in DataFusion's and
grouper's plan, DOUBLE in DuckDB's) must agree within one unit of grouper's sixth decimal.
Prints one line per group and exits 1 on any difference."""
import csv
import sys
from decimal import Decimal

import duckdb

Q1 = """SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
  sum(l_extendedprice * (1 - l_discount)), sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)),
  avg(l_quantity), avg(l_extendedprice), avg(l_discount), count(*)
FROM read_parquet('{dir}/*.parquet')
WHERE l_shipdate <= date '1998-12-01' - interval '90' day
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus"""

lineitem, ours_csv = sys.argv[1], sys.argv[2]
theirs = duckdb.connect().execute(Q1.format(dir=lineitem)).fetchall()
with open(ours_csv) as f:
    ours = list(csv.reader(f))[1:]
ok = len(ours) == len(theirs)
for o, t in zip(ours, theirs):
    exact = [o[0] == t[0], o[1] == t[1], int(o[9]) == t[9]]
    exact += [Decimal(o[i]) == Decimal(t[i]) for i in range(2, 6)]
    close = [abs(Decimal(o[i]) - Decimal(repr(t[i]))) <= Decimal("0.000001") for i in range(6, 9)]
    row_ok = all(exact) and all(close)
    ok &= row_ok
    print(("same " if row_ok else "DIFF ") + " | ".join(o), "" if row_ok else f"  duckdb: {t}")
print(f"duckdb {duckdb.__version__}: {'identical' if ok else 'MISMATCH'} ({len(ours)} groups)")
sys.exit(0 if ok else 1)
