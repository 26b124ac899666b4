#!/usr/bin/env bash
# Side by side with the Rust peers (issue 19, section 1). Installs protoc (Debian's
# protobuf-compiler, which rust-control-plane's data-plane-api needs) when missing, builds
# the harness (its own workspace, into the root target directory) and runs it.
#
#   benches/side-by-side/run.sh [client|server|fanout]... [--iterations N]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_INCREMENTAL=0
if ! command -v protoc >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq protobuf-compiler >/dev/null
  fi
fi
cargo build --release --manifest-path benches/side-by-side/Cargo.toml --target-dir target
echo "load before: $(uptime)"
target/release/side-by-side "$@"
echo "load after: $(uptime)"
