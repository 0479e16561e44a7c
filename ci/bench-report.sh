#!/usr/bin/env bash
# Report generation time and HTML size for a run of about 40 nodes and ten simulated minutes.
# With the simulator built (./qsim builds target/madsim/release/qsim), it first runs the reference
# scenario and measures the report of that real run; otherwise the benchmark synthesizes a run with
# the same shape and event mix. QSIM_REPORT_RUN=<run folder> measures any run folder instead.
# qs-reports does not link RocksDB, so no set-up is needed.
set -euo pipefail
cd "$(dirname "$0")/.."

qsim=target/madsim/release/qsim
if [[ -z "${QSIM_REPORT_RUN:-}" && -x "$qsim" ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  echo "== $qsim run scenarios/reference.toml --seed 1 --out $out" >&2
  # A run that fails its checkers still leaves a trace to report on (exit 1 or 3).
  "$qsim" run scenarios/reference.toml --seed 1 --out "$out" >&2 || echo "qsim exited $?; reporting on its output" >&2
  export QSIM_REPORT_RUN="$out"
fi
cargo bench --locked -p qs-reports --bench report_gen
