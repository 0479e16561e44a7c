# Detection of the system pieces the build and the tests load, as functions (sourced by
# ci/system-deps.sh and tested by ci/tests/detect.sh against fake folders and programs).
#
# Every check here asks the question the way the consumer will: a neighbouring package that
# merely has a similar file name must not satisfy it.
#   - libclang: the search clang-sys 1.9.1 (bindgen's loader; librocksdb-sys uses it with the
#     `runtime` feature) performs, in its order and with its file patterns and its exclusion of
#     libclang-cpp (the C++ interface library, which bindgen cannot use).
#   - C and C++ compilers: the commands the `cc` crate runs (`$CC`/`cc`, `$CXX`/`c++`),
#     compiling a program that includes a standard header, so a compiler without its
#     standard library (clang without libstdc++-dev, say) does not count.
#   - Chromium: the candidates reports/tests/integration/chromium.rs tries, in its order, each one run
#     with --version, so a stub that only prints "install the snap" does not count.
#
# QSIM_SYSROOT (tests only) prefixes the fixed system directories clang-sys globs.

# clang-sys's fixed Linux directories (build/common.rs, DIRECTORIES_LINUX), in its order.
QSIM_CLANG_SYS_DIRS=(
  "/usr/local/llvm*/lib*"
  "/usr/local/lib*/*/*"
  "/usr/local/lib*/*"
  "/usr/local/lib*"
  "/usr/lib*/*/*"
  "/usr/lib*/*"
  "/usr/lib*"
)
# clang-sys's file patterns on Linux with the runtime feature (build/dynamic.rs).
QSIM_CLANG_SYS_FILES=("libclang.so" "libclang-*.so" "libclang.so.*" "libclang-*.so.*")

# A 64-bit ELF file, as clang-sys's validate_library requires on a 64-bit target.
_qsim_is_elf64() {
  [[ -f "$1" ]] || return 1
  local magic
  magic=$(head -c 5 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')
  [[ "$magic" == 7f454c4602 ]]
}

# Appends every libclang candidate clang-sys would accept in directory $1 to _qsim_candidates.
# (An array, not a pipe into `head`: under `set -o pipefail` the cut-off writer would fail.)
_qsim_libclang_in_dir() {
  local dir=$1 pattern path name
  [[ -d "$dir" ]] || return 0
  for pattern in "${QSIM_CLANG_SYS_FILES[@]}"; do
    for path in "$dir"/$pattern; do
      [[ -e "$path" ]] || continue
      name=${path##*/}
      # clang-sys skips libclang-cpp (renamed from libclang_shared in Clang 10).
      [[ "$name" == *-cpp.* ]] && continue
      if _qsim_is_elf64 "$path"; then _qsim_candidates+=("$path"); fi
    done
  done
  return 0
}

# Prints the libclang bindgen will load (the first valid candidate in clang-sys's order) and
# returns 0, or returns 1 having printed nothing.
qsim_find_libclang() {
  local dir pattern prefix candidate
  _qsim_candidates=()
  if [[ -n "${LIBCLANG_PATH+set}" ]]; then
    # Set: clang-sys searches only there — a matching file, or a directory holding one.
    if [[ -f "$LIBCLANG_PATH" ]]; then
      _qsim_libclang_in_dir "$(dirname "$LIBCLANG_PATH")"
      for candidate in "${_qsim_candidates[@]}"; do
        if [[ "$candidate" -ef "$LIBCLANG_PATH" ]]; then printf '%s\n' "$LIBCLANG_PATH"; return 0; fi
      done
      return 1
    fi
    _qsim_libclang_in_dir "$LIBCLANG_PATH"
  else
    if prefix=$("${LLVM_CONFIG_PATH:-llvm-config}" --prefix 2>/dev/null) && [[ -n "$prefix" ]]; then
      prefix=${prefix%%$'\n'*}
      _qsim_libclang_in_dir "$prefix/bin"
      _qsim_libclang_in_dir "$prefix/lib"
      _qsim_libclang_in_dir "$prefix/lib64"
    fi
    local -a path_dirs=()
    IFS=: read -r -a path_dirs <<<"${LD_LIBRARY_PATH:-}:${LIBRARY_PATH:-}"
    for dir in "${path_dirs[@]}"; do
      [[ -n "$dir" ]] && _qsim_libclang_in_dir "$dir"
    done
    for pattern in "${QSIM_CLANG_SYS_DIRS[@]}"; do
      for dir in ${QSIM_SYSROOT:-}$pattern; do
        [[ -d "$dir" ]] && _qsim_libclang_in_dir "$dir"
      done
    done
  fi
  ((${#_qsim_candidates[@]} > 0)) || return 1
  printf '%s\n' "${_qsim_candidates[0]}"
}

# Clang's builtin headers (stddef.h, …) for a Debian-layout libclang (/usr/lib/llvm-N/...):
# libclang without them loads, then fails to parse RocksDB's C header. A libclang elsewhere
# (LIBCLANG_PATH to a custom build) is taken as complete.
qsim_libclang_has_headers() {
  local lib real llvm
  lib=$1
  real=$(readlink -f "$lib" 2>/dev/null || printf '%s' "$lib")
  if [[ "$real" =~ ^(.*/llvm-[0-9]+)/lib/ ]]; then
    llvm=${BASH_REMATCH[1]}
    compgen -G "$llvm/lib/clang/*/include/stddef.h" >/dev/null
    return
  fi
  return 0
}

# Compiles the program on stdin with "$@" and runs it: a compiler that exits 0 without
# producing a working program (a stub, a wrapper missing its back end) does not count.
_qsim_compiles_and_runs() {
  local dir status
  dir=$(mktemp -d) || return 1
  if "$@" -o "$dir/probe" >/dev/null 2>&1 && [[ -x "$dir/probe" ]] && "$dir/probe" >/dev/null 2>&1; then
    status=0
  else
    status=1
  fi
  rm -rf "$dir"
  return $status
}

# The C compiler the cc crate runs, able to build against the C library's headers.
qsim_have_c_compiler() {
  local -a cc
  read -r -a cc <<<"${CC:-cc}"
  command -v "${cc[0]}" >/dev/null 2>&1 || return 1
  printf '#include <stdio.h>\nint main(void) { return puts("") < 0; }\n' \
    | _qsim_compiles_and_runs "${cc[@]}" -x c -
}

# The C++ compiler the cc crate runs, able to build against the C++ standard library.
qsim_have_cxx_compiler() {
  local -a cxx
  read -r -a cxx <<<"${CXX:-c++}"
  command -v "${cxx[0]}" >/dev/null 2>&1 || return 1
  printf '#include <string>\n#include <atomic>\nint main() { std::string s("x"); std::atomic<int> a{0}; return (int)s.size() - 1 + a.load(); }\n' \
    | _qsim_compiles_and_runs "${cxx[@]}" -std=c++17 -x c++ -
}

# Prints the Chromium reports/tests/integration/chromium.rs will start (CHROMIUM, else the first of its
# names on PATH) if that program answers --version as Chromium or Chrome; else returns 1.
qsim_find_chromium() {
  local bin="" name out
  if [[ -n "${CHROMIUM:-}" ]]; then
    bin=$CHROMIUM
  else
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
      if bin=$(command -v "$name" 2>/dev/null); then break; fi
      bin=""
    done
  fi
  [[ -n "$bin" && -x "$bin" ]] || return 1
  out=$(timeout 30 "$bin" --version 2>/dev/null) || return 1
  [[ "$out" == *Chromium* || "$out" == *Chrome* ]] || return 1
  printf '%s\n' "$bin"
}
