#!/usr/bin/env bash
# Files one merged night into the nightly history and redraws its page:
#   ci/nightly-history.sh HISTORY_DIR MERGED_DIR
# MERGED_DIR is what ci/nightly-merge.sh wrote (its summary.json, stamped with the night's date
# and build). Its summary.json is kept gzipped as HISTORY_DIR/nights/<date>-<commit>/summary.json.gz
# (a night merged again replaces itself), the oldest nights beyond NIGHTLY_HISTORY_KEEP (default
# 120) are removed, and `qsim history` writes HISTORY_DIR/index.html and history.json over the
# nights kept. Only summary.json is kept per night: the run folders stay with the night's own
# artifacts. Exit 0 when the page is written; 2 for a summary that is not a stamped night.
# QSIM_BIN as for ci/nightly-shard.sh. Called by the GitHub workflow's history job and the
# Kubernetes merge Job; docs/sweeps.md, "History across nights".
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: ci/nightly-history.sh HISTORY_DIR MERGED_DIR" >&2
  exit 2
fi
history=$1 merged=$2
keep=${NIGHTLY_HISTORY_KEEP:-120}
case $keep in
  '' | *[!0-9]* | 0) echo "ci/nightly-history.sh: NIGHTLY_HISTORY_KEEP=$keep is not a count of nights" >&2; exit 2 ;;
esac
summary=$merged/summary.json
[ -f "$summary" ] || { echo "ci/nightly-history.sh: $summary: no such file (run ci/nightly-merge.sh first)" >&2; exit 2; }
# The night's folder name from its stamp; a summary without one is refused here, naming it.
night=$(python3 - "$summary" <<'EOF'
import json, re, sys
path = sys.argv[1]
try:
    night = json.load(open(path)).get("night")
except ValueError as e:
    sys.exit(f"ci/nightly-history.sh: {path}: not JSON: {e}")
if not night or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", night.get("date") or ""):
    sys.exit(f"ci/nightly-history.sh: {path}: not stamped with a night's date (merge it with a qsim that stamps nights)")
commit = re.search(r"\(([0-9A-Za-z._+-]+)\)$", night.get("build") or "")
print(f"{night['date']}-{commit.group(1) if commit else 'unknown'}")
EOF
) || exit 2
history=$(mkdir -p "$history" && cd "$history" && pwd)
mkdir -p "$history/nights/$night"
# Gzipped: a night's summary compresses about 18 times (1.1 MB of JSON for 900 runs, 62 KB).
gzip -9 -c "$summary" >"$history/nights/$night/summary.json.gz.tmp"
mv "$history/nights/$night/summary.json.gz.tmp" "$history/nights/$night/summary.json.gz"
echo "ci/nightly-history.sh: filed the night $night" >&2
# Oldest first by name (date, then commit): keep the newest $keep.
mapfile -t nights < <(find "$history/nights" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | LC_ALL=C sort)
excess=$((${#nights[@]} - keep))
for ((i = 0; i < excess; i++)); do
  echo "ci/nightly-history.sh: removing ${nights[i]} (beyond the newest $keep nights)" >&2
  rm -rf "${history:?}/nights/${nights[i]}"
done
cd "$(dirname "$0")/.."
if [ -n "${QSIM_BIN:-}" ]; then
  qsim=("$QSIM_BIN")
else
  qsim=(./qsim)
fi
exec "${qsim[@]}" history "$history/nights" --out "$history"
