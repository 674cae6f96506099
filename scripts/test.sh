#!/usr/bin/env bash
# Every test of the project. Installs what is missing first (scripts/setup.sh:
# Chromium + ChromeDriver, Mesa lavapipe, the wasm32 target, wasm-bindgen-cli,
# wasm-opt; scripts/real-engine.sh: llama.cpp's llama-server and its models, cached
# under ~/.cache/tokenscope/llama), builds the page, then runs:
#   - the Rust workspace with the opt-in suites switched on
#     (`cargo test -- --include-ignored`): core (unit, property and snapshot tests),
#     the CLI end to end over loopback (fidelity vs the server's log, faults,
#     reliability, the raw rebuild, report), and the opt-in suites: the GPU kernels
#     on Vulkan (lavapipe without a GPU), the page in headless Chromium against the
#     mock, the page's GPU view through WebGPU (Chromium's SwiftShader), and the
#     native client and the page against llama-server with real models;
#   - a check that every opt-in test really ran and passed (none may skip);
#   - the page's wasm-bindgen tests in headless Chromium;
#   - a check that the page's wasm32 build compiled every library crate (they
#     stay portable);
#   - cargo fuzz on the SSE decoder, the streaming path, the /metrics parser,
#     the GGUF header and the real-user intake, 30 s each.
#
# A plain `cargo test` runs everything that needs nothing beyond Rust; the opt-in
# suites are `#[ignore]`d with the reason (what they need) and run here.
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
# The page as users load it (its first-load budget is tested on it): built
# without CI's lint wrapper, clippy-driver, which compiles with MIR optimisations
# off and makes a larger wasm, and without the variable itself (set but empty,
# it changes cargo's metadata hashes, and the page's layout moves by ~500 bytes
# gzipped). The page's crates are linted for wasm32 below.
env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS scripts/build-web.sh

step "deploy: Kubernetes manifests, Prometheus config, Grafana queries"
scripts/check-deploy.sh

step "cargo test (workspace, opt-in suites included)"
log=$scratch/cargo-test.log
cargo test --workspace --no-fail-fast -- --include-ignored 2>&1 | tee "$log"

step "every opt-in suite ran"
# The opt-in tests are the #[ignore]d ones; each must appear as passed above.
cargo test --workspace --quiet -- --ignored --list 2>/dev/null |
  sed -n 's/: test$//p' | sort >"$scratch/opt-in.txt"
sed -n 's/^test \(.*\) \.\.\. ok$/\1/p' "$log" | sort >"$scratch/passed.txt"
missing=$(comm -23 "$scratch/opt-in.txt" "$scratch/passed.txt")
if [[ ! -s $scratch/opt-in.txt ]]; then
  echo "no opt-in test was listed: the check itself is broken"
  exit 1
fi
if [[ -n $missing ]]; then
  echo "these opt-in tests did not run and pass:"
  echo "$missing"
  exit 1
fi
echo "$(wc -l <"$scratch/opt-in.txt") opt-in tests ran and passed"

step "the page's wasm-bindgen tests (headless Chromium)"
CHROMEDRIVER=${CHROMEDRIVER:-$(command -v chromedriver)} \
  cargo test -p tokenscope-web --target wasm32-unknown-unknown --profile web-test

if [[ -n ${RUSTC_WORKSPACE_WRAPPER:-} ]]; then
  step "lint the page's lazy modules for wasm32 ($(basename "$RUSTC_WORKSPACE_WRAPPER"))"
  # The tests above linted the page's main crate and the libraries for wasm32;
  # the four lazy modules are built here through the same wrapper.
  cargo build --quiet --target wasm32-unknown-unknown --profile web-test -p tokenscope-web-gpu \
    -p tokenscope-web-report -p tokenscope-web-quality -p tokenscope-web-run
fi

step "the library crates build for wasm32 (no I/O, portable)"
# The page's build above compiled them for wasm32 (its five modules depend on
# every one): check that this stays so, rather than build them again.
libs=(tokenscope-stats tokenscope-hw tokenscope-measure tokenscope-workload tokenscope-sim
  tokenscope-core tokenscope-quality tokenscope-render tokenscope-kernel-report
  tokenscope-kernel-spec)
in_page=$(cargo tree --quiet --target wasm32-unknown-unknown -e normal --prefix none -f '{p}' \
  -p tokenscope-web -p tokenscope-web-gpu -p tokenscope-web-report -p tokenscope-web-quality \
  -p tokenscope-web-run | awk '{print $1}' | sort -u)
for lib in "${libs[@]}"; do
  if ! grep -qx "$lib" <<<"$in_page"; then
    echo "$lib is not in the page's wasm32 build: build it for wasm32 here"
    exit 1
  fi
done
echo "${#libs[@]} library crates built for wasm32 in the page's build"

step "fuzz the parsers of untrusted input (bounded: 30 s per target)"
scripts/fuzz.sh 30

step "all tests passed"
