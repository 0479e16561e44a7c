#!/usr/bin/env bash
# The test command (README, CI): builds everything and runs every test.
#   - the workspace's tests on the normal (tokio) build;
#   - the node built with `--cfg madsim`, the simulator's build (in its own target directory so
#     the two builds do not invalidate each other): its unit tests, and the `simulated` module of
#     its integration-test binary (tests/integration/simulated.rs), which runs unchanged nodes as
#     madsim nodes and checks that one seed gives one run.
#   - qs-reports' tests include the `chromium` module (tests/integration/chromium.rs), which opens
#     reports in headless Chromium.
#   - real processes (`./qsim real`): real-smoke on three seeds and a planted bug failing real
#     as it fails simulated — needs root (or unprivileged user namespaces) for the run's
#     network namespace.
# Set-up (system packages including Chromium and real runs' util-linux, iproute2 and nftables,
# the once-per-machine RocksDB build) happens first, on demand.
# Strict from the first line: a failing set-up or launcher check fails the test command (they run
# before setup.sh, which sets the same options for everything after it).
set -euo pipefail
export QSIM_WITH_CHROMIUM=1
export QSIM_WITH_REAL=1
# Each step says its name when it starts and how long the one before took (the CI budget is
# spent here: the figures say where).
step() {
  if [[ -n "${step_name:-}" ]]; then
    echo "   (${step_name%% (*}: $((SECONDS - step_started)) s; $SECONDS s in all)" >&2
  fi
  step_name=$1
  step_started=$SECONDS
  [[ -z "$1" ]] || echo "== $1" >&2
}
step "set-up checks (ci/tests/detect.sh: libclang, compilers, Chromium, the linters' virtualenv, against fakes)"
"$(dirname "$0")/tests/detect.sh"
step "nightly launchers (ci/tests/launchers.sh: actionlint, kubernetes-validate, hadolint, ShellCheck, the glue)"
"$(dirname "$0")/tests/launchers.sh"
step "set-up (ci/setup.sh: system packages, RocksDB built once per machine)"
# shellcheck source=ci/setup.sh
source "$(dirname "$0")/setup.sh"

if cargo fmt --version >/dev/null 2>&1; then
  step "rustfmt (rustfmt.toml: width 120)"
  cargo fmt --all --check
else
  step "rustfmt is not installed for this toolchain; skipping the format check"
fi

if cargo clippy --version >/dev/null 2>&1; then
  step "clippy"
  cargo clippy --workspace --all-targets --locked -- -D warnings
  RUSTFLAGS="--cfg madsim" cargo clippy --locked -p qs-node -p qs-sim --all-targets --target-dir target/madsim -- -D warnings
else
  step "clippy is not installed for this toolchain; skipping lints"
fi

step "doc links (rustdoc, both builds: a broken or private link fails)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --lib --no-deps --document-private-items --locked
RUSTDOCFLAGS="-D warnings" RUSTFLAGS="--cfg madsim" cargo doc -p qs-node -p qs-sim --lib --no-deps \
  --document-private-items --locked --target-dir target/madsim

step "tests (tokio build)"
cargo test --workspace --locked

step "node under --cfg madsim (the simulator's build)"
RUSTFLAGS="--cfg madsim" cargo test --locked -p qs-node --lib --target-dir target/madsim
# The node's one integration-test binary, filtered to its madsim-only modules (`simulated`,
# `simulated_tls`, `simulated_raft`; its other madsim-buildable modules ran above on the tokio
# build): a filter after `--` would also filter the unit tests, hence two commands.
RUSTFLAGS="--cfg madsim" cargo test --locked -p qs-node --test integration --target-dir target/madsim -- \
  simulated:: simulated_tls:: simulated_raft::

# Release, as sweeps and `./qsim` run the simulator (overflow checks stay on: see Cargo.toml's
# release profile): its tests run whole seeded runs, ten times slower unoptimised (the
# integration binary took 980 s in debug against 93 s in release on this project's 2-core
# machine), and the build shares its dependencies with the `./qsim` build the nightly smoke
# below uses. `debug_assert!`s do not run here; the node's run in its own tests above.
step "the simulator (every fault family, planted bugs, determinism on memory, LMDB and RocksDB, data centers, reports)"
RUSTFLAGS="--cfg madsim" cargo test --locked --release -p qs-sim --target-dir target/madsim

