#!/usr/bin/env bash
# Runs the cargo-fuzz targets for a bounded time each (nightly toolchain; cargo-fuzz is
# installed when missing). Crashes land in fuzz/artifacts/<target>/; turn each into a test
# (crates/grouper-cli/tests/it/faults.rs, crates/grouper-core/tests/it/strategies.rs) before fixing it.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, operator and cli)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(operator cli)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
cargo build --release --bin grouper
export GROUPER_BIN=$PWD/target/release/grouper
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  echo "== fuzz $t for ${secs}s"
  (cd fuzz && cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096) 2>&1 \
    | grep -E "^(#[0-9]+.*(DONE|pulse|NEW)|Done|==|.*ERROR|.*panicked|SUMMARY|artifact)" | tail -25
done
