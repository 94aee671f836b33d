#!/usr/bin/env bash
# Creates .venv (or completes one made before) with the Python peers and clients the benchmarks
# and tests use: DuckDB and Polars (peers); pyarrow and ADBC's Flight SQL driver (the client the
# `grouper serve` test drives); datafusion 55 and maturin (the Python package, built into the venv
# by its test).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q "duckdb==2.*" "polars==1.*" "pyarrow>=16" "adbc-driver-flightsql==1.*" "adbc-driver-manager==1.*" \
  "datafusion==55.*" "maturin>=1.6,<2"
.venv/bin/python -c "import duckdb, polars, pyarrow, adbc_driver_flightsql, datafusion; print('duckdb', duckdb.__version__, 'polars', polars.__version__, 'pyarrow', pyarrow.__version__, 'adbc-driver-flightsql', adbc_driver_flightsql.__version__, 'datafusion', datafusion.__version__)"
