#!/usr/bin/env bash
# Checks, and where it can installs, what the build needs from the system:
#   - a C++ compiler (RocksDB and LMDB are C/C++ compiled by their -sys crates),
#   - libclang (librocksdb-sys generates its bindings with bindgen at build time),
#   - cargo itself,
#   - with QSIM_WITH_CHROMIUM=1 (the test command sets it): headless Chromium, which
#     reports/tests/chromium.rs uses to open the HTML reports from disk and screenshot them.
# Installs with apt-get when running as root (or with passwordless sudo) on Debian/Ubuntu;
# otherwise says exactly what to install and stops.
set -euo pipefail

say() { printf 'qsim setup: %s\n' "$*" >&2; }

missing=()
command -v c++ >/dev/null 2>&1 || missing+=(g++)
have_libclang() {
  if [[ -n "${LIBCLANG_PATH:-}" ]] && compgen -G "${LIBCLANG_PATH}/libclang*.so*" >/dev/null; then
    return 0
  fi
  ldconfig -p 2>/dev/null | grep -q 'libclang.*\.so' && return 0
  compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' >/dev/null
}
have_libclang || missing+=(libclang-dev)
if [[ "${QSIM_WITH_CHROMIUM:-0}" == 1 ]]; then
  # Debian's package; Ubuntu's `chromium` is a snap stub, so CHROMIUM=/path overrides the lookup.
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
    || [[ -n "${CHROMIUM:-}" ]] || missing+=(chromium)
fi

if ! command -v cargo >/dev/null 2>&1; then
  say "cargo is not on PATH. Install Rust (1.88 or newer) with rustup, then run this again."
  exit 1
fi

if ((${#missing[@]} == 0)); then
  exit 0
fi

apt_run=()
if [[ $(id -u) -eq 0 ]]; then
  apt_run=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  apt_run=(sudo -n)
else
  say "missing system packages: ${missing[*]}"
  say "install them (Debian/Ubuntu: sudo apt-get install ${missing[*]}) and run this again."
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "missing system packages: ${missing[*]}, and apt-get is not available to install them."
  say "install the equivalents for your distribution (a C++ compiler, libclang, and for the tests Chromium) and run this again."
  exit 1
fi

say "installing ${missing[*]} with apt-get (needed to build RocksDB and its bindings, and to test the reports)"
"${apt_run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${apt_run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
have_libclang || { say "libclang still not found after installing libclang-dev; set LIBCLANG_PATH"; exit 1; }
