#!/usr/bin/env bash
# Build the web page into dist/ (a static folder that works from any host and any
# sub-path: every URL in it is relative; nothing is fetched from anywhere else).
#
#   cargo build (wasm32, profile web-release) -> wasm-bindgen --target web
#   -> wasm-opt -Oz (binaryen from tools/, when present) -> dist/ with
#   content-hashed file names and index.html rewritten to point at them.
#
# Five wasm modules: the page (web/, tokenscope_web) loads first; the GPU module
# (web-gpu/, tokenscope_web_gpu: the kernel harness on WebGPU) is imported by boot.js's
# window.tokenscopeGpu() only when the GPU view opens, and the report module
# (web-report/, tokenscope_web_report: the combined report's analysis) by
# window.tokenscopeReport() only when there is a report to analyse, and the
# quality module (web-quality/, tokenscope_web_quality: core's quality checks)
# by window.tokenscopeQuality() only when the Quality view opens, and the run
# module (web-run/, tokenscope_web_run: the page's crate without its view: the
# runner, its transports, the simulator) by window.tokenscopeRun() only when a
# run starts or the Real users view talks to the simulator. The Real
# users view's chat demo (web/static/rum-demo.js, with rum/tokenscope-rum.min.js)
# is plain JS, imported only when that view opens.
#
# Env: CARGO_TARGET_DIR (default target), DIST_DIR (default dist).
# Prints each wasm's raw and gzipped sizes: the first load and the lazy modules.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[build-web] %s\n' "$*" >&2; }
target_dir=${CARGO_TARGET_DIR:-target}
dist=${DIST_DIR:-dist}
crate=tokenscope_web
gpu=tokenscope_web_gpu
rep=tokenscope_web_report
qual=tokenscope_web_quality
run=tokenscope_web_run

command -v wasm-bindgen >/dev/null || { say "wasm-bindgen not found: run scripts/setup.sh"; exit 1; }
want=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)
have=$(wasm-bindgen --version | awk '{print $2}')
if [[ -n $want && $have != "$want" ]]; then
  say "wasm-bindgen $have does not match the wasm-bindgen crate $want in Cargo.lock: run scripts/setup.sh"
  exit 1
fi

