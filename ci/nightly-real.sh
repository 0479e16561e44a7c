#!/usr/bin/env bash
# The nightly's real-process runs (ci/nightly.toml, `[real]`): ci/nightly-real.sh OUT_DIR
# [FIRST_SEEDS]. Each (scenario, engine) pair over the definition's real seeds, by `./qsim real`,
# one pair after another (real runs take wall-clock time and must not share the cores with
# another run). A pair's seeds are judged against the scenario's `expect`; the script exits 1
# when any pair had a run not as expected, 2 when it could not run at all. FIRST_SEEDS cuts
# every pair to its first seeds (the test command's smoke run).
# QSIM_BIN: a prebuilt simulator qsim to read the definition with; otherwise ./qsim builds it.
# NIGHTLY_DEFINITION: another definition; default ci/nightly.toml.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: ci/nightly-real.sh OUT_DIR [FIRST_SEEDS]" >&2
  exit 2
fi
out=$1
cd "$(dirname "$0")/.."
definition=${NIGHTLY_DEFINITION:-ci/nightly.toml}
if [ -n "${QSIM_BIN:-}" ]; then
  qsim=("$QSIM_BIN")
else
  qsim=(./qsim)
fi
first=()
if [ $# -eq 2 ]; then first=(--first-seeds "$2"); fi
commands=$("${qsim[@]}" nightly "$definition" --real-commands ${first[@]+"${first[@]}"})
if [ -z "$commands" ]; then
  echo "ci/nightly-real.sh: $definition has no [real] runs" >&2
  exit 0
fi
mkdir -p "$out"
failed=0
while IFS=$'\t' read -r -a args; do
  scenario=$(basename "${args[1]}" .toml)
  engine=${args[3]}
  echo "nightly-real: ${args[*]}" >&2
  set +e
  ./qsim "${args[@]}" --out "$out/$scenario-$engine" </dev/null >"$out/$scenario-$engine.log" 2>&1
  status=$?
  set -e
  tail -n 1 "$out/$scenario-$engine.log" >&2
  case $status in
    0) ;;
    1 | 3 | 4) failed=1 ;;
    *) echo "nightly-real: ./qsim ${args[*]} could not run (exit $status); see $out/$scenario-$engine.log" >&2; exit 2 ;;
  esac
done <<<"$commands"
exit "$failed"
