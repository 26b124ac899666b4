#!/usr/bin/env bash
# The go peers (sourced by tests/interop/run.sh; also runs on its own from the
# repository root once run.sh's binaries are built: bash tests/interop/go/run.sh).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/../../.."
  # shellcheck source=tests/interop/lib.sh
  source tests/interop/lib.sh
  standalone_env
fi

# grpc-go 1.85.0 and go-control-plane 0.14.0 (go.mod, go.sum): downloaded through the Go
# module proxy and built once into $WORK/go/bin; no Go toolchain is a loud skip.
if command -v go >/dev/null; then
  step "Go peers: download and build (tests/interop/go, grpc-go and go-control-plane)"
  GO_BIN=$PWD/$WORK/go/bin
  mkdir -p "$GO_BIN"
  (cd tests/interop/go && timeout 600 go mod download && timeout 900 go build -o "$GO_BIN" ./cmd/...)
  # shellcheck source=tests/interop/go/grpc_go.sh
  source tests/interop/go/grpc_go.sh
  # shellcheck source=tests/interop/go/go_control_plane.sh
  source tests/interop/go/go_control_plane.sh
  # shellcheck source=tests/interop/go/extras.sh
  source tests/interop/go/extras.sh
else
  loud_skip "go not found: the grpc-go and go-control-plane interop tests did not run"
fi
