#!/usr/bin/env bash
# Builds everything the GPU machine runs and puts it in .device/ (git-ignored), which a device
# call carries: the test executables of grouper-core and grouper-gpu (small: the GPU tests live in
# grouper-gpu, the planner and strategies they build on in grouper-core), the grouper CLI
# compressed with xz (DataFusion makes it large), and the benchmark helper scripts.
# Usage: [TPCHGEN=path/to/tpchgen-cli] scripts/device-prepare.sh [--tests-only]
set -euo pipefail
cd "$(dirname "$0")/.."
# The kernel cache a device call brought back (scripts/device-cache.sh) outlives a rebuild: its
# CUBINs are keyed by their source, so a changed kernel compiles again and the rest are reused.
[ -f .device/cache.txz ] && mkdir -p target && mv .device/cache.txz target/device-cache.txz
rm -rf .device && mkdir -p .device/tests .device/bin
[ -f target/device-cache.txz ] && mv target/device-cache.txz .device/cache.txz
# One build of the whole workspace's tests, which also builds the grouper binary (the CLI's
# integration tests run it): building the tests of two crates, then the binary alone, asks
# arrow and DataFusion for other feature sets each time (dev-dependencies' features unify only
# with the crates built together) and compiled them twice more, ~20 minutes on 2 cores.
cargo test --release --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    # Named crate-target: every crate has an integration-test binary called `it`.
    crate = m["manifest_path"].rstrip("/").split("/")[-2]
    if crate in ("grouper-core", "grouper-gpu"):
        print(m["executable"], crate + "-" + m["target"]["name"])
' | while read -r exe name; do
  xz -T0 -6 -c "$exe" > ".device/tests/$name.xz"
done
if [ "${1:-}" != "--tests-only" ]; then
  # Stripped: a call carries at most 64 MiB, and `compare` carries two of these (26 MiB each
  # compressed with their symbols, 23 stripped) beside the tests and the tree.
  strip -o target/release/grouper.stripped target/release/grouper
  xz -T0 -6 -c target/release/grouper.stripped > .device/bin/grouper.xz
  rm target/release/grouper.stripped
  # tpchgen-cli (`cargo install tpchgen-cli`), for device-test.sh's files mode: TPCHGEN=path.
  if [ -n "${TPCHGEN:-}" ]; then xz -T0 -6 -c "$TPCHGEN" > .device/bin/tpchgen-cli.xz; fi
fi
git rev-parse --short HEAD > .device/COMMIT
rm -f .whl/duckdb-1.*.whl  # one DuckDB version travels
if [ ! -f .whl/duckdb-2.0.0-*.whl ]; then
  # DuckDB for the device's Python 3.12 (the Q1 peer); carried as .whl/ (git-ignored).
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 -d .whl duckdb==2.0.0 || true
fi
du -sh .device/* | sed 's/^/  /'
