#!/usr/bin/env bash
# Real-GPU figures in one command, for the machine with the GPU:
#
#   scripts/gpu-figures.sh [--out DIR] [--gguf FILE]... [--quick]
#
# 1. builds the release binary (skipped when target/release/tokenscope is newer
#    than the sources' last commit: a prepared machine spends no time building);
# 2. lists the adapters, then runs the full `tokenscope kernels` suite (all eleven
#    GEMV formats at the decode shapes, skinny matmul, attention, the decode step
#    and the floor for llama-3.1-8b, qwen2.5-7b and gemma-3-270m) with --out;
# 3. each --gguf FILE (default: the Gemma 3 270M Q4_K_M file scripts/real-engine.sh
#    downloads, when present): the file's GEMVs at its types and shapes on its own
#    weights, attention at its layout, and its floor at 4096 and 32768 tokens;
# 4. prints a summary: the read bandwidth, each GEMV format's fraction of it, and
#    each file's floor.
#
# Sized for a datacenter GPU: well under 8 minutes (most of it the build when not
# prepared). Reports land in DIR (default gpu-figures/), one JSON per step, with the
# text output beside each. --quick: the small suite (seconds), for a first check.
# TOKENSCOPE_BIN=path uses that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="gpu-figures"
QUICK=()
GGUFS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --gguf) GGUFS+=("$2"); shift 2 ;;
    --quick) QUICK=(--quick); shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-figures.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
say() { printf '[gpu-figures] %s\n' "$*" >&2; }
mkdir -p "$OUT"

BIN=${TOKENSCOPE_BIN:-target/release/tokenscope}
if [[ -z ${TOKENSCOPE_BIN:-} ]] && { [[ ! -x $BIN ]] || [[ -n $(find src core/src kernel-harness/src shaders -newer "$BIN" -print -quit) ]]; }; then
  say "building the release binary"
  cargo build --release --locked --bin tokenscope
fi
if [[ ${#GGUFS[@]} -eq 0 ]]; then
  gemma="${XDG_CACHE_HOME:-$HOME/.cache}/tokenscope/llama/models/gemma3-270m-q4_k_m.gguf"
  [[ -s $gemma ]] && GGUFS+=("$gemma")
fi

say "adapters"
"$BIN" kernels --list-adapters | tee "$OUT/adapters.txt"

say "the kernel suite"
"$BIN" kernels "${QUICK[@]}" \
  --models llama-3.1-8b,qwen2.5-7b,gemma-3-270m \
  --formats f32,f16,bf16,q8_0,q6_k,q5_1,q5_0,q5_k,q4_1,q4_0,q4_k \
  --quant f16,q8_0,q4_0 \
  --out "$OUT/kernels.json" | tee "$OUT/kernels.txt"

# A file's own GEMVs, at its shapes and on its weights.
i=0
for f in "${GGUFS[@]}"; do
  i=$((i + 1))
  say "the file $f"
  "$BIN" kernels "${QUICK[@]}" --gguf "$f" --real-weights --context 4096,32768 \
    --out "$OUT/gguf-$i.json" | tee "$OUT/gguf-$i.txt"
done

say "summary"
python3 - "$OUT" <<'EOF'
import glob, json, sys
out = sys.argv[1]
for path in [f"{out}/kernels.json"] + sorted(glob.glob(f"{out}/gguf-*.json")):
    r = json.load(open(path))
    bw = r.get("bandwidth") or {}
    print(f"{path}: {r['adapter']['name']} ({r['adapter']['backend']}), read {bw.get('read_gbps', 0):.1f} GB/s, verified {r['verified']}")
    by = {}
    for k in r["kernels"]:
        if k["name"] == "gemv" and k["verified"] and not k["cache_resident"]:
            t, b = by.get(k["dtype"], (0.0, 0))
            by[k["dtype"]] = (t + k["median_us"], b + k["bytes_moved"])
    for dtype, (us, b) in sorted(by.items()):
        gbps = b / (us * 1e-6) / 1e9
        print(f"  gemv {dtype:5} {gbps:8.1f} GB/s  {gbps / bw['read_gbps']:.0%} of read")
    g = r.get("gguf")
    if g:
        for f in g["floors"]:
            print(f"  {g['file']} at {f['context_tokens']} tokens: {f['bytes_per_token'] / 1e6:.1f} MB/token, "
                  f"floor at read {f.get('read_floor_ms', 0):.3f} ms, with its kernels {f.get('tpot_floor_ms', 0):.3f} ms")
EOF
