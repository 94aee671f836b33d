#!/usr/bin/env bash
# Creates .venv with the Python peers used by the benchmarks (DuckDB; Polars for later sweeps).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q "duckdb==2.*" "polars==1.*"
.venv/bin/python -c "import duckdb, polars; print('duckdb', duckdb.__version__, 'polars', polars.__version__)"
