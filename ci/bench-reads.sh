#!/usr/bin/env bash
# Read-path benchmark: qs-node's memcached port beside a real memcached, same keys, same client.
# Installs memcached with apt-get when it is missing and this user can; otherwise says how.
# Extra arguments go to the benchmark (e.g. `--requests 5000`, `--seconds 1 --rounds 1` for a
# quicker run, `--only "64 conns"` for some of the concurrent rows; the list is in
# node/benches/read_path/main.rs).
source "$(dirname "$0")/setup.sh"
if ! command -v memcached >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "qsim setup: installing memcached (the benchmark's reference server)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq memcached >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq memcached >/dev/null; }
  else
    echo "qsim setup: the read benchmark needs memcached (Debian: sudo apt-get install memcached)" >&2
    exit 1
  fi
fi
cargo bench --locked -p qs-node --bench read_path -- "$@"
