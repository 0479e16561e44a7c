#!/usr/bin/env bash
# Checks, and where it can installs, what the build needs from the system:
#   - a C and a C++ compiler (RocksDB, Snappy and LMDB are compiled by their -sys crates),
#   - libclang as bindgen loads it (librocksdb-sys generates its bindings at build time) and
#     clang's builtin headers beside it,
#   - cargo itself,
#   - with QSIM_WITH_CHROMIUM=1 (the test command sets it): headless Chromium, which
#     reports/tests/integration/chromium.rs uses to open the HTML reports from disk and screenshot them;
#   - with QSIM_WITH_REAL=1 (`./qsim real` and the test command set it): what `qsim real` runs —
#     `unshare` and `setpriv` (util-linux: the run's network namespace, the nodes' death signal),
#     `ip` and `tc` (iproute2: its loopback, latency) and `nft` (nftables: partitions and loss).
# Each check asks the way its consumer will (ci/lib/detect.sh; tested by ci/tests/detect.sh).
# Installs with apt-get when running as root (or with passwordless sudo) on Debian/Ubuntu;
# otherwise says exactly what to install and stops.
set -euo pipefail

say() { printf 'qsim setup: %s\n' "$*" >&2; }
# shellcheck source=ci/lib/detect.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/detect.sh"

have_libclang() {
  local lib
  lib=$(qsim_find_libclang) || return 1
  qsim_libclang_has_headers "$lib"
}

missing=()
qsim_have_c_compiler || missing+=(gcc libc6-dev)
qsim_have_cxx_compiler || missing+=(g++)
have_libclang || missing+=(libclang-dev)
if [[ "${QSIM_WITH_CHROMIUM:-0}" == 1 ]]; then
  # Debian's package; Ubuntu's `chromium-browser` is a snap stub, so CHROMIUM=/path overrides.
  qsim_find_chromium >/dev/null || missing+=(chromium)
fi

if [[ "${QSIM_WITH_REAL:-0}" == 1 ]]; then
  # Asked as qsim real runs them: by name on PATH, each answering --version.
  for tool in unshare:util-linux setpriv:util-linux ip:iproute2 tc:iproute2 nft:nftables; do
    "${tool%%:*}" --version >/dev/null 2>&1 || "${tool%%:*}" -V >/dev/null 2>&1 || missing+=("${tool##*:}")
  done
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk 'NF && !seen[$0]++')
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
  say "install the equivalents for your distribution (a C/C++ compiler, libclang with its headers, and for the tests Chromium) and run this again."
  exit 1
fi

say "installing ${missing[*]} with apt-get (needed to build RocksDB and its bindings, to test the reports, and for real-process runs)"
"${apt_run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${apt_run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
qsim_have_c_compiler || { say "no working C compiler after installing gcc; set CC"; exit 1; }
qsim_have_cxx_compiler || { say "no working C++ compiler after installing g++; set CXX"; exit 1; }
have_libclang || { say "libclang (with clang's headers) still not found after installing libclang-dev; set LIBCLANG_PATH"; exit 1; }
if [[ "${QSIM_WITH_CHROMIUM:-0}" == 1 ]]; then
  qsim_find_chromium >/dev/null || { say "Chromium still does not start after installing it; set CHROMIUM=/path/to/chromium"; exit 1; }
fi
if [[ "${QSIM_WITH_REAL:-0}" == 1 ]]; then
  nft --version >/dev/null 2>&1 || { say "nft still not found after installing nftables"; exit 1; }
fi
exit 0
