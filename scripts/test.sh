#!/usr/bin/env bash
# Every test of the project. Installs what is missing first (scripts/setup.sh:
# Chromium + ChromeDriver, Mesa lavapipe, the wasm32 target, wasm-bindgen-cli,
# wasm-opt; scripts/real-engine.sh: llama.cpp's llama-server and its models, cached
# under ~/.cache/tokenscope/llama), builds the page, then runs:
#   - the Rust workspace: core (unit, property and snapshot tests), the CLI end to
#     end over loopback (fidelity vs the server's log, faults, reliability, report),
#     the GPU kernels on Vulkan (lavapipe without a GPU), the page in headless
#     Chromium against the mock, the page's GPU view running the same kernels
#     through WebGPU (Chromium's SwiftShader, tests/browser_gpu.rs), and the native
#     client and the page against llama-server with real models;
#   - core built for wasm32 (it stays portable);
#   - the page's wasm-bindgen tests in headless Chromium;
#   - cargo fuzz on the SSE decoder and the streaming path, 30 s each.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
disk_free() { df -h --output=avail . | tail -1 | tr -d ' '; }
step() { echo "== $* ($((SECONDS - t0)) s, $(disk_free) free)"; }

# Chromium leaves scoped dirs in $TMPDIR when its driver ends it; give the whole
# run one scratch TMPDIR and remove it at the end, so runs do not fill /tmp.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tokenscope-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch

step "setup"
scripts/setup.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}

step "real engine: llama-server + models (cached)"
scripts/real-engine.sh --install-only --model all

step "build the page (dist/: the page and its GPU module)"
scripts/build-web.sh

step "cargo test (workspace)"
cargo test --workspace --quiet --no-fail-fast

step "core builds for wasm32 (no I/O, portable)"
cargo build -p tokenscope-core --target wasm32-unknown-unknown --quiet

step "the page's wasm-bindgen tests (headless Chromium)"
CHROMEDRIVER=${CHROMEDRIVER:-$(command -v chromedriver)} \
  cargo test -p tokenscope-web --target wasm32-unknown-unknown

step "fuzz the SSE decoder and the streaming path (bounded: 30 s per target)"
scripts/fuzz.sh 30

step "all tests passed"
