"""What grouper's answers are checked with against DuckDB's, shared by the scripts that check
them (the Flight SQL clients, the Python package's tests): db-benchmark's group-by questions and
a comparison of two Arrow tables that allows for the order of rows and of float additions."""

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
# TPC-H Q1 as the benchmarks run it.
Q1 = (ROOT / "crates/grouper-cli/src/bench/tpch/q01.sql").read_text()

# Questions whose answers are compared; {t} is the table, {w} a filter ("TRUE" for none).
QUESTIONS = [
    "SELECT id1, sum(v1) AS v1 FROM {t} WHERE {w} GROUP BY id1",
    "SELECT id1, id2, sum(v1) AS v1 FROM {t} WHERE {w} GROUP BY id1, id2",
    "SELECT id3, sum(v1) AS v1, avg(v3) AS v3 FROM {t} WHERE {w} GROUP BY id3",
    "SELECT id4, avg(v1) AS v1, avg(v2) AS v2, avg(v3) AS v3 FROM {t} WHERE {w} GROUP BY id4",
    "SELECT id6, sum(v1) AS v1, sum(v2) AS v2, sum(v3) AS v3 FROM {t} WHERE {w} GROUP BY id6",
    "SELECT id3, max(v1) - min(v2) AS range_v1_v2 FROM {t} WHERE {w} GROUP BY id3",
    "SELECT id1, id2, id3, id4, id5, id6, sum(v3) AS v3, count(*) AS count FROM {t} WHERE {w} "
    "GROUP BY id1, id2, id3, id4, id5, id6",
    "SELECT id5, count(*) AS n, count(v1) AS n_v1, min(id1) AS lo, max(id3) AS hi FROM {t} "
    "WHERE {w} GROUP BY id5",
    "SELECT count(*) AS n, sum(v3) AS v3 FROM {t} WHERE {w}",
]


def columns(table):
    """A result's columns for comparison, its rows sorted by all of them (group keys first):
    numbers as float64 with how far each may be off (a decimal by its last digit, so that an
    average DataFusion rounds to 6 places matches DuckDB's double; a float by a relative 1e-9,
    for sums added in another order; integers not at all), strings of one type."""
    out = []
    for col in table.columns:
        t = col.type
        if pa.types.is_decimal(t):
            out.append((pc.cast(col, pa.float64()), 10.0 ** -t.scale if t.scale > 0 else 0.0))
        elif pa.types.is_floating(t):
            out.append((pc.cast(col, pa.float64()), 0.0))
        elif pa.types.is_integer(t):
            out.append((pc.cast(col, pa.float64()), 0.0))
        elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            out.append((pc.cast(col, pa.string()), None))
        else:
            out.append((col, None))
    names = [f"c{i}" for i in range(len(out))]
    sorted_ = pa.table([c for c, _ in out], names=names).sort_by([(n, "ascending") for n in names])
    return [(sorted_.column(i), tol) for i, (_, tol) in enumerate(out)]


def same_rows(got, want):
    """None when `got` (grouper's arrow table) holds DuckDB's rows, else what differs."""
    if got.num_rows != want.num_rows or got.num_columns != want.num_columns:
        return f"{got.num_rows}x{got.num_columns}, DuckDB {want.num_rows}x{want.num_columns}"
    for i, ((g, tol), (w, wtol)) in enumerate(zip(columns(got), columns(want))):
        if tol is None or wtol is None:
            if not g.equals(w):
                return f"column {i}: {g.to_pylist()[:5]}... where DuckDB has {w.to_pylist()[:5]}..."
            continue
        if not pc.is_null(g).equals(pc.is_null(w)):
            return f"column {i}: NULLs differ"
        bound = pc.add(max(tol, wtol), pc.multiply(1e-9, pc.max_element_wise(pc.abs(g), pc.abs(w))))
        off = pc.greater(pc.abs(pc.subtract(g, w)), bound)
        if pc.any(off).as_py():
            at = pc.index(off, True).as_py()
            return f"column {i}, row {at}: {g[at]} where DuckDB has {w[at]}"
    return None
