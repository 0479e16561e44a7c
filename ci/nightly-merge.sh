#!/usr/bin/env bash
# Merges the shards of the nightly sweep: ci/nightly-merge.sh OUT_DIR SHARD_DIR...
# Writes OUT_DIR/summary.json, junit.xml and report.html over every run, with the failures
# grouped by signature. Exit status: 0 when every failure group is known (listed in the
# definition's known-failures file), 1 when a group is new, 2 when the shards do not make one
# sweep (one missing, given twice, or cut from another sweep).
# The merged summary is stamped as the night of NIGHT_DATE (YYYY-MM-DD; default today, UTC) and
# the build its runs ran on: what `qsim history` reads (ci/nightly-history.sh).
# QSIM_BIN and NIGHTLY_DEFINITION as for ci/nightly-shard.sh.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: ci/nightly-merge.sh OUT_DIR SHARD_DIR..." >&2
  exit 2
fi
out=$1
shift
shards=()
for dir in "$@"; do
  # A shard that produced nothing is a sweep that is not whole (exit 2), not a new failure.
  [ -d "$dir" ] || { echo "ci/nightly-merge.sh: $dir: no such shard folder" >&2; exit 2; }
  shards+=("$(cd "$dir" && pwd)")
done
out=$(mkdir -p "$out" && cd "$out" && pwd)
cd "$(dirname "$0")/.."
definition=${NIGHTLY_DEFINITION:-ci/nightly.toml}
known=$(python3 -c 'import sys,tomllib,os; d=tomllib.load(open(sys.argv[1],"rb")); k=d.get("known"); print(os.path.join(os.path.dirname(sys.argv[1]), k) if k else "")' "$definition")
if [ -n "${QSIM_BIN:-}" ]; then
  qsim=("$QSIM_BIN")
else
  qsim=(./qsim)
fi
args=(merge "${shards[@]}" --out "$out")
if [ -n "$known" ]; then args+=(--known "$known"); fi
if [ -n "${NIGHT_DATE:-}" ]; then args+=(--date "$NIGHT_DATE"); fi
exec "${qsim[@]}" "${args[@]}"
