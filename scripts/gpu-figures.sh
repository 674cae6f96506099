#!/usr/bin/env bash
# Real-GPU figures in one command, for the machine with the GPU:
#
#   scripts/gpu-figures.sh [--out DIR] [--gguf FILE]... [--quick] [--tune-budget 120s] [--no-tune]
#
# 1. builds the release binary (skipped when target/release/tokenscope is newer
#    than the sources' last commit: a prepared machine spends no time building);
# 2. lists the adapters;
# 3. searches the kernel variants on this GPU (`kernels --tune`, --tune-budget,
#    default 120 s; the tuning file lands in DIR/tuning.json), then runs the full
#    suite with them: all eleven GEMV formats at the decode shapes, skinny matmul,
#    attention, the compute roof, the decode step and floor for llama-3.1-8b,
#    qwen2.5-7b and gemma-3-270m, and the drift check (--no-tune: the defaults);
# 4. the run-order check: f16 then q4_0 and q4_0 then f16 in two fresh processes,
#    whose GEMV figures must agree with each other and with the suite's;
# 5. each --gguf FILE (default: the Gemma 3 270M Q4_K_M file scripts/real-engine.sh
#    downloads, when present): the file's GEMVs on its own weights, attention at its
#    layout, and its floor at 4096 and 32768 tokens;
# 5b. the experiments that separate causes: u1 vs u4 at 4096x14336, the loops
#    unrolled or not (_ur: spilling), and
#    f32 x vs int8 x (q8_0, q4_0, q4_K) vs f16 (q4_0, q4_K), split-KV attention at 32, 64, 128
#    and 256 splits with the combine timed apart, each arm a tuning file forcing the
#    variant (after a search only); the fixed cost per dispatch comes from the suite;
# 6. your own kernel (`kernels --shader`): tokenscope's read kernel given as a
#    user's, at the ceiling's buffer size (it must read what the ceiling reads), and
#    the example tiled matmul at 2048^3 (128^3 with --quick; TILE 8 and 16, checked
#    against the naive), each beside tokenscope's f16 GEMV at its bytes;
# 7. prints a summary against the goals (docs/kernels.md, Goals): the read and FMA
#    roofs, each goal met or not with its figure, what tuning gained over the
#    defaults, the drift and the run-order check, each file's floor, the user path.
#
# Sized for a datacenter GPU: under 8 minutes with a prepared binary (the search is
# the largest part; the experiments' eleven short runs about 2 minutes: estimates, not
# yet timed on a GPU). Reports land in DIR (default gpu-figures/), one JSON per step, with
# the text output beside each. --quick: the small suite (seconds), for a first check.
# TOKENSCOPE_BIN=path uses that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="gpu-figures"
QUICK=()
GGUFS=()
TUNE=(--tune --tune-budget 120s)
SEARCH=yes
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --gguf) GGUFS+=("$2"); shift 2 ;;
    --quick) QUICK=(--quick); shift ;;
    --tune-budget) TUNE=(--tune --tune-budget "$2"); shift 2 ;;
    --no-tune) SEARCH=no; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-figures.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
say() { printf '[gpu-figures] %s (%s s)\n' "$1" "$SECONDS" >&2; }
mkdir -p "$OUT"
TUNING="$OUT/tuning.json"

BIN=${TOKENSCOPE_BIN:-target/release/tokenscope}
if [[ -z ${TOKENSCOPE_BIN:-} ]] && { [[ ! -x $BIN ]] || [[ -n $(find src core/src kernel-harness/src shaders -newer "$BIN" -print -quit) ]]; }; then
  say "building the release binary"
  cargo build --release --locked --bin tokenscope
