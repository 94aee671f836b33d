"""The Python package `grouper` as its users drive it, every answer checked against DuckDB's.

Needs the package installed in the running Python (maturin develop) with datafusion 55, DuckDB
and pyarrow, and $GROUPER_TEST_DATA: a folder holding `lineitem/` (TPC-H Parquet) and
`x.parquet` (db-benchmark's group-by table with NULLs, from `grouper gen groupby --nas`). Run by
crates/grouper-cli/tests/it/python.rs; by hand:

    grouper gen tpch --sf 0.05 -o /tmp/d && grouper gen groupby --rows 1e5 --nas 5 -o /tmp/d/x.parquet
    GROUPER_TEST_DATA=/tmp/d .venv/bin/python crates/grouper-python/tests/test_grouper.py -v
"""

import os
import sys
import unittest
from pathlib import Path

import datafusion
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from datafusion import udf

import grouper

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from answers import Q1, QUESTIONS, same_rows  # noqa: E402

DATA = Path(os.environ["GROUPER_TEST_DATA"])
LINEITEM = DATA / "lineitem"
X = DATA / "x.parquet"
FILTERS = ["TRUE", "id4 > 40 AND v3 < 60"]


def duck():
    db = duckdb.connect()
    db.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet('{LINEITEM}/*.parquet')")
    db.execute(f"CREATE VIEW x AS SELECT * FROM read_parquet('{X}')")
    db.execute("CREATE VIEW xm AS SELECT * FROM x")
    return db


class Answers(unittest.TestCase):
    """TPC-H Q1 and the group-by questions through `grouper.install`, by backend and by where
    the table lives (Parquet files, or Arrow data in memory passed by handle)."""

    @classmethod
    def setUpClass(cls):
        cls.db = duck()
        cls.x = pq.read_table(X)

    def context(self, backend):
        ctx = datafusion.SessionContext(datafusion.SessionConfig().with_target_partitions(2))
        grouper.install(ctx, backend)
        ctx.register_parquet("lineitem", str(LINEITEM))
        ctx.register_parquet("x", str(X))
        ctx.from_arrow(self.x, name="xm")
        return ctx

    def check(self, ctx, sql):
        got = ctx.sql(sql).to_arrow_table()
        wrong = same_rows(got, self.db.sql(sql).to_arrow_table())
        self.assertIsNone(wrong, f"{sql}: {wrong}")

    def test_q1(self):
        for backend in ["auto", "cpu", "datafusion"]:
            with self.subTest(backend=backend):
                self.check(self.context(backend), Q1)

    def test_group_by_questions(self):
        for backend in ["auto", "cpu"]:
            ctx = self.context(backend)
            for table in ["x", "xm"]:
                for w in FILTERS:
                    for q in QUESTIONS:
                        sql = q.format(t=table, w=w)
                        with self.subTest(backend=backend, sql=sql):
                            self.check(ctx, sql)

    def test_a_table_made_in_the_session(self):
        ctx = self.context("cpu")
        ctx.sql("CREATE TABLE made AS SELECT * FROM x WHERE id6 % 3 = 0").collect()
        sql = "SELECT id1, id4, sum(v1) AS v1, count(*) AS n FROM {t} GROUP BY id1, id4"
        got = ctx.sql(sql.format(t="made")).to_arrow_table()
        want = self.db.sql(sql.format(t="(SELECT * FROM x WHERE id6 % 3 = 0)")).to_arrow_table()
        self.assertIsNone(same_rows(got, want))


