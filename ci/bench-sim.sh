#!/usr/bin/env bash
# Simulator speed on the reference scenario: simulated seconds per wall second, seeds per hour.
# Extra arguments go to the benchmark (e.g. `--seeds 5`).
source "$(dirname "$0")/setup.sh"
RUSTFLAGS="--cfg madsim" cargo bench --locked -p qs-sim --bench sim_speed --target-dir target/madsim -- "$@"
