#!/usr/bin/env bash
# Tests ci/lib/detect.sh — the set-up's checks for libclang, the compilers and Chromium —
# against fake library folders, fake llvm-config and fake programs, never the real system; and
# when ci/lib/pytools.sh reuses its virtualenv, against a fake python (nothing is installed).
# Prints one line per case and closes with "N passed, N failed"; exits 1 on any failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/lib/detect.sh
source "$here/../lib/detect.sh"

passed=0
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check() { # check NAME EXPECTED(found|missing) COMMAND...
  local name=$1 expected=$2 got
  shift 2
  if "$@" >/dev/null 2>&1; then got=found; else got=missing; fi
  if [[ "$got" == "$expected" ]]; then
    passed=$((passed + 1)); printf 'ok    %s\n' "$name"
  else
    failed=$((failed + 1)); printf 'FAIL  %s: expected %s, got %s\n' "$name" "$expected" "$got"
  fi
}

# A fake 64-bit ELF shared object (clang-sys reads the ELF class before accepting a file).
elf64() { mkdir -p "$(dirname "$1")"; printf '\x7fELF\x02\x01\x01' >"$1"; }
elf32() { mkdir -p "$(dirname "$1")"; printf '\x7fELF\x01\x01\x01' >"$1"; }

# A fresh fake system root for each case; the real one is never searched.
sysroot() {
  local root="$work/root-$1"
  rm -rf "$root"
  mkdir -p "$root/usr/lib/x86_64-linux-gnu" "$root/usr/lib/llvm-14/lib"
  printf '%s\n' "$root"
}
find_in() { # find_in ROOT: qsim_find_libclang isolated to ROOT
  env -u LIBCLANG_PATH -u LD_LIBRARY_PATH -u LIBRARY_PATH QSIM_SYSROOT="$1" \
    LLVM_CONFIG_PATH="$work/no-llvm-config" bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_libclang"
}

