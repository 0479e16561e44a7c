#!/usr/bin/env bash
# How a run's cost grows with the tree: the scale scenario at 500, 2 000, 5 000 and 10 000 nodes.
# Extra arguments go to the benchmark (e.g. `--nodes 500,2000` or `--seed 3`).
source "$(dirname "$0")/setup.sh"
RUSTFLAGS="--cfg madsim" cargo bench --locked -p qs-sim --bench scale --target-dir target/madsim -- "$@"
