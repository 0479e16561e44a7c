#!/usr/bin/env bash
# Memory calibration (docs/performance.md, "Calibration"): a release qs-node on RocksDB under HTTP writes and
# memcached reads, RSS and accounted memory from /metrics once a second, on glibc malloc, glibc
# with MALLOC_ARENA_MAX=2, and jemalloc, beside the simulator's allocator factors.
# Builds two qs-node binaries — `--features jemalloc` (rust-rocksdb's jemalloc, replacing malloc
# process-wide) and the default (glibc), in that order so target/release/qs-node is left the
# default one — and keeps copies in target/calibration/ (cargo keeps both feature sets'
# artifacts side by side in target/, so rebuilding either is cheap).
# Extra arguments go to the benchmark: `--quick` (30 s per allocator), `--seconds N` (default 90).
source "$(dirname "$0")/setup.sh"
out="$PWD/target/calibration"
mkdir -p "$out"
jemalloc_args=()
if cargo build --locked --release -p qs-node --bin qs-node --features jemalloc; then
  cp target/release/qs-node "$out/qs-node-jemalloc"
  jemalloc_args=(--jemalloc "$out/qs-node-jemalloc")
else
  echo "qsim: building qs-node with --features jemalloc failed (see above); running glibc only" >&2
fi
cargo build --locked --release -p qs-node --bin qs-node
cp target/release/qs-node "$out/qs-node-glibc"
# The unprefixed jemalloc build defines malloc in the binary; a glibc build imports it.
if command -v nm >/dev/null 2>&1; then
  for bin in "$out"/qs-node-*; do
    echo "$(basename "$bin"): malloc $(nm "$bin" | awk '$NF == "malloc" {print ($1 == "U") ? "from the C library" : "defined in the binary (jemalloc)"}')"
  done
fi
cargo bench --locked -p qs-sim --bench memory_calibration -- --glibc "$out/qs-node-glibc" "${jemalloc_args[@]}" "$@"
