#!/usr/bin/env bash
# Install what tokenscope's builds and tests need, skipping whatever is present:
#   - Debian packages: Chromium + ChromeDriver (browser tests), Mesa lavapipe + the
#     Vulkan loader (GPU kernels on the CPU when there is no GPU), Prometheus (the
#     live metrics' tests scrape and receive a run; no daemon is started)
#   - the wasm32-unknown-unknown Rust target
#   - wasm-bindgen-cli at exactly the version in Cargo.lock
#   - a current wasm-opt (binaryen from npm; Debian's is too old for wasm-bindgen output)
# Safe to run again: each step checks first. Needs root (or sudo) only for apt.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*" >&2; }
SUDO=""
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then SUDO="sudo"; fi

# --- Debian packages -------------------------------------------------------
need_pkgs=()
command -v chromium >/dev/null || need_pkgs+=(chromium)
command -v chromedriver >/dev/null || need_pkgs+=(chromium-driver)
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need_pkgs+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1' || need_pkgs+=(libvulkan1)
command -v prometheus >/dev/null || need_pkgs+=(prometheus)
if ((${#need_pkgs[@]})); then
  if command -v apt-get >/dev/null && { [[ $(id -u) -eq 0 ]] || [[ -n $SUDO ]]; }; then
    say "installing ${need_pkgs[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  else
    say "missing ${need_pkgs[*]}: install them with your package manager (Debian/Ubuntu: apt-get install ${need_pkgs[*]})"
    exit 1
  fi
else
  say "Debian packages present"
fi

# --- Rust target ------------------------------------------------------------
if ! rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# --- wasm-bindgen-cli, same version as the wasm-bindgen crate in Cargo.lock -
wbg_version=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)
if [[ -n $wbg_version ]]; then
  have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
  if [[ $have != "$wbg_version" ]]; then
    say "installing wasm-bindgen-cli $wbg_version (about 5 minutes on 2 cores)"
    # Not --locked: its lock file wants a webpki-roots release the registry lacks.
    cargo install wasm-bindgen-cli --version "$wbg_version" --quiet
  else
    say "wasm-bindgen $have present"
  fi
fi

# --- wasm-opt (binaryen 132 from npm) ----------------------------------------
if [[ ! -x tools/node_modules/.bin/wasm-opt ]]; then
  if command -v npm >/dev/null; then
    say "installing binaryen (wasm-opt) into tools/"
    mkdir -p tools
    (cd tools && npm install --silent --no-audit --no-fund binaryen@132 >/dev/null)
  else
    say "npm not found: the page builds without wasm-opt (larger wasm)"
  fi
fi
say "done"
