#!/usr/bin/env bash
# Fuzz the SSE decoder, the streaming-response path (decoder + chunk parser +
# timeline + metrics) and the /metrics parser for a bounded time each: no panic,
# no growth past the event cap, splitting never changes the events, every line
# of a scrape read or skipped once, the GGUF header reader (no panic; a
# prefix reads the same header or asks for more) and the real-user intake (no
# panic; every turn kept validates and round-trips). Usage: scripts/fuzz.sh [SECONDS per target]
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
for t in sse_decoder stream_timeline prometheus_text gguf_header rum_batch; do
  log=$(mktemp)
  # Inputs that once failed (fuzz/regressions/<target>/) run first, every time.
  if [ -d "regressions/$t" ]; then
    echo "== fuzz $t: $(ls "regressions/$t" | wc -l) past failing input(s)"
    if ! cargo fuzz run "$t" "regressions/$t"/* >"$log" 2>&1; then
      tail -40 "$log"
      echo "fuzz $t failed on a past failing input in fuzz/regressions/$t/"
      exit 1
    fi
  fi
  # Seed inputs (fuzz/seeds/<target>/, valid examples the fuzzer mutates from).
  dirs=()
  if [ -d "seeds/$t" ]; then
    mkdir -p "corpus/$t"
    dirs=("corpus/$t" "seeds/$t")
  fi
  echo "== fuzz $t for ${seconds}s"
  if ! cargo fuzz run "$t" ${dirs[@]+"${dirs[@]}"} -- -max_total_time="$seconds" -rss_limit_mb=1024 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz $t failed (a failing input, if found, is in fuzz/artifacts/$t/)"
    exit 1
  fi
  grep -E "^Done" "$log" || true
  rm -f "$log"
done
