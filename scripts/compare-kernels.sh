#!/usr/bin/env bash
# Compares two tokenscope binaries' kernel figures on the same adapter: runs
# `kernels --quick` with each, interleaved (old, new, old, new, ...), ROUNDS times,
# and prints per kernel the median of each side's medians and new/old time (under 1:
# the new one is faster). Interleaving spreads a shared machine's noise over both.
#
#   scripts/compare-kernels.sh OLD_BINARY NEW_BINARY [ROUNDS=3] [-- extra kernels flags]
#
# The extra flags go to both (e.g. `-- --only gemv --formats f32`); a binary that
# knows `--no-tuning` gets it, so both run their built-in choices.
set -euo pipefail
old=${1:?usage: compare-kernels.sh OLD_BINARY NEW_BINARY [ROUNDS] [-- flags]}
new=${2:?usage: compare-kernels.sh OLD_BINARY NEW_BINARY [ROUNDS] [-- flags]}
shift 2
rounds=3
if [[ $# -gt 0 && $1 != -- ]]; then rounds=$1; shift; fi
[[ ${1:-} == -- ]] && shift
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache
flags_of() { "$1" kernels --help | grep -q -- --no-tuning && echo --no-tuning || true; }
old_flags=$(flags_of "$old")
new_flags=$(flags_of "$new")
for i in $(seq 1 "$rounds"); do
  echo "round $i/$rounds" >&2
  "$old" kernels --quick $old_flags "$@" --out "$dir/old-$i.json" >/dev/null 2>&1
  "$new" kernels --quick $new_flags "$@" --out "$dir/new-$i.json" >/dev/null 2>&1
done
python3 - "$dir" <<'PY'
import glob, json, statistics, sys
d = sys.argv[1]
def load(tag):
    out = {}
    for f in sorted(glob.glob(f"{d}/{tag}-*.json")):
        r = json.load(open(f))
        for k in r["kernels"]:
            key = (k["name"], k["dtype"], "x".join(map(str, k["shape"])), f"batch {k.get('batch', 1)}")
            out.setdefault(key, []).append(k["median_us"])
        if r.get("bandwidth"):
            out.setdefault(("read GB/s",), []).append(r["bandwidth"]["read_gbps"])
        for s in r.get("decode_steps", []):
            out.setdefault(("step", s["model"], s["quant"], str(s["context"])), []).append(s["step_ms"] * 1e3)
    return {k: statistics.median(v) for k, v in out.items()}
o, n = load("old"), load("new")
print("| kernel | old | new | new/old time |")
print("|---|---:|---:|---:|")
for k in sorted(set(o) & set(n), key=str):
    if k == ("read GB/s",):
        print(f"| read GB/s | {o[k]:.2f} | {n[k]:.2f} | {o[k] / n[k]:.2f} |")
    elif o[k]:
        print(f"| {' '.join(k)} | {o[k]:.0f} us | {n[k]:.0f} us | {n[k] / o[k]:.2f} |")
PY
rm -rf "$dir"