fi
if [[ ${#GGUFS[@]} -eq 0 ]]; then
  gemma="${XDG_CACHE_HOME:-$HOME/.cache}/tokenscope/llama/models/gemma3-270m-q4_k_m.gguf"
  [[ -s $gemma ]] && GGUFS+=("$gemma")
fi
# The search writes DIR/tuning.json and the later steps read it; after --no-tune
# every step runs the defaults.
USE=(--tuning "$TUNING")
if [[ $SEARCH == no ]]; then
  TUNE=(--no-tuning)
  USE=(--no-tuning)
else
  TUNE+=(--tuning "$TUNING")
fi

say "adapters"
"$BIN" kernels --list-adapters | tee "$OUT/adapters.txt"

say "the variant search and the kernel suite"
"$BIN" kernels "${QUICK[@]}" "${TUNE[@]}" \
  --models llama-3.1-8b,qwen2.5-7b,gemma-3-270m \
  --formats f32,f16,bf16,q8_0,q6_k,q5_1,q5_0,q5_k,q4_1,q4_0,q4_k \
  --quant f16,q8_0,q4_0 \
  --json "$OUT/kernels.json" 2> >(tee "$OUT/kernels.err" >&2) | tee "$OUT/kernels.txt"

say "the run-order check"
for order in f16,q4_0 q4_0,f16; do
  "$BIN" kernels "${QUICK[@]}" "${USE[@]}" --only gemv --formats "$order" --decode-step none \
    --models llama-3.1-8b --json "$OUT/order-${order/,/-}.json" > "$OUT/order-${order/,/-}.txt"
done

# Experiments that separate the causes (docs/kernels.md, "Why a GEMV misses"): the
# same GEMVs with one thing changed, each arm a copy of the search's tuning file
# whose entries force a variant: loads in flight (u1 vs u4 at 4096x14336), the
# loops over the register arrays unrolled or not (_ur, every sweep shape: where
# they spill or not) and the x path (f32 x vs int8 x for q8_0, q4_0 and
# q4_K, vs f16 dequantization for q4_0 and q4_K). The fixed cost per dispatch comes from the suite
# itself (dispatch_cost). An arm's report says "tuned" and shows the search's
# figures for the problem; its own median is the figure to read.
if [[ $SEARCH == yes && -s $TUNING ]]; then
  say "experiments: unrolling and the x path"
  python3 - "$TUNING" "$OUT" <<'PY'
import copy, json, re, sys
tuning, out = sys.argv[1], sys.argv[2]
base = json.load(open(tuning))
template = next((e for e in base["entries"] if e["kernel"] == "gemv"), None)
def arm(name, forced):
    t = copy.deepcopy(base)
    for (dtype, shape), variant in forced.items():
        hit = [e for e in t["entries"] if e["kernel"] == "gemv" and e["dtype"] == dtype and e["shape"] == list(shape) and e["batch"] == 1]
        if not hit and template is not None:
            e = copy.deepcopy(template)
            e.update(dtype=dtype, shape=list(shape), batch=1, tried=[], failed=[])
            t["entries"].append(e)
            hit = [e]
        for e in hit:
            e["best"] = variant
    t["unsearched_problems"] = []
    json.dump(t, open(f"{out}/arm-{name}.json", "w"), indent=1)
def default(dtype, shape):
    e = next((e for e in base["entries"] if e["kernel"] == "gemv" and e["dtype"] == dtype and e["shape"] == list(shape) and e["batch"] == 1), None)
    return e["default"] if e else None
# The sweep's batch-1 GEMV shapes (the suite's report); the widest rows (4096x14336
# in the full suite) for the unrolling.
suite = json.load(open(f"{out}/kernels.json"))
shapes = sorted({tuple(k["shape"]) for k in suite["kernels"] if k["name"] == "gemv" and k["batch"] == 1 and not k.get("tensors")})
wide = max(shapes, key=lambda s: (s[1], -s[0]), default=None)
for u in (1, 4):
    arm(f"u{u}", {(d, wide): re.sub(r"_u\d+_", f"_u{u}_", default(d, wide)) for d in ("f16", "q4_0") if wide and default(d, wide)})
# The loops over the register arrays unrolled (_ur) or not, at every sweep shape.
for name, on in (("loops", False), ("ur", True)):
    arm(name, {(d, sh): re.sub(r"_ur$", "", default(d, sh)) + ("_ur" if on else "")
               for d in ("f16", "q4_0") for sh in shapes if default(d, sh)})
suffix = {"f32x": "", "int8x": "_q8", "f16x": "_h"}
for x, formats in (("f32x", ("q8_0", "q4_0", "q4_k")), ("int8x", ("q8_0", "q4_0", "q4_k")), ("f16x", ("q4_0", "q4_k"))):
    forced = {}
    for d in formats:
        for sh in shapes:
            v = default(d, sh)
            if v:
                ur = v.endswith("_ur")
                v = re.sub(r"_ur$", "", v)
                forced[(d, sh)] = re.sub(r"_(q8|h)$", "", v) + suffix[x] + ("_ur" if ur else "")
    arm(x, forced)
# Split-KV attention at 32, 64, 128 and 256 splits a KV head (positions per split =
# context / splits, where that is a whole number of 32-position tiles).
def arm_attention(name, splits):
    t = copy.deepcopy(base)
    for e in t["entries"]:
        if e["kernel"] == "attention_decode_split" and e["dtype"] == "f16":
            context = e["shape"][1]
            chunk = context // splits
            if context % splits == 0 and chunk % 32 == 0:
                e["best"] = re.sub(r"^c\d+", f"c{chunk}", e["best"])
    t["unsearched_problems"] = []
    json.dump(t, open(f"{out}/arm-{name}.json", "w"), indent=1)
for n in (32, 64, 128, 256):
    arm_attention(f"s{n}", n)
PY
  for a in u1 u4 loops ur; do
    [[ -s $OUT/arm-$a.json ]] && "$BIN" kernels "${QUICK[@]}" --tuning "$OUT/arm-$a.json" --only gemv --formats f16,q4_0 \
      --decode-step none --models llama-3.1-8b --json "$OUT/exp-$a.json" > "$OUT/exp-$a.txt" 2>&1 || true
  done
  for a in s32 s64 s128 s256; do
    [[ -s $OUT/arm-$a.json ]] && "$BIN" kernels "${QUICK[@]}" --tuning "$OUT/arm-$a.json" --only attention \
      --decode-step none --models llama-3.1-8b --json "$OUT/exp-$a.json" > "$OUT/exp-$a.txt" 2>&1 || true
  done
  for a in f32x int8x f16x; do
    formats=q8_0,q4_0,q4_k
    [[ $a == f16x ]] && formats=q4_0,q4_k
    [[ -s $OUT/arm-$a.json ]] && "$BIN" kernels "${QUICK[@]}" --tuning "$OUT/arm-$a.json" --only gemv --formats "$formats" \
      --decode-step none --models llama-3.1-8b --json "$OUT/exp-$a.json" > "$OUT/exp-$a.txt" 2>&1 || true
  done
fi

# A file's own GEMVs, at its shapes and on its weights.
i=0
for f in "${GGUFS[@]}"; do
  i=$((i + 1))
  say "the file $f"
  "$BIN" kernels "${QUICK[@]}" "${USE[@]}" --gguf "$f" --real-weights --context 4096,32768 \
    --json "$OUT/gguf-$i.json" | tee "$OUT/gguf-$i.txt"
done

say "your own kernel"
bytes=$(python3 -c "import json; print(json.load(open('$OUT/kernels.json'))['bandwidth']['buffer_bytes'])")
"$BIN" kernels "${QUICK[@]}" --shader shaders/bandwidth_read.wgsl --spec examples/kernels/bandwidth_read.toml \
  --param "BYTES=$bytes" --json "$OUT/user-read.json" > "$OUT/user-read.txt" || true
side=2048
[[ ${#QUICK[@]} -gt 0 ]] && side=128  # lavapipe runs 2048^3 in minutes a dispatch
"$BIN" kernels "${QUICK[@]}" --shader examples/kernels/matmul_tiled.wgsl \
  --param "M=$side" --param "N=$side" --param "K=$side" --json "$OUT/user-matmul.json" > "$OUT/user-matmul.txt" || true

say "summary"
python3 - "$OUT" <<'EOF'
import glob, json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/kernels.json"))
bw = r.get("bandwidth") or {}
c = r.get("compute") or {}
read = bw.get("read_gbps", 0)
print(f"{r['adapter']['name']} ({r['adapter']['backend']}, driver {r['adapter'].get('driver_info', '')}), verified {r['verified']}")
print(f"roofs: read {read:.0f} GB/s, copy {bw.get('copy_gbps', 0):.0f} GB/s, f32 FMA {c.get('f32_gflops', 0):.0f} GFLOP/s, f16 FMA {c.get('f16_gflops') or 0:.0f} GFLOP/s")
t = r.get("tuning") or {}
print(f"variants: {t.get('file', '-')}: {t.get('note', '-')}")
print("\ngoals (fraction of the read bandwidth, or of the roof that bounds the kernel):")
for g in r.get("goals", []):
    m = g.get("measured_fraction")
    status = {True: "met", False: "NOT met", None: "not measured"}[g.get("met")]
    print(f"  {g['goal']:<62} target {g['target_fraction']:.0%}  measured {'-' if m is None else f'{m:.0%}':>5}  {status:<12} {g['source']}")
print("\ndecode steps:")
for s in r.get("decode_steps", []):
    floor = s["bytes_per_token"] / (read * 1e6) if read else 0
    print(f"  {s['model']} {s['quant']} ctx {s['context']}: {s['step_ms']:.2f} ms/token, {s['dispatches']} dispatches; floor at read {floor:.2f} ms ({s['step_ms'] / floor if floor else 0:.2f}x)")
try:
    tf = json.load(open(f"{out}/tuning.json"))
    gains = [(e["default_us"] / e["best_us"], e) for e in tf["entries"] if e.get("default_us")]
    gains.sort(key=lambda x: -x[0])
    print(f"\ntuning: {len(tf['entries'])} problems in {tf['spent_s']:.0f} s ({len(tf.get('unsearched', []))} left unsearched); best over default, largest first:")
    for g, e in gains[:12]:
        print(f"  {e['kernel']} {e['dtype']} {e['shape']} b{e['batch']}: {e['best']} {e['best_us']:.1f} us vs default {e['default']} {e['default_us']:.1f} us ({g:.2f}x); slowest {e['worst']} {e['worst_us']:.1f} us")
    bad = [e for e in tf["entries"] if e.get("failed")]
    for e in bad:
        print(f"  WRONG ANSWERS from {e['failed']} at {e['kernel']} {e['dtype']} {e['shape']}")
except FileNotFoundError:
    pass
print("\ndrift (same kernel early and at the end of the suite):")
for d in r.get("drift", []):
    print(f"  {d['kernel']:<40} {d['first_us']:10.1f} -> {d['again_us']:10.1f} us  {d['change']:+.1%}{'  DRIFT' if d['drifted'] else ''}")
print("\nrun order (f16 then q4_0 vs q4_0 then f16, fresh processes, and the suite):")
runs = {}
for path in sorted(glob.glob(f"{out}/order-*.json")):
    o = json.load(open(path))
    runs[path] = {(k["dtype"], tuple(k["shape"])): k["median_us"] for k in o["kernels"] if k["name"] == "gemv"}
suite = {(k["dtype"], tuple(k["shape"])): k["median_us"] for k in r["kernels"] if k["name"] == "gemv" and not k.get("tensors")}
if runs:
    keys = sorted(set.intersection(*[set(v) for v in runs.values()]))
    for key in keys:
        vals = [runs[p][key] for p in runs] + ([suite[key]] if key in suite else [])
        spread = max(vals) / min(vals) - 1
        print(f"  gemv {key[0]:<5} {'x'.join(map(str, key[1])):<12} " + "  ".join(f"{v:9.1f}" for v in vals) + f" us  spread {spread:.1%}{'  ORDER EFFECT' if spread > 0.05 else ''}")
print("\nfixed cost per dispatch (each format's GEMVs fitted as a + bytes / B, dispatches back to back):")
for c in r.get("dispatch_cost", []):
    a = f"{c['fixed_us']:.2f} +- {c['fixed_ci95_us']:.2f} us" + ("" if c["resolved"] else " (not resolved)")
    b = c.get("stream_gbps")
    print(f"  {c['dtype']:<5} over {c['shapes']} shapes: a = {a}, B = {b or 0:.4g} GB/s ({(c.get('stream_fraction_of_read') or 0):.0%} of read)")
print("\nexperiments (the same GEMVs with one thing forced; us per call, the variant that ran):")
for pair in (("u1", "u4"), ("loops", "ur"), ("f32x", "int8x"), ("f32x", "f16x")):
    arms = {}
    for a in pair:
        try:
            arms[a] = {(k["dtype"], tuple(k["shape"])): (k["median_us"], (k.get("variant") or {}).get("name", "?"), k["fraction_of_read"])
                       for k in json.load(open(f"{out}/exp-{a}.json"))["kernels"] if k["name"] == "gemv"}
        except (FileNotFoundError, ValueError):
            print(f"  {a}: no report (see {out}/exp-{a}.txt; the experiments need the search's tuning file)")
    if len(arms) == 2:
        for key in sorted(set(arms[pair[0]]) & set(arms[pair[1]])):
            (t0, v0, f0), (t1, v1, f1) = arms[pair[0]][key], arms[pair[1]][key]
            print(f"  gemv {key[0]:<5} {'x'.join(map(str, key[1])):<12} {pair[0]} {t0:9.2f} us ({f0:.0%}, {v0})  {pair[1]} {t1:9.2f} us ({f1:.0%}, {v1})  {pair[1]}/{pair[0]} {t1 / t0:.2f}")
print("\nsplit-KV attention f16 by splits a KV head (us per call, the combine alone, fraction of read):")
for a in ("s32", "s64", "s128", "s256"):
    try:
        ks = json.load(open(f"{out}/exp-{a}.json"))["kernels"]
    except (FileNotFoundError, ValueError):
        print(f"  {a}: no report (see {out}/exp-{a}.txt)")
        continue
    for k in ks:
        if k["name"] == "attention_decode_split" and k["dtype"] == "f16":
            print(f"  {a:<5} h{k['heads']}/kv{k['kv_heads']} d{k['head_dim']} ctx {k['context']:>6}: {k['splits']:>4} splits  {k['median_us']:9.2f} us"
                  f"  combine {k.get('combine_us') or 0:8.2f} us  {k['fraction_of_read']:.0%}  {(k.get('variant') or {}).get('name', '?')}")
print("\nyour own kernel (kernels --shader):")
for name in ("user-read", "user-matmul"):
    try:
        u = json.load(open(f"{out}/{name}.json"))
    except (FileNotFoundError, ValueError):
        print(f"  {name}: no report (see {out}/{name}.txt)")
        continue
    ceiling = (u.get("bandwidth") or {}).get("read_gbps") or 0
    for k in u["kernels"]:
        if k["dtype"] == "wgsl":
            print(f"  {k['name']} {(k.get('variant') or {}).get('name', '')}: {k['median_us']:.1f} us, {k['effective_gbps']:.1f} GB/s "
                  f"({k['effective_gbps'] / ceiling if ceiling else 0:.1%} of this run's read ceiling), {k['gflops']:.0f} GFLOP/s, "
                  f"{k.get('fraction_of_roof', 0):.0%} of the {k.get('roof', '?')} roof, checked {k['verification']['checked']}, verified {k['verified']}")
for path in sorted(glob.glob(f"{out}/gguf-*.json")):
    g = json.load(open(path)).get("gguf")
    if g:
        for f in g["floors"]:
            print(f"{g['file']} at {f['context_tokens']} tokens: {f['bytes_per_token'] / 1e6:.1f} MB/token, "
                  f"floor at read {f.get('read_floor_ms', 0):.3f} ms, with its kernels {f.get('tpot_floor_ms', 0):.3f} ms")
EOF