# Two builds: the run module builds the page's crate without its `app` feature,
# and one cargo invocation would unify that feature across both (the crates
# below them build once, with the same features, for both).
say "cargo build (wasm32-unknown-unknown, web-release): tokenscope-web"
cargo build -p tokenscope-web --target wasm32-unknown-unknown --profile web-release --quiet
say "cargo build (wasm32-unknown-unknown, web-release): tokenscope-web-gpu, tokenscope-web-report, tokenscope-web-quality, tokenscope-web-run"
cargo build -p tokenscope-web-gpu -p tokenscope-web-report -p tokenscope-web-quality -p tokenscope-web-run \
  --target wasm32-unknown-unknown --profile web-release --quiet

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
opt=tools/node_modules/.bin/wasm-opt
[[ -x $opt ]] || say "no $opt (run scripts/setup.sh for a smaller wasm): skipping wasm-opt"
# bindgen CRATE: wasm-bindgen --target web (+ wasm-opt -Oz) into $stage.
bindgen() {
  local name=$1 converge=()
  # The first load is converged (-Oz until it stops shrinking: about 0.4% smaller,
  # twice the time); the lazy modules take one -Oz.
  if [[ $name == "$crate" ]]; then converge=(--converge); fi
  say "wasm-bindgen --target web: $name"
  wasm-bindgen --target web --no-typescript --out-dir "$stage" \
    "$target_dir/wasm32-unknown-unknown/web-release/$name.wasm"
  if [[ -x $opt ]]; then
    say "wasm-opt -Oz: $name"
    # -iit (--ignore-implicit-traps): Rust code never relies on a wasm load,
    # store or division trapping (its bounds and zero checks are explicit), so the
    # optimizer may move and drop such instructions; 1.4 KB gzipped off the page.
    # The producers and target-features sections are of no use to a browser.
    "$opt" -Oz ${converge[@]+"${converge[@]}"} -iit --strip-debug --strip-producers --strip-target-features \
      --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
      --enable-mutable-globals --enable-reference-types --enable-multivalue \
      "$stage/${name}_bg.wasm" -o "$stage/${name}_bg.opt.wasm"
    mv "$stage/${name}_bg.opt.wasm" "$stage/${name}_bg.wasm"
  fi
}
# The five side by side, one per core: wasm-opt (binaryen's npm build runs on
# node) uses one core for a minute or more per module; each writes its own files.
jobs=$(nproc 2>/dev/null || echo 1)
pids=()
for name in "$rep" "$gpu" "$run" "$crate" "$qual"; do
  bindgen "$name" &
  pids+=("$!")
  if (( ${#pids[@]} >= jobs )); then
    wait "${pids[0]}" || { say "wasm-bindgen or wasm-opt failed"; exit 1; }
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do
  wait "$pid" || { say "wasm-bindgen or wasm-opt failed"; exit 1; }
done

hash() { sha256sum "$1" | cut -c1-12; }
rm -rf "$dist"
mkdir -p "$dist"
wasm_name="${crate}_bg-$(hash "$stage/${crate}_bg.wasm").wasm"
js_name="${crate}-$(hash "$stage/$crate.js").js"
cp "$stage/${crate}_bg.wasm" "$dist/$wasm_name"
cp "$stage/$crate.js" "$dist/$js_name"
gpu_wasm_name="${gpu}_bg-$(hash "$stage/${gpu}_bg.wasm").wasm"
gpu_js_name="${gpu}-$(hash "$stage/$gpu.js").js"
cp "$stage/${gpu}_bg.wasm" "$dist/$gpu_wasm_name"
cp "$stage/$gpu.js" "$dist/$gpu_js_name"
rep_wasm_name="${rep}_bg-$(hash "$stage/${rep}_bg.wasm").wasm"
rep_js_name="${rep}-$(hash "$stage/$rep.js").js"
cp "$stage/${rep}_bg.wasm" "$dist/$rep_wasm_name"
cp "$stage/$rep.js" "$dist/$rep_js_name"
qual_wasm_name="${qual}_bg-$(hash "$stage/${qual}_bg.wasm").wasm"
qual_js_name="${qual}-$(hash "$stage/$qual.js").js"
cp "$stage/${qual}_bg.wasm" "$dist/$qual_wasm_name"
cp "$stage/$qual.js" "$dist/$qual_js_name"
run_wasm_name="${run}_bg-$(hash "$stage/${run}_bg.wasm").wasm"
run_js_name="${run}-$(hash "$stage/$run.js").js"
cp "$stage/${run}_bg.wasm" "$dist/$run_wasm_name"
cp "$stage/$run.js" "$dist/$run_js_name"
if [[ -d $stage/snippets ]]; then cp -r "$stage/snippets" "$dist/"; fi

worker_name="net-worker-$(hash web/static/net-worker.js).js"
cp web/static/net-worker.js "$dist/$worker_name"
# The Real users view's chat demo and the RUM probe it embeds (the shipped ES
# module), imported by boot.js's window.tokenscopeRumDemo() only when that view opens.
probe_name="tokenscope-rum-$(hash rum/tokenscope-rum.min.js).js"
cp rum/tokenscope-rum.min.js "$dist/$probe_name"
sed -e "s#\"./tokenscope-rum.js\"#\"./$probe_name\"#" web/static/rum-demo.js >"$stage/rum-demo.js"
if ! grep -q "$probe_name" "$stage/rum-demo.js" || grep -q "\./tokenscope-rum\.js" "$stage/rum-demo.js"; then
  say "rum-demo.js was not rewritten (every import of ./tokenscope-rum.js, in double quotes)"; exit 1
fi
demo_name="rum-demo-$(hash "$stage/rum-demo.js").js"
cp "$stage/rum-demo.js" "$dist/$demo_name"
sed -e "s#\"./$crate.js\"#\"./$js_name\"#" -e "s#\"./${crate}_bg.wasm\"#\"./$wasm_name\"#" \
  -e "s#\"./net-worker.js\"#\"./$worker_name\"#" -e "s#\"./rum-demo.js\"#\"./$demo_name\"#" \
  -e "s#\"./$gpu.js\"#\"./$gpu_js_name\"#" -e "s#\"./${gpu}_bg.wasm\"#\"./$gpu_wasm_name\"#" \
  -e "s#\"./$rep.js\"#\"./$rep_js_name\"#" -e "s#\"./${rep}_bg.wasm\"#\"./$rep_wasm_name\"#" \
  -e "s#\"./$qual.js\"#\"./$qual_js_name\"#" -e "s#\"./${qual}_bg.wasm\"#\"./$qual_wasm_name\"#" \
  -e "s#\"./$run.js\"#\"./$run_js_name\"#" -e "s#\"./${run}_bg.wasm\"#\"./$run_wasm_name\"#" \
  web/static/boot.js >"$stage/boot.js"
boot_name="boot-$(hash "$stage/boot.js").js"
cp "$stage/boot.js" "$dist/$boot_name"
css_name="style-$(hash web/static/style.css).css"
cp web/static/style.css "$dist/$css_name"

sed -e "s#href=\"web/static/style.css\"#href=\"./$css_name\"#" \
  -e "s#src=\"web/static/boot.js\"#src=\"./$boot_name\"#" index.html >"$dist/index.html"

# Every reference must have been rewritten, and none may be absolute.
if grep -q 'web/static/' "$dist/index.html" || grep -Eq '(src|href)="/' "$dist/index.html"; then
  say "index.html still has an unrewritten or absolute URL"; exit 1
fi
grep -q "\./rum-demo\.js" "$dist/$boot_name" && { say "boot.js still imports ./rum-demo.js"; exit 1; }
grep -q "$js_name" "$dist/$boot_name" && grep -q "$wasm_name" "$dist/$boot_name" \
  && grep -q "$worker_name" "$dist/$boot_name" && grep -q "$demo_name" "$dist/$boot_name" \
  && grep -q "$gpu_js_name" "$dist/$boot_name" && grep -q "$gpu_wasm_name" "$dist/$boot_name" \
  && grep -q "$rep_js_name" "$dist/$boot_name" && grep -q "$rep_wasm_name" "$dist/$boot_name" \
  && grep -q "$qual_js_name" "$dist/$boot_name" && grep -q "$qual_wasm_name" "$dist/$boot_name" \
  && grep -q "$run_js_name" "$dist/$boot_name" && grep -q "$run_wasm_name" "$dist/$boot_name" \
  || { say "boot.js was not rewritten"; exit 1; }

gz() { gzip -9 -c "$1" | wc -c; }
kb() { echo "$1 / 1024" | bc -l | xargs printf '%.1f'; }
raw=$(stat -c %s "$dist/$wasm_name")
gzw=$(gz "$dist/$wasm_name")
gpu_raw=$(stat -c %s "$dist/$gpu_wasm_name")
gpu_gz=$(( $(gz "$dist/$gpu_wasm_name") + $(gz "$dist/$gpu_js_name") ))
rep_raw=$(stat -c %s "$dist/$rep_wasm_name")
rep_gz=$(( $(gz "$dist/$rep_wasm_name") + $(gz "$dist/$rep_js_name") ))
qual_raw=$(stat -c %s "$dist/$qual_wasm_name")
qual_gz=$(( $(gz "$dist/$qual_wasm_name") + $(gz "$dist/$qual_js_name") ))
run_raw=$(stat -c %s "$dist/$run_wasm_name")
run_gz=$(( $(gz "$dist/$run_wasm_name") + $(gz "$dist/$run_js_name") ))
# Each file gzipped on its own, as a server sends it (one gzip of all files
# together would depend on the order `find` lists them in).
first_gz=0
while IFS= read -r f; do
  first_gz=$(( first_gz + $(gz "$f") ))
done < <(find "$dist" -type f ! -name "$gpu_wasm_name" ! -name "$gpu_js_name" \
  ! -name "$rep_wasm_name" ! -name "$rep_js_name" ! -name "$demo_name" ! -name "$probe_name" \
  ! -name "$qual_wasm_name" ! -name "$qual_js_name" ! -name "$run_wasm_name" ! -name "$run_js_name")
printf 'dist/ built: %s\n' "$(ls "$dist" | tr '\n' ' ')"
printf 'page wasm: %d bytes raw, %d bytes gzipped (%s KB gz); first load (everything but the lazy modules) %s KB gz\n' \
  "$raw" "$gzw" "$(kb "$gzw")" "$(kb "$first_gz")"
# The page's budget: the first load at most 300,000 bytes gzipped, issue 36's
# 300 KB. It was 420,864 bytes (419,537 loaded) until that issue moved the run
# (the runner, its transports, the simulator, the report's assembly) into the run
# module, web-run/, fetched when a run starts; the main module reads reports
# through `core::model::shown` and shares a finished report's levels with its
# views rather than copying them (295,829 bytes; docs/web.md, "Page weight").
budget=300000
printf 'first load: %d bytes gzipped of a %d-byte budget (%d left)\n' "$first_gz" "$budget" $(( budget - first_gz ))
if (( first_gz > budget )); then
  say "the first load is over its budget by $(( first_gz - budget )) bytes: move code into a lazy module"
  exit 1
fi
printf 'GPU module (loaded when the GPU view opens): wasm %d bytes raw; wasm + js %d bytes gzipped (%s KB gz)\n' \
  "$gpu_raw" "$gpu_gz" "$(kb "$gpu_gz")"
demo_gz=$(( $(gz "$dist/$demo_name") + $(gz "$dist/$probe_name") ))
printf 'chat demo + RUM probe (loaded when the Real users view opens): %d bytes gzipped\n' "$demo_gz"
printf 'report module (loaded when there is a report to analyse): wasm %d bytes raw; wasm + js %d bytes gzipped (%s KB gz)\n' \
  "$rep_raw" "$rep_gz" "$(kb "$rep_gz")"
printf 'quality module (loaded when the Quality view opens): wasm %d bytes raw; wasm + js %d bytes gzipped (%s KB gz)\n' \
  "$qual_raw" "$qual_gz" "$(kb "$qual_gz")"
printf 'run module (loaded when a run starts): wasm %d bytes raw; wasm + js %d bytes gzipped (%s KB gz)\n' \
  "$run_raw" "$run_gz" "$(kb "$run_gz")"
