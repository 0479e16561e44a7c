#!/usr/bin/env bash
# The write-amplification benchmark (docs/performance.md): it
# applies the same workloads to LMDB and RocksDB and prints what each writes to disk.
# Extra arguments go to the benchmark (e.g. `--scale 0.2`).
source "$(dirname "$0")/setup.sh"
cargo bench --locked -p qs-node --bench write_amp -- "$@"
