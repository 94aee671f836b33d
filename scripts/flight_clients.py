#!/usr/bin/env python3
"""Many Flight SQL clients at once against `grouper serve`, every answer checked against DuckDB's.

Each client is a thread with its own ADBC connection (adbc-driver-flightsql, pyarrow) that runs
`--queries` statements drawn at random: TPC-H Q1 over the registered `lineitem` table and over a
copy made with SQL, db-benchmark group-by questions (string and integer keys, NULLs, one to six
keys) over the registered `x`, questions over a table the client creates itself, and wrong
statements, which must fail with an error that names the fault. DuckDB answers the same SQL over
the same files. Then one query is cancelled with ADBC's `adbc_cancel` while it runs: the client must
get CANCELLED and the server (given `--server-pid`) go idle. The server must still answer then.

Prints a line per client as it ends and a JSON summary last; exits 1 on any wrong answer.
Run by crates/grouper-cli/tests/it/serve.rs; by hand:

    grouper serve --table lineitem=DIR/lineitem --table x=G1.parquet &
    .venv/bin/python scripts/flight_clients.py --uri grpc://127.0.0.1:50051 \
        --lineitem 'DIR/lineitem/*.parquet' --x G1.parquet
"""

import argparse
import concurrent.futures
import json
import random
import sys
import threading
import time
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import duckdb

from answers import Q1, QUESTIONS, same_rows


# Wrong statements and a piece of the error each must bring back.
WRONG = [
    ("SELEC id1 FROM x", "SELEC"),
    ("SELECT id1, sum(v1) FROM no_such_table GROUP BY id1", "no_such_table"),
    ("SELECT no_such_column, count(*) FROM x GROUP BY no_such_column", "no_such_column"),
    ("SELECT id1, sum(v1) / 0 FROM x GROUP BY id1", "Divide by zero"),
    ("SELECT id1, sum(id2) FROM x GROUP BY id1", "sum"),
]


class Reference:
    """DuckDB's answers, each computed once (DuckDB connections are not shared across threads)."""

    def __init__(self, lineitem, x):
        self.db = duckdb.connect()
        self.db.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet('{lineitem}')")
        self.db.execute(f"CREATE VIEW x AS SELECT * FROM read_parquet('{x}')")
        self.lock = threading.Lock()
        self.answers = {}

    def answer(self, sql):
        with self.lock:
            if sql not in self.answers:
                self.answers[sql] = self.db.execute(sql).to_arrow_table()
            return self.answers[sql]


