#!/usr/bin/env python3
"""Aggregations larger than their memory budget (issue 24's spill targets), one fresh process per
engine and run: `grouper query --backend cpu`, DataFusion alone (`--backend datafusion`) and
DuckDB, each under the same memory limit and threads, over the same Parquet file. Records wall
time and peak RSS (the child's ru_maxrss), and checks each answer against DuckDB's. The queries
wrap the big GROUP BY in a summary (groups, rows, exact integer sums, a float sum compared to
1e-9), so every engine aggregates every group while the output stays one row.

Shapes:
  q10   the db-benchmark's question 10 on its G1 table (`grouper gen groupby`): six keys, ~N groups
  u     `grouper gen synthetic --groups N`: one Int64 key uniform over N values (N rows: 0.632 N keys)

Exit 124 is a run stopped by --timeout.

Usage: scripts/spill-bench.py --grouper PATH --shape q10 --rows 1e8 --limit 2G --threads 16
       --data DIR --runs 1 --out results.json [--python python3]
The JSON is rewritten after every run, so a call cut short keeps what finished.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

SHAPES = {
    "q10": (
        "SELECT count(*) AS groups, sum(cnt) AS rows, sum(v3) AS v3, "
        "sum(id4 + id5 + id6) AS ids, min(id3) AS lo, max(id3) AS hi FROM ("
        "SELECT id1, id2, id3, id4, id5, id6, sum(v3) AS v3, count(*) AS cnt "
        "FROM {table} GROUP BY id1, id2, id3, id4, id5, id6)"
    ),
    "u": (
        "SELECT count(*) AS groups, sum(c) AS rows, sum(s) AS v, sum(k) AS keys FROM ("
        "SELECT k, count(*) AS c, sum(v) AS s FROM {table} GROUP BY k)"
    ),
}

DUCKDB = r"""
import sys, duckdb
sql, limit, threads, tmp = sys.argv[1:5]
con = duckdb.connect()
con.execute(f"SET memory_limit='{limit}'")
con.execute(f"SET threads={threads}")
con.execute(f"SET temp_directory='{tmp}'")
con.execute("SET preserve_insertion_order=false")
# Its progress bar (a query past two seconds) would otherwise share the answer's line.
con.execute("SET enable_progress_bar=false")
row = con.execute(sql).fetchone()
print(",".join("" if v is None else str(v) for v in row))
"""


def size_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    s = s.strip().upper().rstrip("B")
    return int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s)


def timed(cmd):
    start = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return seconds, p


def answer_rows(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1].split(",") if lines else []


def same(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if abs(fx - fy) > 1e-9 * max(1.0, abs(fx), abs(fy)):
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grouper", required=True)
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--rows", default="2e7")
    ap.add_argument("--limit", default="128M")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--data", default="/tmp/spill-data")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--engines", default="grouper,datafusion,duckdb")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=int, default=0, help="seconds per run (0: none)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = int(float(a.rows))
    os.makedirs(a.data, exist_ok=True)
    path = os.path.join(a.data, f"{a.shape}-{a.rows}.parquet")
    if not os.path.exists(path):
        gen = (
            ["gen", "groupby", "--rows", str(rows)]
            if a.shape == "q10"
            else ["gen", "synthetic", "--rows", str(rows), "--groups", str(rows)]
        )
        s, p = timed([a.grouper, *gen, "-o", path + ".tmp"])
        print(f"generated {path} in {s:.1f} s: {p.stderr.strip()[-200:]}", flush=True)
        if p.returncode != 0:
            sys.exit(f"gen failed: {p.stderr}")
        os.rename(path + ".tmp", path)
    result = {
        "benchmark": "spill",
        "shape": a.shape,
        "rows": rows,
        "memory_limit": a.limit,
        "memory_limit_bytes": size_bytes(a.limit),
        "threads": a.threads,
        "file": path,
        "file_bytes": os.path.getsize(path),
        "commit": os.environ.get("GROUPER_COMMIT", "unknown"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "command": " ".join(sys.argv),
        "sql": SHAPES[a.shape].format(table="t"),
        "runs": [],
    }
    tmp = os.path.join(a.data, "duckdb-tmp")
    os.makedirs(tmp, exist_ok=True)
    answers = {}
    for r in range(a.runs):
        for engine in a.engines.split(","):
            if engine == "duckdb":
                sql = SHAPES[a.shape].format(table=f"read_parquet('{path}')")
                limit = a.limit.upper()
                limit = limit[:-1] + {"K": "KiB", "M": "MiB", "G": "GiB"}.get(limit[-1], limit[-1])
                cmd = [a.python, "-c", DUCKDB, sql, limit, str(a.threads), tmp]
            else:
                backend = "cpu" if engine == "grouper" else "datafusion"
                cmd = [a.grouper, "query", "--table", f"t={path}", "--backend", backend,
                       "--memory-limit", a.limit, "--threads", str(a.threads), "--format", "csv",
                       SHAPES[a.shape].format(table="t")]
            if a.timeout:
                cmd = ["timeout", "-k", "5", str(a.timeout), *cmd]
            # ru_maxrss of a child: run each in its own python wrapper so maxima do not mix.
            wrapper = [a.python, "-c",
                       "import os,resource,subprocess,sys,time;t=time.perf_counter();"
                       "p=subprocess.run(sys.argv[1:],capture_output=True,text=True);"
                       "s=time.perf_counter()-t;"
                       "m=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024;"
                       "sys.stdout.write(f'{s} {m} {p.returncode}\\n'+p.stdout);"
                       "sys.stderr.write(p.stderr)", *cmd]
            p = subprocess.run(wrapper, capture_output=True, text=True)
            head, _, body = p.stdout.partition("\n")
            seconds, rss, code = head.split()
            rec = {
                "run": r,
                "engine": engine,
                "seconds": round(float(seconds), 3),
                "peak_rss_bytes": int(rss),
                "peak_rss_over_limit_bytes": int(rss) - size_bytes(a.limit),
                "exit": int(code),
                "answer": answer_rows(body),
                "error": p.stderr.strip()[-400:] if int(code) != 0 else None,
            }
            answers.setdefault(engine, rec["answer"])
            result["runs"].append(rec)
            print(f"{engine:10} run {r}: {rec['seconds']:8.2f} s  peak RSS "
                  f"{int(rss) / (1 << 20):8.0f} MiB  exit {code}  {rec['answer']}"
                  + (f"  {rec['error']}" if rec["error"] else ""), flush=True)
            want = answers.get("duckdb")
            result["equal_to_duckdb"] = {
                e: (same(v, want) if want else None) for e, v in answers.items() if e != "duckdb"
            }
            with open(a.out + ".tmp", "w") as f:
                json.dump(result, f, indent=1)
            os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
