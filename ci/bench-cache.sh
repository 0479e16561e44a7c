#!/usr/bin/env bash
# Cache calibration (docs/performance.md, "Calibration"): the simulator's cache models beside real RocksDB
# (direct reads, block cache tickers, one cache size per row; beside the RocksDB-shaped model
# given the same bytes) and real LMDB (cold page cache, with and without read-ahead: major
# faults), on the same keys and Zipf get sequence. Prints figures, marks rows past the stated
# tolerance; asserts nothing. About 11 minutes (most of it RocksDB re-reading its index block
# from the device below the index cliff). Extra arguments go to the benchmark: `--quick` (a
# quarter of the keys and gets), `--scale F`. Uses util-linux's `fincore` for LMDB's page-cache
# bytes when it is installed.
source "$(dirname "$0")/setup.sh"
cargo bench --locked -p qs-sim --bench cache_calibration -- "$@"
