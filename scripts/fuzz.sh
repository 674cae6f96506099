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
# fuzz/ is a workspace of its own, built with sanitizer flags: CI's clippy wrapper
# (.ci/run) lints the main workspace only.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$PWD/target/fuzz}
cd fuzz
targets=(sse_decoder stream_timeline prometheus_text gguf_header rum_batch)
# One build of every target, then the targets side by side (each fuzzer is one
# process, on one core at most), each for its full time.
# No sanitizer: the targets and all the code they reach in our crates are safe Rust
# (no `unsafe`), where AddressSanitizer has no memory error to find; what the
# fuzzer looks for is a panic, a broken property or unbounded growth. Without it
# the build is shorter and each target tries more inputs in its time.
# Sixteen codegen units rather than cargo-fuzz's one: both cores work on the
# large crates (84 s rather than 108 s for the whole build on 2 cores).
sanitizer=(--sanitizer none --codegen-units 16)
echo "== fuzz: building ${#targets[@]} targets"
cargo fuzz build "${sanitizer[@]}" >/dev/null 2>&1 || cargo fuzz build "${sanitizer[@]}"

# One target: its past failing inputs (fuzz/regressions/<target>/) first, every
# time, then fuzzing from its seeds (fuzz/seeds/<target>/, valid examples the
# fuzzer mutates from). Prints what it did; the exit status says whether it held.
fuzz_one() {
  local t=$1 log
  log=$(mktemp)
  if [ -d "regressions/$t" ]; then
    echo "== fuzz $t: $(ls "regressions/$t" | wc -l) past failing input(s)"
    if ! cargo fuzz run "${sanitizer[@]}" "$t" "regressions/$t"/* >"$log" 2>&1; then
      tail -40 "$log"
      echo "fuzz $t failed on a past failing input in fuzz/regressions/$t/"
      return 1
    fi
  fi
  local dirs=()
  if [ -d "seeds/$t" ]; then
    mkdir -p "corpus/$t"
    dirs=("corpus/$t" "seeds/$t")
  fi
  if ! cargo fuzz run "${sanitizer[@]}" "$t" ${dirs[@]+"${dirs[@]}"} -- -max_total_time="$seconds" -rss_limit_mb=1024 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz $t failed (a failing input, if found, is in fuzz/artifacts/$t/)"
    return 1
  fi
  echo "== fuzz $t for ${seconds}s: $(grep -E "^Done" "$log" || echo "no summary")"
  rm -f "$log"
}

# One more fuzzer than cores: five targets in two rounds on two cores, each with at
# least two thirds of a core for its whole time (more inputs than a whole core gave
# it under AddressSanitizer).
jobs=$(( $(nproc 2>/dev/null || echo 1) + 1 ))
out=$(mktemp -d)
failed=0
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  pids=()
  for t in "${targets[@]:i:jobs}"; do
    fuzz_one "$t" >"$out/$t" 2>&1 &
    pids+=("$!")
  done
  for k in "${!pids[@]}"; do
    t=${targets[i + k]}
    wait "${pids[$k]}" || failed=1
    cat "$out/$t"
  done
done
rm -rf "$out"
exit "$failed"
