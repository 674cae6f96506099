#!/usr/bin/env bash
# Build the web page into dist/ (a static folder that works from any host and any
# sub-path: every URL in it is relative; nothing is fetched from anywhere else).
#
#   cargo build (wasm32, profile web-release) -> wasm-bindgen --target web
#   -> wasm-opt -Oz (binaryen from tools/, when present) -> dist/ with
#   content-hashed file names and index.html rewritten to point at them.
#
# Env: CARGO_TARGET_DIR (default target), DIST_DIR (default dist).
# Prints the wasm's raw and gzipped sizes.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[build-web] %s\n' "$*" >&2; }
target_dir=${CARGO_TARGET_DIR:-target}
dist=${DIST_DIR:-dist}
crate=tokenscope_web

command -v wasm-bindgen >/dev/null || { say "wasm-bindgen not found: run scripts/setup.sh"; exit 1; }
want=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)
have=$(wasm-bindgen --version | awk '{print $2}')
if [[ -n $want && $have != "$want" ]]; then
  say "wasm-bindgen $have does not match the wasm-bindgen crate $want in Cargo.lock: run scripts/setup.sh"
  exit 1
fi

say "cargo build (wasm32-unknown-unknown, web-release)"
cargo build -p tokenscope-web --target wasm32-unknown-unknown --profile web-release --quiet
wasm="$target_dir/wasm32-unknown-unknown/web-release/$crate.wasm"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
say "wasm-bindgen --target web"
wasm-bindgen --target web --no-typescript --out-dir "$stage" "$wasm"

opt=tools/node_modules/.bin/wasm-opt
if [[ -x $opt ]]; then
  say "wasm-opt -Oz"
  "$opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$stage/${crate}_bg.wasm" -o "$stage/${crate}_bg.opt.wasm"
  mv "$stage/${crate}_bg.opt.wasm" "$stage/${crate}_bg.wasm"
else
  say "no $opt (run scripts/setup.sh for a smaller wasm): skipping wasm-opt"
fi

hash() { sha256sum "$1" | cut -c1-12; }
rm -rf "$dist"
mkdir -p "$dist"
wasm_name="${crate}_bg-$(hash "$stage/${crate}_bg.wasm").wasm"
js_name="${crate}-$(hash "$stage/$crate.js").js"
cp "$stage/${crate}_bg.wasm" "$dist/$wasm_name"
cp "$stage/$crate.js" "$dist/$js_name"
if [[ -d $stage/snippets ]]; then cp -r "$stage/snippets" "$dist/"; fi

worker_name="net-worker-$(hash web/static/net-worker.js).js"
cp web/static/net-worker.js "$dist/$worker_name"
sed -e "s#\"./$crate.js\"#\"./$js_name\"#" -e "s#\"./${crate}_bg.wasm\"#\"./$wasm_name\"#" \
  -e "s#\"./net-worker.js\"#\"./$worker_name\"#" web/static/boot.js >"$stage/boot.js"
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
grep -q "$js_name" "$dist/$boot_name" && grep -q "$wasm_name" "$dist/$boot_name" \
  && grep -q "$worker_name" "$dist/$boot_name" \
  || { say "boot.js was not rewritten"; exit 1; }

raw=$(stat -c %s "$dist/$wasm_name")
gz=$(gzip -9 -c "$dist/$wasm_name" | wc -c)
total_gz=$(find "$dist" -type f -exec cat {} + | gzip -9 -c | wc -c)
printf 'dist/ built: %s\n' "$(ls "$dist" | tr '\n' ' ')"
printf 'wasm: %d bytes raw, %d bytes gzipped (%.0f KB gz); whole page %.0f KB gz\n' \
  "$raw" "$gz" "$(echo "$gz / 1024" | bc -l)" "$(echo "$total_gz / 1024" | bc -l)"
