#!/usr/bin/env bash
# A nightly history made from past commits: ci/nightly-history-demo.sh OUT COMMIT...
# For each commit, oldest first: its qsim is built (a git worktree under OUT/worktrees, one
# shared target directory), the small nightly definition ci/nightly-demo.toml runs its shards
# there with that build on that commit's scenarios, this tree's qsim merges them stamped with
# the commit's date, and ci/nightly-history.sh files the night into OUT/history — whose
# index.html is then the history across those commits. docs/sweeps.md shows ten nights made so.
# Each night takes a build (a minute or two once the first is done) and its runs (about a
# minute on 2 cores). DEMO_DEFINITION: another definition.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: ci/nightly-history-demo.sh OUT COMMIT...  (oldest first)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
demo=$(mkdir -p "$1" && cd "$1" && pwd)
shift
definition=$(cd "$(dirname "${DEMO_DEFINITION:-$root/ci/nightly-demo.toml}")" && pwd)/$(basename "${DEMO_DEFINITION:-ci/nightly-demo.toml}")
cd "$root"
# shellcheck source=ci/setup.sh
source ci/setup.sh
qsim=${QSIM_BIN:-}
if [ -z "$qsim" ]; then
  ./qsim list >/dev/null
  qsim=$root/target/madsim/release/qsim
fi
shards=$(python3 -c 'import sys,tomllib; print(tomllib.load(open(sys.argv[1],"rb"))["shards"])' "$definition")
n=0
for commit in "$@"; do
  n=$((n + 1))
  sha=$(git rev-parse --short=12 "$commit^{commit}")
  tag=$(printf '%02d-%s' "$n" "$sha")
  tree=$demo/worktrees/$sha
  [ -d "$tree" ] || git worktree add --force --detach "$tree" "$sha" >/dev/null
  echo "== $tag: building its qsim" >&2
  (cd "$tree" && RUSTFLAGS="--cfg madsim" cargo build --locked --release -p qs-sim --bin qsim \
    --target-dir "$demo/target" >"$demo/build-$tag.log" 2>&1) || {
    echo "ci/nightly-history-demo.sh: $sha does not build; skipped (see $demo/build-$tag.log)" >&2
    continue
  }
  cp "$demo/target/release/qsim" "$demo/qsim-$sha"
  shard_dirs=()
  for ((i = 1; i <= shards; i++)); do
    echo "== $tag: shard $i of $shards" >&2
    rm -rf "$demo/shards/$tag/shard-$i"
    # 1: some runs failed, which the merge judges; anything else: the shard could not run.
    status=0
    (cd "$tree" && "$demo/qsim-$sha" nightly "$definition" --shard "$i/$shards" --out "$demo/shards/$tag/shard-$i" \
      >"$demo/shards-$tag-$i.log" 2>&1) || status=$?
    if [ "$status" -gt 1 ]; then
      echo "ci/nightly-history-demo.sh: $sha shard $i could not run (exit $status; see $demo/shards-$tag-$i.log)" >&2
      exit 1
    fi
    shard_dirs+=("$demo/shards/$tag/shard-$i")
  done
  rm -rf "$demo/merged/$tag"
  "$qsim" merge "${shard_dirs[@]}" --out "$demo/merged/$tag" --date "$(git show -s --format=%cs "$sha")" >&2 || true
  QSIM_BIN=$qsim ci/nightly-history.sh "$demo/history" "$demo/merged/$tag"
done