# The machine of the bug report: only the C++ interface library (libclang-cpp14).
r=$(sysroot cpp-only)
elf64 "$r/usr/lib/llvm-14/lib/libclang-cpp.so.14"
ln -s ../llvm-14/lib/libclang-cpp.so.14 "$r/usr/lib/x86_64-linux-gnu/libclang-cpp.so.14"
elf64 "$r/usr/lib/llvm-14/lib/libclang-cpp.so"
check "only libclang-cpp present -> missing" missing find_in "$r"
# What the old check answered for that machine (a glob any libclang* satisfied): found.
old_check() { compgen -G "$1/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null; }
check "(the old check was fooled by libclang-cpp)" found old_check "$r"

r=$(sysroot versioned)
elf64 "$r/usr/lib/x86_64-linux-gnu/libclang-14.so.1"
check "libclang-14.so.1 present -> found" found find_in "$r"

r=$(sysroot plain)
elf64 "$r/usr/lib/llvm-14/lib/libclang.so"
check "libclang.so under llvm-14 -> found" found find_in "$r"

r=$(sysroot suffix)
elf64 "$r/usr/local/lib/libclang.so.14"
check "libclang.so.14 in /usr/local/lib -> found" found find_in "$r"

r=$(sysroot not-elf)
printf 'INPUT(-lclang)\n' >"$r/usr/lib/x86_64-linux-gnu/libclang.so"
check "a linker script named libclang.so -> missing" missing find_in "$r"

r=$(sysroot elf32)
elf32 "$r/usr/lib/x86_64-linux-gnu/libclang-14.so.1"
check "a 32-bit libclang -> missing" missing find_in "$r"

r=$(sysroot static)
elf64 "$r/usr/lib/llvm-14/lib/libclang.a"
check "only the static libclang.a -> missing" missing find_in "$r"

# LIBCLANG_PATH: clang-sys searches only there.
r=$(sysroot env-dir)
elf64 "$work/custom/lib/libclang.so"
check "LIBCLANG_PATH set to a folder holding libclang.so -> found" found \
  env LIBCLANG_PATH="$work/custom/lib" QSIM_SYSROOT="$r" LLVM_CONFIG_PATH="$work/no" \
  bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_libclang"
check "LIBCLANG_PATH set to the file itself -> found" found \
  env LIBCLANG_PATH="$work/custom/lib/libclang.so" QSIM_SYSROOT="$r" LLVM_CONFIG_PATH="$work/no" \
  bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_libclang"
mkdir -p "$work/cpp-only-dir"; elf64 "$work/cpp-only-dir/libclang-cpp.so.14"
elf64 "$r/usr/lib/x86_64-linux-gnu/libclang-14.so.1"
check "LIBCLANG_PATH to a folder with only libclang-cpp -> missing (the system one is not searched)" missing \
  env LIBCLANG_PATH="$work/cpp-only-dir" QSIM_SYSROOT="$r" LLVM_CONFIG_PATH="$work/no" \
  bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_libclang"

r=$(sysroot ld-path)
elf64 "$work/ldpath/libclang-15.so"
check "libclang-15.so on LD_LIBRARY_PATH -> found" found \
  env -u LIBCLANG_PATH LD_LIBRARY_PATH="/nonexistent:$work/ldpath" QSIM_SYSROOT="$r" LLVM_CONFIG_PATH="$work/no" \
  bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_libclang"

r=$(sysroot llvm-config)
elf64 "$work/llvm-prefix/lib/libclang.so.16"
printf '#!/bin/sh\necho %s\n' "$work/llvm-prefix" >"$work/llvm-config"; chmod +x "$work/llvm-config"
check "libclang in llvm-config --prefix's lib -> found" found \
  env -u LIBCLANG_PATH QSIM_SYSROOT="$r" LLVM_CONFIG_PATH="$work/llvm-config" \
  bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_libclang"

# Clang's builtin headers beside a Debian-layout libclang (libclang-common-N-dev).
r=$(sysroot headers)
elf64 "$r/usr/lib/llvm-14/lib/libclang-14.so.1"
check "libclang without clang's stddef.h -> headers missing" missing \
  qsim_libclang_has_headers "$r/usr/lib/llvm-14/lib/libclang-14.so.1"
mkdir -p "$r/usr/lib/llvm-14/lib/clang/14.0.6/include"; : >"$r/usr/lib/llvm-14/lib/clang/14.0.6/include/stddef.h"
check "libclang with clang's stddef.h -> headers found" found \
  qsim_libclang_has_headers "$r/usr/lib/llvm-14/lib/libclang-14.so.1"

# Compilers: the command the cc crate runs must build a program that runs.
mkdir -p "$work/bin"
printf '#!/bin/sh\nexit 0\n' >"$work/bin/fake-cxx"; chmod +x "$work/bin/fake-cxx"
printf '#!/bin/sh\necho "fatal error: string: No such file or directory" >&2; exit 1\n' >"$work/bin/no-stdlib-cxx"
chmod +x "$work/bin/no-stdlib-cxx"
check "CXX that exits 0 but builds nothing -> missing" missing env CXX="$work/bin/fake-cxx" bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_have_cxx_compiler"
check "CXX without its standard library -> missing" missing env CXX="$work/bin/no-stdlib-cxx" bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_have_cxx_compiler"
check "CXX not installed -> missing" missing env CXX="$work/bin/absent" bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_have_cxx_compiler"
check "CC that exits 0 but builds nothing -> missing" missing env CC="$work/bin/fake-cxx" bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_have_c_compiler"

# Chromium: the program reports/tests/integration/chromium.rs starts must answer as Chromium.
mkdir -p "$work/chromium-stub" "$work/chromium-real"
printf '#!/bin/sh\necho "Command '"'"'chromium-browser'"'"' requires the chromium snap to be installed." >&2; exit 1\n' \
  >"$work/chromium-stub/chromium-browser"; chmod +x "$work/chromium-stub/chromium-browser"
printf '#!/bin/sh\necho "Chromium 156.0.8078.73 built on Debian"\n' >"$work/chromium-real/chromium"
chmod +x "$work/chromium-real/chromium"
# PATH holds only the fakes and `timeout`, so an installed Chromium cannot answer for them.
mkdir -p "$work/tools"; ln -s "$(command -v timeout)" "$work/tools/timeout"
bash_bin=$(command -v bash)
check "only a snap stub chromium-browser on PATH -> missing" missing \
  env -u CHROMIUM PATH="$work/chromium-stub:$work/tools" "$bash_bin" -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_chromium"
check "a chromium answering --version on PATH -> found" found \
  env -u CHROMIUM PATH="$work/chromium-real:$work/chromium-stub:$work/tools" "$bash_bin" -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_chromium"
check "CHROMIUM pointing at the stub -> missing" missing \
  env CHROMIUM="$work/chromium-stub/chromium-browser" bash -c "set -euo pipefail; source '$here/../lib/detect.sh'; qsim_find_chromium"

# The launcher linters' virtualenv (ci/lib/pytools.sh) is reused only where it was made and
# while its python runs. A fake python records each `-m venv` and answers the rest.
mkdir -p "$work/py"
cat >"$work/py/python" <<'EOF'
#!/usr/bin/env bash
case "$1 ${2:-}" in
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && echo "venv $3" >>"$QSIM_FAKE_PYTHON_LOG" ;;
  "-m pip") exit 0 ;;
  "-c ") exit 0 ;;
  *) echo 3.11 ;;
esac
EOF
chmod +x "$work/py/python"
installs() { # installs CACHE: exit 0 when qsim_pytools made a virtualenv, 1 when it reused one
  local log="$work/py/log" before after
  touch "$log"
  before=$(wc -l <"$log")
  env QSIM_PYTHON="$work/py/python" QSIM_CACHE_DIR="$1" QSIM_FAKE_PYTHON_LOG="$log" \
    bash -c "set -euo pipefail; source '$here/../lib/pytools.sh'; qsim_pytools" || return 2
  after=$(wc -l <"$log")
  ((after > before))
}
check "pytools: an empty cache -> installs" found installs "$work/cache-a"
check "pytools: the same cache again -> reuses" missing installs "$work/cache-a"
mv "$work/cache-a" "$work/cache-b"
check "pytools: a cache moved to another folder (its scripts name the old python) -> installs" found \
  installs "$work/cache-b"
check "pytools: the moved cache, once installed again -> reuses" missing installs "$work/cache-b"
rm "$work"/cache-b/pytools-*/bin/python
check "pytools: a virtualenv whose python is gone -> installs" found installs "$work/cache-b"

printf '%d passed, %d failed\n' "$passed" "$failed"
((failed == 0))