class Plans(unittest.TestCase):
    def explain(self, backend, sql="SELECT id1, sum(v1) FROM x GROUP BY id1"):
        ctx = datafusion.SessionContext()
        grouper.install(ctx, backend)
        ctx.register_parquet("x", str(X))
        ctx.from_arrow(pq.read_table(X), name="xm")
        ctx.register_parquet("lineitem", str(LINEITEM))
        rows = ctx.sql(f"EXPLAIN {sql}").to_arrow_table()
        plans = dict(zip(rows.column("plan_type").to_pylist(), rows.column("plan").to_pylist()))
        return plans["physical_plan"]

    def test_explain_shows_grouper_operator(self):
        for table in ["x", "xm"]:
            with self.subTest(table=table):
                self.assertIn(
                    "GroupByExec", self.explain("cpu", f"SELECT id1, sum(v1) FROM {table} GROUP BY id1")
                )
        self.assertIn("GroupByExec", self.explain("cpu", Q1))
        # `auto` leaves aggregations of few rows to DataFusion (do no harm), as the CLI does.
        self.assertIn("AggregateExec", self.explain("auto", Q1))

    def test_datafusion_backend_keeps_datafusions_aggregate(self):
        plan = self.explain("datafusion")
        self.assertNotIn("GroupByExec", plan)
        self.assertIn("AggregateExec", plan)

    def test_installing_again_changes_the_backend(self):
        ctx = datafusion.SessionContext()
        grouper.install(ctx, "datafusion")
        grouper.install(ctx, "cpu")
        ctx.register_parquet("x", str(X))
        rows = ctx.sql("EXPLAIN SELECT id1, sum(v1) FROM x GROUP BY id1").to_arrow_table()
        self.assertIn("GroupByExec", "\n".join(rows.column("plan").to_pylist()))
        self.assertIsNone(
            same_rows(
                ctx.sql("SELECT id1, sum(v1) FROM x GROUP BY id1").to_arrow_table(),
                duck().sql("SELECT id1, sum(v1) FROM x GROUP BY id1").to_arrow_table(),
            )
        )


class Sql(unittest.TestCase):
    def test_sql_takes_arrow_tables_and_parquet_paths(self):
        db = duck()
        x = pq.read_table(X)
        batch = x.to_batches()[0]
        one_batch = duckdb.connect()
        one_batch.register("x", pa.Table.from_batches([batch]))
        for q in QUESTIONS[:4]:
            sql = q.format(t="x", w="TRUE")
            for kind, table, ref in [("arrow", x, db), ("path", str(X), db), ("batch", batch, one_batch)]:
                with self.subTest(sql=sql, kind=kind):
                    got = grouper.sql(sql, tables={"x": table}, backend="cpu", threads=2)
                    self.assertIsNone(same_rows(got, ref.sql(sql).to_arrow_table()))

    def test_q1_through_sql(self):
        got = grouper.sql(Q1, tables={"lineitem": str(LINEITEM)})
        self.assertIsNone(same_rows(got, duck().sql(Q1).to_arrow_table()))


class Udfs(unittest.TestCase):
    def test_a_python_udf_still_runs_under_grouper(self):
        bucket = udf(
            lambda a: pa.compute.divide(a, 10), [pa.int64()], pa.int64(), "immutable", name="bucket"
        )
        ctx = datafusion.SessionContext()
        grouper.install(ctx, "cpu")
        ctx.register_udf(bucket)
        ctx.from_arrow(pa.table({"k": list(range(100)), "v": [1.0] * 100}), name="t")
        got = ctx.sql("SELECT bucket(k) AS b, sum(v) AS s FROM t GROUP BY bucket(k) ORDER BY b")
        self.assertEqual(got.to_arrow_table().to_pydict(), {"b": list(range(10)), "s": [10.0] * 10})


class Errors(unittest.TestCase):
    def test_unknown_backend(self):
        with self.assertRaisesRegex(ValueError, "unknown backend 'gpus'"):
            grouper.install(datafusion.SessionContext(), "gpus")

    def test_gpu_backend_without_a_gpu_says_so(self):
        if "no GPU" not in grouper.device():
            self.skipTest("this machine has a GPU")
        with self.assertRaisesRegex(ValueError, "--backend gpu"):
            grouper.install(datafusion.SessionContext(), "gpu")

    def test_wrong_statements_fail_with_their_fault(self):
        ctx = datafusion.SessionContext()
        grouper.install(ctx, "auto")
        ctx.register_parquet("x", str(X))
        for sql, fault in [
            ("SELECT id1, sum(v1) FROM no_such_table GROUP BY id1", "no_such_table"),
            ("SELECT id1, sum(v1) / 0 FROM x GROUP BY id1", "Divide by zero"),
            ("SELECT id1, sum(id2) FROM x GROUP BY id1", "sum"),
        ]:
            with self.subTest(sql=sql):
                with self.assertRaisesRegex(Exception, fault):
                    ctx.sql(sql).collect()


if __name__ == "__main__":
    unittest.main()