def connect(uri, token):
    kwargs = {}
    if token:
        kwargs[adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {token}"
    return flight_sql.connect(uri, db_kwargs=kwargs, autocommit=True)


def client(i, args, ref):
    """One client's run: (right answers, errors as expected, faults)."""
    rng = random.Random(args.seed * 1000 + i)
    right, refused, faults = 0, 0, []
    with connect(args.uri, args.token) as conn, conn.cursor() as cur:
        # A table of the client's own, made with SQL and kept by the server.
        mine, where = f"client_{i}", f"id4 = {i % 10 + 1}"
        cur.execute(f"CREATE OR REPLACE TABLE {mine} AS SELECT * FROM x WHERE {where}")
        cur.fetchall()
        for _ in range(args.queries):
            pick = rng.random()
            if pick < 0.15:
                sql, says = rng.choice(WRONG)
                try:
                    cur.execute(sql)
                    cur.fetchall()
                    faults.append(f"no error for {sql!r}")
                except flight_sql.Error as e:
                    if says.lower() in str(e).lower():
                        refused += 1
                    else:
                        faults.append(f"{sql!r} failed without naming {says!r}: {e}")
                continue
            if pick < 0.35:
                table = rng.choice(["lineitem", "lineitem_mem"])
                sql, ref_sql = Q1.replace("FROM lineitem", f"FROM {table}"), Q1
            else:
                q = rng.choice(QUESTIONS)
                table = rng.choice(["x", "x_mem", mine])
                w = rng.choice(["TRUE", "v3 > 40", "id6 % 3 = 0"])
                mine_where = where if table == mine else "TRUE"
                sql = q.format(t=table, w=w)
                ref_sql = q.format(t="x", w=f"({w}) AND ({mine_where})")
            try:
                cur.execute(sql)
                got = cur.fetch_arrow_table()
            except flight_sql.Error as e:
                faults.append(f"{sql!r}: {e}")
                continue
            wrong = same_rows(got, ref.answer(ref_sql))
            if wrong:
                faults.append(f"{sql!r}: {wrong}")
            else:
                right += 1
        cur.execute(f"DROP TABLE {mine}")
        cur.fetchall()
    print(f"client {i}: {right} right, {refused} refused as expected, {len(faults)} wrong", flush=True)
    return right, refused, faults


# A query that runs for minutes unless it is cancelled.
ENDLESS = ("SELECT k, count(*) FROM (SELECT value % 1000 AS k FROM generate_series(1, 10000000000)) "
           "GROUP BY k")


def cpu_seconds(pid):
    """CPU time the process `pid` has used (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def cancelled(args):
    """ADBC's cancel of a running query: the client gets CANCELLED, and the server (when its
    process id is given) goes idle. None when both hold, else what did not."""
    outcome = {}
    with connect(args.uri, args.token) as conn:
        cur = conn.cursor()

        def run():
            try:
                cur.execute(ENDLESS)
                cur.fetchall()
                outcome["error"] = None
            except flight_sql.Error as e:
                outcome["error"] = str(e)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(1.0)
        cur.adbc_cancel()
        t.join(10)
        cur.close()
    if t.is_alive() or not outcome.get("error") or "CANCELLED" not in outcome["error"]:
        return f"the cancelled query ended with {outcome}"
    if args.server_pid:
        time.sleep(0.5)
        before = cpu_seconds(args.server_pid)
        time.sleep(1.5)
        used = cpu_seconds(args.server_pid) - before
        if used > 0.3:
            return f"the server used {used:.2f} s of CPU in 1.5 s after the cancel"
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--uri", required=True)
    p.add_argument("--token")
    p.add_argument("--lineitem", required=True, help="the files of the server's lineitem table")
    p.add_argument("--x", required=True, help="the file of the server's x table (db-benchmark G1)")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--server-pid", type=int, help="check that the server goes idle after a cancel")
    args = p.parse_args()

    ref = Reference(args.lineitem, args.x)
    start = time.monotonic()
    with connect(args.uri, args.token) as conn, conn.cursor() as cur:
        for sql in ["CREATE OR REPLACE TABLE lineitem_mem AS SELECT * FROM lineitem",
                    "CREATE OR REPLACE TABLE x_mem AS SELECT * FROM x"]:
            cur.execute(sql)
            cur.fetchall()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.clients) as pool:
        runs = list(pool.map(lambda i: client(i, args, ref), range(args.clients)))
    cancel_fault = cancelled(args)
    # The server still answers, and the clients' tables are gone.
    with connect(args.uri, args.token) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM x")
        alive = same_rows(cur.fetch_arrow_table(), ref.answer("SELECT count(*) FROM x")) is None
        objects = conn.adbc_get_objects(depth="tables", table_name_filter="client_%").read_all()
        leftover = [t for c in objects.to_pylist() for s in c["catalog_db_schemas"] or []
                    for t in s["db_schema_tables"] or []]
        cur.execute("DROP TABLE lineitem_mem")
        cur.execute("DROP TABLE x_mem")
    faults = [f for r in runs for f in r[2]] + ([cancel_fault] if cancel_fault else [])
    summary = {
        "clients": args.clients,
        "statements": args.clients * args.queries,
        "right": sum(r[0] for r in runs),
        "refused_as_expected": sum(r[1] for r in runs),
        "wrong": len(faults),
        "cancel": cancel_fault or ("CANCELLED, server idle" if args.server_pid else "CANCELLED"),
        "server_answers_after": alive,
        "tables_left": len(leftover),
        "seconds": round(time.monotonic() - start, 2),
    }
    for f in faults[:20]:
        print("WRONG:", f, file=sys.stderr)
    print(json.dumps(summary), flush=True)
    ok = not faults and alive and not leftover and summary["right"] + summary["refused_as_expected"] == summary["statements"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
