#!/usr/bin/env bash
# TPC-H Q1 from grouper vs DuckDB on the same Parquet files: sums to the last decimal digit.
# Usage: scripts/q1-vs-duckdb.sh [SF]   (needs .venv from scripts/setup-venv.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
sf="${1:-1}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cargo build --release -q
./target/release/grouper gen tpch --sf "$sf" -o "$dir"
q1="$(grep -A14 'pub const Q1' crates/grouper-cli/src/tpch.rs | tr -d '\\\n' | sed 's/.*= "//; s/";.*//' | tr -s ' ')"
./target/release/grouper query "$q1" --table "lineitem=$dir/lineitem/" --format csv --output "$dir/q1.csv"
.venv/bin/python bench/q1_duckdb_check.py "$dir/lineitem" "$dir/q1.csv"
