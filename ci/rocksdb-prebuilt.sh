# Source this file (bash). It makes every cargo build link one prebuilt static RocksDB instead
# of compiling RocksDB's C++ again (about 11 minutes on 2 cores, and again for every distinct
# RUSTFLAGS, such as the `--cfg madsim` build).
#
# The library is built once per machine, with `cargo build --release -p librocksdb-sys`, into a
# cache outside the clone keyed by the librocksdb-sys version in Cargo.lock:
#     ${QSIM_CACHE_DIR:-~/.cache/qsim}/rocksdb-<version>-snappy[-crc]/lib/{librocksdb.a,libsnappy.a}
# then exported through the variables librocksdb-sys honours (ROCKSDB_LIB_DIR, ROCKSDB_STATIC,
# SNAPPY_LIB_DIR, SNAPPY_STATIC). Set QSIM_ROCKSDB_PREBUILT=0 to skip all of this.
#
# On an x86-64 CPU with SSE4.2 and PCLMULQDQ (every one since 2010) the C++ is compiled with
# both (`-msse4.2 -mpclmul`, into a folder whose name ends in `-crc`): RocksDB chooses its
# CRC32C, which checksums every WAL record and every block it writes or reads, at compile time,
# and librocksdb-sys passes neither flag unless Rust's own target has them, which x86-64's
# default does not. Without them RocksDB falls back to a table-driven CRC, 4 % of a simulated
# RocksDB run. The archive then needs those instructions, hence its own folder.

qsim_rocksdb_prebuilt() {
  local root version cache lib build
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if [[ "${QSIM_ROCKSDB_PREBUILT:-1}" == 0 ]]; then
    return 0
  fi
  version=$(awk '/^name = "librocksdb-sys"/{getline; gsub(/[" ]/, "", $0); sub(/^version=/, "", $0); print; exit}' "$root/Cargo.lock")
  if [[ -z "$version" ]]; then
    echo "qsim setup: cannot find librocksdb-sys in $root/Cargo.lock" >&2
    return 1
  fi
  local cxxflags="" flavour=""
  if [[ $(uname -m) == x86_64 ]] && grep -qw sse4_2 /proc/cpuinfo 2>/dev/null && grep -qw pclmulqdq /proc/cpuinfo; then
    cxxflags="-msse4.2 -mpclmul"
    flavour="-crc"
  fi
  cache="${QSIM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/qsim}/rocksdb-${version}-snappy${flavour}"
  lib="$cache/lib"
  mkdir -p "$cache"
  (
    # One builder at a time per machine; the others wait and then reuse its result.
    flock 9
    if [[ -f "$lib/librocksdb.a" && -f "$lib/libsnappy.a" ]]; then
      exit 0
    fi
    build="$cache/build"
    echo "qsim setup: building RocksDB ${version} once for this machine into $cache" >&2
    echo "qsim setup: (about 15 minutes on an idle 2-core machine; later builds link it in seconds)" >&2
    local start=$SECONDS
    # No debug info in the C++ (it would triple the archive and slow the build); -O3 as usual.
    env -u ROCKSDB_LIB_DIR -u ROCKSDB_STATIC -u SNAPPY_LIB_DIR -u SNAPPY_STATIC -u RUSTFLAGS \
      CARGO_PROFILE_RELEASE_DEBUG=false CXXFLAGS="${CXXFLAGS:-} $cxxflags" \
      cargo build --manifest-path "$root/Cargo.toml" --locked --release -p librocksdb-sys \
      --target-dir "$build" >&2
    local out
    out=$(dirname "$(ls -t "$build"/release/build/librocksdb-sys-*/out/librocksdb.a | head -n 1)")
    # The hardware CRC is compiled in only when the flags reached the compiler: its three-way
    # PCLMUL routine is in the archive exactly then.
    # (No `grep -q`: it stops reading at the first match, and under `pipefail` the SIGPIPE
    # that nm then gets fails the test.)
    if [[ -n "$cxxflags" ]] && ! nm -C "$out/librocksdb.a" 2>/dev/null | grep "crc32c_3way" >/dev/null; then
      echo "qsim setup: RocksDB was built without its hardware CRC32C although $cxxflags was asked for" >&2
      exit 1
    fi
    mkdir -p "$lib.tmp"
    cp "$out/librocksdb.a" "$out/libsnappy.a" "$lib.tmp/"
    rm -rf "$lib" && mv "$lib.tmp" "$lib"
    rm -rf "$build"
    echo "qsim setup: RocksDB ${version} built in $((SECONDS - start))s" >&2
  ) 9>"$cache.lock" || return 1
  export ROCKSDB_LIB_DIR="$lib" ROCKSDB_STATIC=1 SNAPPY_LIB_DIR="$lib" SNAPPY_STATIC=1
}