# The real nightly definition on its first seed, every scenario × engine pair, judged as the
# merge judges a night (known failures pass, a new failure group fails): a pair that fails on its
# first seed cannot land. One seed, not two: the nightly sweeps a hundred, and each seed here
# costs about 3.5 minutes of an idle 2-core machine (158 pairs in 213 s, measured in November
# 2026), where CI aims to stay well under 45 minutes in all.
step "the nightly definition, every pair on its first seed (qsim nightly --first-seeds 1)"
smoke=$(mktemp -d)
trap 'rm -rf "$smoke"' EXIT
./qsim nightly ci/nightly.toml --first-seeds 1 --out "$smoke/nightly" >"$smoke/nightly.log" 2>&1 || {
  grep -E "^(group|results|  )" "$smoke/nightly.log" >&2 || tail -40 "$smoke/nightly.log" >&2
  echo "the nightly definition's first seeds did not end as expected (new failure groups above)" >&2
  exit 1
}
grep -E "^results" "$smoke/nightly.log" >&2

# `./qsim run` of a memory or LMDB scenario builds the simulator without RocksDB (so a first run
# on a fresh machine does not wait for RocksDB's C++): it must run the same runs, and refuse a
# RocksDB one with a clear error. The full build above ran the nightly; this builds the other.
step "the simulator without RocksDB (./qsim's memory and LMDB runs): the same traces"
digest() { grep -oE 'digest [0-9a-f]{64}' <<<"$1"; }
full=$(target/madsim/release/qsim run scenarios/quickstart-lmdb.toml --seed 2 --no-report --out "$smoke/full")
lite=$(QSIM_ROCKSDB=never ./qsim run scenarios/quickstart-lmdb.toml --seed 2 --no-report --out "$smoke/lite" 2>/dev/null)
if [[ -z "$(digest "$full")" || "$(digest "$full")" != "$(digest "$lite")" ]]; then
  echo "the build without RocksDB ran quickstart-lmdb seed 2 differently: $(digest "$full") against $(digest "$lite")" >&2
  exit 1
fi
if refused=$(target/madsim/release/qsim run scenarios/rocksdb.toml --seed 1 --no-report --out "$smoke/refused" 2>&1) \
  || [[ "$refused" != *"built without RocksDB"* ]]; then
  echo "the build without RocksDB did not refuse a RocksDB run clearly: $refused" >&2
  exit 1
fi
echo "   $(digest "$full") in both builds; a RocksDB run refused" >&2

# Real processes: the same scenario files and checkers on real qs-node processes (not
# deterministic; see docs/sweeps.md for what they can and cannot judge). The nightly's `[real]`
# runs the larger set.
step "real processes (./qsim real): real-smoke on seeds 1..=3; bug-replay fails real by the sequence checker"
if ! ./qsim real scenarios/real-smoke.toml --seeds 1..=3 --no-report --out "$smoke/real" >"$smoke/real.log" 2>&1; then
  tail -60 "$smoke/real.log" >&2
  echo "real-smoke did not pass on real processes" >&2
  exit 1
fi
grep -E "^real runs" "$smoke/real.log" >&2
status=0
./qsim real scenarios/bug-replay.toml --seed 1 --no-report --out "$smoke/real-bug" >"$smoke/real-bug.log" 2>&1 || status=$?
if [[ $status -ne 1 ]] || ! grep -qE "^sequence +FAIL" "$smoke/real-bug.log"; then
  tail -40 "$smoke/real-bug.log" >&2
  echo "bug-replay on real processes: expected exit 1 with a sequence violation, got exit $status" >&2
  exit 1
fi
echo "   bug-replay: $(grep -E '^sequence' "$smoke/real-bug.log")" >&2
# Everything a real run starts dies with it, also when only qsim itself is signalled.
timeout -s TERM 12 target/real/release/qsim real scenarios/quickstart.toml --seed 1 --keep "$smoke/interrupted" \
  --out "$smoke/interrupted-out" >"$smoke/interrupted.log" 2>&1 || true
sleep 2
if pgrep -f "$smoke/interrupted" >/dev/null; then
  pgrep -af "$smoke/interrupted" >&2
  echo "a real run signalled after 12 s left the processes above running" >&2
  exit 1
fi
echo "   a real run signalled mid-run: every node process gone" >&2
step ""
