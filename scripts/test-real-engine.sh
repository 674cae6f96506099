#!/usr/bin/env bash
# tokenscope against a real inference engine: installs llama.cpp's llama-server and
# its models (cached under ~/.cache/tokenscope/llama: ~13 CPU-minutes once, a second when warm),
# then runs the end-to-end tests against it (tests/real_engine.rs, and
# tests/real_engine_browser.rs when the web page's test exists).
#
#   scripts/test-real-engine.sh                  # install (cached) + run the tests
#   scripts/test-real-engine.sh --install-only   # install only (before `cargo test --workspace`)
#
# Extra arguments after `--` go to cargo test (e.g. -- --nocapture).
set -euo pipefail
cd "$(dirname "$0")/.."

install_only=0
cargo_extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --install-only) install_only=1; shift ;;
        --) shift; cargo_extra=("$@"); break ;;
        *) echo "test-real-engine.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

t0=$SECONDS
echo "== real engine: install llama-server + models (cached under ${TOKENSCOPE_LLAMA_DIR:-~/.cache/tokenscope/llama})"
scripts/real-engine.sh --install-only --model all
echo "== real engine: installed in $((SECONDS - t0)) s"
[[ $install_only == 1 ]] && exit 0

tests=(--test real_engine)
if [[ -f tests/real_engine_browser.rs ]]; then
    tests+=(--test real_engine_browser)
    # The browser half needs the built page (and chromium + chromedriver: scripts/setup.sh).
    [[ -f dist/index.html ]] || scripts/build-web.sh
fi
t1=$SECONDS
echo "== cargo test ${tests[*]}"
cargo test --quiet "${tests[@]}" -- "${cargo_extra[@]}"
echo "== real engine: tests passed in $((SECONDS - t1)) s"
