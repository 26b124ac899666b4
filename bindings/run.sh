#!/usr/bin/env bash
# The language bindings: builds the native library once, then runs each package's tests
# against the real xDS implementation of its language, each bounded in time. Installs what
# it needs (a venv, npm packages, Go modules, Maven artifacts); a missing toolchain or a
# failed install fails the run, loudly: never a silent skip.
set -euo pipefail
cd "$(dirname "$0")"
bindings=$PWD
repo=$(cd .. && pwd)
export CARGO_INCREMENTAL=0
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
export CARGO_TERM_COLOR=never
profile=debug

step() { printf '\n=== bindings: %s ===\n' "$*"; }
die() {
  printf '\n!!! BINDINGS FAILED: %s !!!\n' "$*" >&2
  exit 1
}
need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is not installed ($2)"
}
# bounded SECONDS WHAT COMMAND...: runs COMMAND, failing loudly on error or timeout.
bounded() {
  local seconds=$1 what=$2
  shift 2
  local status=0
  timeout --kill-after=10 "$seconds" "$@" || status=$?
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    die "$what timed out after ${seconds}s"
  elif [ "$status" != 0 ]; then
    die "$what failed (exit $status)"
  fi
}

need cargo "the Rust toolchain builds the native library"

step "cargo fmt --check, clippy (warnings denied)"
bounded 60 "cargo fmt" cargo fmt --all -- --check
bounded 900 "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings

step "native library (built once, $profile), the API's and the C ABI's tests (incl. the header's freshness), docs"
bounded 900 "cargo build" cargo build -p xds-sansio-bindings -p xds-sansio-ffi -p xds-sansio-jni
bounded 600 "cargo test" cargo test -p xds-sansio-bindings -p xds-sansio-ffi
RUSTDOCFLAGS="-D warnings" bounded 300 "cargo doc" cargo doc --no-deps -q -p xds-sansio-bindings -p xds-sansio-ffi
libdir=$CARGO_TARGET_DIR/$profile

step "Python: the wheel (maturin, PyO3), pytest against grpcio's xDS client"
need python3 "the Python package"
venv=$bindings/python/.venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" || die "cannot create $venv"
bounded 600 "pip install (maturin, pytest, mypy, grpcio, xds-protos)" \
  "$venv/bin/pip" install -q "maturin==1.9.6" "pytest==8.4.2" "mypy==1.18.2" "grpcio==1.85.1" "xds-protos==1.85.0"
(
  export PATH=$venv/bin:$PATH MATURIN_PEP517_ARGS="--profile dev"
  bounded 900 "pip install ./python" pip install -q --no-build-isolation --force-reinstall --no-deps ./python
  cd python
  bounded 300 "mypy --strict (the package's types)" python -m mypy --strict python/xds_sansio
  bounded 300 "pytest" python -m pytest -q tests
)

step "Go: gofmt, go vet, go test against grpc-go's xDS client and a go-control-plane conversation"
need go "the Go package (cgo)"
(
  cd go
  export CGO_ENABLED=1 CGO_LDFLAGS="-L$libdir"
  bounded 300 "go mod download" go mod download
  unformatted=$(gofmt -l .)
  [ -z "$unformatted" ] || die "gofmt would change: $unformatted"
  bounded 300 "go vet" go vet ./...
  bounded 300 "go test" go test -count=1 ./...
)

step "JavaScript: the napi-rs addon, node:test against @grpc/grpc-js-xds"
need node "the node package"
need npm "the node package"
(
  cd js
  bounded 300 "npm ci" npm ci --no-audit --no-fund
  bounded 900 "napi build" npm run build:debug
  bounded 300 "node --test" npm test
)

step "Java: the jar over JNI, JUnit 5 against grpc-java's xDS client"
need java "the Java package (JDK 17)"
need mvn "the Java package (Maven)"
(
  cd java
  # Resolves from Maven Central (every version pinned in pom.xml), builds the jar and runs
  # the tests with the JNI library of this build.
  bounded 900 "mvn package" mvn -q -B package "-Dxds.sansio.libdir=$libdir"
  grep -h "Tests run" target/surefire-reports/*.txt
)

printf '\nbindings: every package built and its tests passed\n'
