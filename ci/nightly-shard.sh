#!/usr/bin/env bash
# One shard of the nightly sweep (ci/nightly.toml): ci/nightly-shard.sh INDEX COUNT OUT_DIR.
# INDEX is 1-based; COUNT must be the definition's `shards`. Every launcher calls this: the
# GitHub Actions workflow (one matrix job per shard), the Kubernetes Indexed Job (one pod per
# shard, JOB_COMPLETION_INDEX + 1), and ci/tests' checks. Runs that fail do not fail the shard —
# the merge judges them (ci/nightly-merge.sh); the exit status is non-zero only when the shard
# could not run (bad arguments or definition, no simulator).
# QSIM_BIN: a prebuilt qsim to use (the container image's); otherwise ./qsim builds it.
# NIGHTLY_DEFINITION: another definition (tests use a small one); default ci/nightly.toml.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: ci/nightly-shard.sh INDEX COUNT OUT_DIR  (INDEX 1..COUNT; COUNT = shards in ci/nightly.toml)" >&2
  exit 2
fi
index=$1 count=$2 out=$3
cd "$(dirname "$0")/.."
definition=${NIGHTLY_DEFINITION:-ci/nightly.toml}
if [ -n "${QSIM_BIN:-}" ]; then
  qsim=("$QSIM_BIN")
else
  qsim=(./qsim)
fi
set +e
"${qsim[@]}" nightly "$definition" --shard "$index/$count" --out "$out"
status=$?
set -e
# 0: every run as expected; 1: some runs failed (judged at the merge). Anything else: the shard
# itself could not run.
if [ "$status" -le 1 ]; then exit 0; fi
exit "$status"
