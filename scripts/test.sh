#!/usr/bin/env bash
# Every test of the project: the Rust workspace (core, the CLI's end-to-end tests
# over loopback, the GPU kernels on Vulkan/lavapipe), core built for wasm32, and
# the browser suites when the page exists. Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}

echo "== cargo test (workspace)"
cargo test --workspace --quiet

echo "== core builds for wasm32 (no I/O, portable)"
cargo build -p tokenscope-core --target wasm32-unknown-unknown --quiet

echo "== all tests passed"
