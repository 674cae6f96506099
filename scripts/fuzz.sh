#!/usr/bin/env bash
# Fuzz the SSE decoder and the streaming-response path (decoder + chunk parser +
# timeline + metrics) for a bounded time each: no panic, no growth past the event
# cap, splitting never changes the events. Usage: scripts/fuzz.sh [SECONDS per target]
# cargo-fuzz needs nightly features; RUSTC_BOOTSTRAP=1 enables them on stable.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
if ! command -v cargo-fuzz >/dev/null; then
  echo "[fuzz] installing cargo-fuzz (a few minutes)"
  cargo install cargo-fuzz --quiet
fi
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$PWD/target/fuzz}
cd fuzz
for t in sse_decoder stream_timeline; do
  echo "== fuzz $t for ${seconds}s"
  cargo fuzz run "$t" -- -max_total_time="$seconds" -rss_limit_mb=1024 2>&1 | grep -E "^(Done|==|INFO: Running|SUMMARY|.*ERROR)" || true
  if ls artifacts/"$t"/crash-* artifacts/"$t"/oom-* artifacts/"$t"/leak-* >/dev/null 2>&1; then
    echo "fuzz $t found a failing input: see fuzz/artifacts/$t/"
    exit 1
  fi
done
