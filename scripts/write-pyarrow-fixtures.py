#!/usr/bin/env python3
"""Writes the Parquet files pyarrow makes, for the page-decoding tests
(crates/grouper-gpu/tests/it/data/pyarrow/). They are committed, so the tests and the GPU machine
need no pyarrow; to remake them: .venv/bin/pip install "pyarrow==25.*", then run this.

Each file: 9,000 rows in row groups of 3,000, data pages of ~4 KB (several a column chunk),
NULLs in k, s and f, a string key, decimals, dates, doubles and floats; one writer setting each:
dictionary on (SNAPPY), off (ZSTD), BYTE_STREAM_SPLIT (uncompressed, data pages v2), and
DELTA_BINARY_PACKED for the integer columns (SNAPPY)."""
import datetime
import decimal
import pathlib
import sys

import pyarrow as pa
import pyarrow.parquet as pq

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                   pathlib.Path(__file__).resolve().parent.parent /
                   "crates/grouper-gpu/tests/it/data/pyarrow")
out.mkdir(parents=True, exist_ok=True)
n = 9000
words = ["A", "N", "R", "a longer value"]
table = pa.table({
    "i": pa.array([i * 7919 - 20000 for i in range(n)], pa.int64()),
    "k": pa.array([None if i % 7 == 0 else (i % 1000) - 500 for i in range(n)], pa.int32()),
    "d": pa.array([decimal.Decimal((i * 37) % 100000) / 100 for i in range(n)], pa.decimal128(15, 2)),
    "s": pa.array([None if i % 11 == 0 else words[i % 4] for i in range(n)], pa.string()),
    "dt": pa.array([datetime.date(1994, 1, 1) + datetime.timedelta(days=i % 2500) for i in range(n)], pa.date32()),
    "f": pa.array([None if i % 3 == 0 else i / 7.0 for i in range(n)], pa.float64()),
    "g": pa.array([i / 3.0 for i in range(n)], pa.float32()),
})
common = dict(row_group_size=3000, data_page_size=4096, write_statistics=True)
variants = {
    "dictionary_snappy": dict(use_dictionary=True, compression="snappy"),
    "plain_zstd": dict(use_dictionary=False, compression="zstd"),
    "byte_stream_split_v2": dict(use_dictionary=False, compression="none",
                                 use_byte_stream_split=["f", "g"], data_page_version="2.0"),
    "delta_snappy": dict(use_dictionary=["s"], compression="snappy",
                         column_encoding={"i": "DELTA_BINARY_PACKED", "k": "DELTA_BINARY_PACKED"}),
}
for name, opts in variants.items():
    path = out / f"{name}.parquet"
    pq.write_table(table, path, **common, **opts)
    print(f"wrote {path} ({path.stat().st_size} bytes)")
print("pyarrow", pa.__version__)
