#!/usr/bin/env bash
# Cache calibration (README "Calibration"): the simulator's page-cache model beside real RocksDB
# (block cache tickers, one cache size per row) and real LMDB (cold page cache: major faults), on
# the same keys and Zipf get sequence. Prints figures with a stated tolerance; asserts nothing.
# Extra arguments go to the benchmark: `--quick` (a quarter of the keys and gets), `--scale F`.
# Uses util-linux's `fincore` for LMDB's page-cache bytes when it is installed.
source "$(dirname "$0")/setup.sh"
cargo bench --locked -p qs-sim --bench cache_calibration -- "$@"
