#!/usr/bin/env bash
# qsim: regenerates src/protos/ — prost's code for proto/eraftpb.proto plus protobuf-build's
# accessor wrapper — as the published crate's build.rs did at every build with `prost-codec`,
# which needs `protoc`. The generated files are checked in, so that building qsim does not.
#
#   ./regenerate.sh           rewrite src/protos/ (needs protoc on PATH, or PROTOC; and crates.io)
#   ./regenerate.sh --check   regenerate into a scratch folder and diff it against src/protos/
#
# The generator is the published crate's own: its build.rs's `Builder` calls, with the
# generator versions this crate resolved to when it generated at build time (protobuf-build
# 0.14.1, prost-build 0.11.9); only the output folder differs. Generated with protoc 3.21.12.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
command -v "${PROTOC:-protoc}" >/dev/null || { echo "regenerate.sh: no protoc (install protobuf-compiler, or set PROTOC)" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/gen/src"
cat >"$scratch/gen/Cargo.toml" <<'EOF'
[package]
name = "raft-proto-codegen"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[build-dependencies]
protobuf-build = { version = "=0.14.1", default-features = false, features = ["prost-codec"] }
prost-build = "=0.11.9"
EOF
echo 'fn main() {}' >"$scratch/gen/src/main.rs"
cat >"$scratch/gen/build.rs" <<'EOF'
// The published raft-proto 0.7.0's build.rs, writing to RAFT_PROTO_OUT.
use protobuf_build::Builder;

fn main() {
    let base = std::env::var("RAFT_PROTO_DIR").unwrap();
    Builder::new()
        .search_dir_for_protos(&format!("{}/proto", base))
        .includes(&[format!("{}/include", base), format!("{}/proto", base)])
        .include_google_protos()
        .out_dir(std::env::var("RAFT_PROTO_OUT").unwrap())
        .generate()
}
EOF
RAFT_PROTO_DIR="$here" RAFT_PROTO_OUT="$scratch/out" \
  cargo build --quiet --manifest-path "$scratch/gen/Cargo.toml" --target-dir "$scratch/target"

if [[ $check == 1 ]]; then
  diff -ru "$scratch/out" "$here/src/protos" && echo "src/protos/ is what the generator writes"
else
  rm -rf "$here/src/protos"
  cp -r "$scratch/out" "$here/src/protos"
  echo "wrote $here/src/protos: $(cd "$here/src/protos" && echo *)"
fi
