#!/usr/bin/env bash
# Installs the interop peers (Python venv, npm packages, crates) and runs every interop
# test, each bounded in time. A peer whose toolchain is absent is SKIPPED with a loud
# message; everything else must pass. Reports land in target/interop/.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
WORK=target/interop
mkdir -p "$WORK"
START=$(date +%s)
# shellcheck source=tests/interop/lib.sh
source tests/interop/lib.sh

step "our client (run_stream, and the XdsClient driver) <-> our server over the adapter, four variants"
timeout 900 cargo test -p xds-sansio-tonic --all-features --test loopback --test client_driver

step "build ads_server (on the adapter) and the checker"
timeout 900 cargo build -p xds-sansio-tonic --features record,gzip --example ads_server --example hello
timeout 900 cargo build -p xds-sansio-cli --bins --examples
ADS_SERVER=$PWD/target/debug/examples/ads_server
CHECK=$PWD/target/debug/xds-sansio
PEER=$PWD/target/debug/examples/conform_peer

step "conform client <-> our client (the adapter's, examples/conform_peer.rs)"
"$PEER" client --control 127.0.0.1:17301 >"$WORK/peer-client.log" 2>&1 &
PEER_PID=$!
conform_corpus client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17301
kill "$PEER_PID" 2>/dev/null || true

step "conform client --fuzz <-> our client (every variant, transport and type)"
"$PEER" client --control 127.0.0.1:17304 >"$WORK/peer-fuzz.log" 2>&1 &
PEER_PID=$!
# The adapter's client is the model's: any divergence is a bug of the harness or the model.
FUZZ_CASES=10 fuzz_peer adapter-client client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17304
kill "$PEER_PID" 2>/dev/null || true

step "conform server <-> our server (the adapter's, examples/conform_peer.rs)"
"$PEER" server --control 127.0.0.1:17302 --listen 127.0.0.1:17303 >"$WORK/peer-server.log" 2>&1 &
PEER_PID=$!
conform_corpus server --target 127.0.0.1:17303 --hook-socket 127.0.0.1:17302
kill "$PEER_PID" 2>/dev/null || true

step "conform server --fuzz <-> our server (every variant, transport and type)"
# conform_peer ends with its control connection: a new one for the second run.
"$PEER" server --control 127.0.0.1:17305 --listen 127.0.0.1:17306 >"$WORK/peer-server-fuzz.log" 2>&1 &
PEER_PID=$!
# No TTLs against servers: their heartbeats race real time against the model's virtual
# time (docs/conform.md, "Differential fuzzing").
FUZZ_CASES=10 fuzz_peer adapter-server server --target 127.0.0.1:17306 --hook-socket 127.0.0.1:17305 \
  --fuzz-without ttl
kill "$PEER_PID" 2>/dev/null || true

step "our server <-> gRPC C-core xDS client (PyPI grpcio)"
if command -v python3 >/dev/null; then
  VENV=$WORK/venv
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/interop/grpc_python/requirements.txt
  "$VENV/bin/python" tests/interop/grpc_python/descriptors.py "$WORK/envoy.desc"
  rm -rf "$WORK/grpc_python"
  timeout 300 "$VENV/bin/python" -u tests/interop/grpc_python/xds_flow.py \
    "$ADS_SERVER" "$WORK/envoy.desc" "$WORK/grpc_python"
  check_record "$WORK/grpc_python/record.jsonl" server client "$WORK/grpc_python/peer-violations.txt"

  step "the hello example (the README's first server) <-> the gRPC C-core xDS client"
  timeout 120 "$VENV/bin/python" -u tests/interop/grpc_python/hello.py \
    "$PWD/target/debug/examples/hello" "$WORK/hello"

  step "xds-sansio tap between the gRPC C-core client and our server"
  rm -rf "$WORK/grpc_python_tap"
  XDS_TAP=$CHECK timeout 300 "$VENV/bin/python" -u tests/interop/grpc_python/xds_flow.py \
    "$ADS_SERVER" "$WORK/envoy.desc" "$WORK/grpc_python_tap"
  check_tap "$WORK/grpc_python_tap" sotw

  step "conform client <-> the gRPC C-core client (tests/interop/grpc_hook, scenarios/grpc)"
  start_hook "$WORK/hook-grpcio.log" python3 tests/interop/grpc_hook/hook.py \
    --control 127.0.0.1:17311 --peer python --python "$PWD/$VENV/bin/python" \
    --workdir "$WORK/hook-grpcio"
  conform_peer grpcio client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17311 \
    --bodies tests/interop/scenarios/grpc/bodies.json --descriptors "$WORK/envoy.desc" \
    tests/interop/scenarios/grpc/
  fuzz_grpc_peer grpcio 17311
  kill "$HOOK_PID" 2>/dev/null || true
else
  loud_skip "python3 not found: the gRPC C-core interop test did not run"
fi

step "our server <-> @grpc/grpc-js-xds (npm)"
if command -v node >/dev/null && command -v npm >/dev/null; then
  NODE_DIR=$WORK/grpc_node_modules
  mkdir -p "$NODE_DIR"
  if ! cmp -s tests/interop/grpc_node/package-lock.json "$NODE_DIR/package-lock.json" \
      || [ ! -d "$NODE_DIR/node_modules/@grpc/grpc-js-xds" ]; then
    cp tests/interop/grpc_node/package.json tests/interop/grpc_node/package-lock.json "$NODE_DIR/"
    (cd "$NODE_DIR" && timeout 300 npm ci --no-audit --no-fund --loglevel=error)
  fi
  rm -rf "$WORK/grpc_node"
  NODE_PATH=$PWD/$NODE_DIR/node_modules timeout 300 node tests/interop/grpc_node/xds_flow.js \
    "$ADS_SERVER" examples/data/envoy.desc examples/data/resources.json "$WORK/grpc_node"
  check_record "$WORK/grpc_node/record.jsonl" server client "$WORK/grpc_node/peer-violations.txt"

  step "conform client <-> the @grpc/grpc-js-xds client (tests/interop/grpc_hook, scenarios/grpc)"
  NODE_PATH=$PWD/$NODE_DIR/node_modules start_hook "$WORK/hook-grpc-js-xds.log" \
    python3 tests/interop/grpc_hook/hook.py --control 127.0.0.1:17312 --peer node \
    --workdir "$WORK/hook-grpc-js-xds"
  conform_peer grpc-js-xds client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17312 \
    --bodies tests/interop/scenarios/grpc/bodies.json --descriptors examples/data/envoy.desc \
    tests/interop/scenarios/grpc/
  fuzz_grpc_peer grpc-js-xds 17312
  kill "$HOOK_PID" 2>/dev/null || true
else
  loud_skip "node/npm not found: the @grpc/grpc-js-xds interop test did not run"
fi

step "Rust peers: build the drivers (tests/interop/rust_peers, own workspace)"
# rust-control-plane's data-plane-api compiles Envoy's protos with protoc (Debian
# protobuf-compiler): installed here when missing and possible, else that peer is skipped.
if ! command -v protoc >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    timeout 300 bash -c 'apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null' || true
  elif command -v sudo >/dev/null; then
    timeout 300 sudo bash -c 'apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null' || true
  fi
fi
PEER_FEATURES=()
if command -v protoc >/dev/null; then
  PEER_FEATURES=(--features rust-control-plane)
fi
PEERS_TARGET=$PWD/$WORK/rust_peers
CARGO_TARGET_DIR=$PEERS_TARGET timeout 1500 cargo build \
  --manifest-path tests/interop/rust_peers/Cargo.toml --bins --locked "${PEER_FEATURES[@]}"
PEERS=$PEERS_TARGET/debug

# The two Rust servers' conform runs wait out the patience on every known failure (about
# 5 s each, 8 minutes in all): they run beside the steps that follow, on ports and files
# of their own, and are awaited before the summary.
rust_servers_conform() {
  step "conform server <-> xds-server 0.1.0 (rust_peers conform_server_hook, the corpus)"
  start_hook "$WORK/hook-xds-server.log" "$PEERS/conform_server_hook" xds-server \
    --control 127.0.0.1:17321 --listen 127.0.0.1:17322
  conform_peer xds-server server --target 127.0.0.1:17322 --hook-socket 127.0.0.1:17321 scenarios/
  # Its snapshots hold no TTLs and no aliases: the cases leave them out.
  fuzz_peer xds-server server --target 127.0.0.1:17322 --hook-socket 127.0.0.1:17321 \
    --fuzz-without ttl,aliases
  kill "$HOOK_PID" 2>/dev/null || true

  step "conform server <-> rust-control-plane 0.1.2 (conform_server_hook, the corpus, SotW)"
  if [ ${#PEER_FEATURES[@]} -gt 0 ]; then
    # It stores typed resources: real bodies for the corpus's placeholders.
    python3 tests/interop/typed_bodies.py scenarios/ >"$WORK/rcp_typed_bodies.json"
    start_hook "$WORK/hook-rust-control-plane.log" "$PEERS/conform_server_hook" \
      rust-control-plane --control 127.0.0.1:17323 --listen 127.0.0.1:17324
    conform_peer rust-control-plane server --target 127.0.0.1:17324 \
      --hook-socket 127.0.0.1:17323 --variant sotw --bodies "$WORK/rcp_typed_bodies.json" \
      --descriptors examples/data/envoy.desc scenarios/
    python3 tests/interop/typed_bodies.py --fuzz >"$WORK/rcp_fuzz_bodies.json"
    fuzz_peer rust-control-plane server --target 127.0.0.1:17324 --hook-socket 127.0.0.1:17323 \
      --variant sotw --fuzz-types CDS,EDS,LDS,RDS --fuzz-without ttl,aliases \
      --bodies "$WORK/rcp_fuzz_bodies.json" --descriptors examples/data/envoy.desc
    kill "$HOOK_PID" 2>/dev/null || true
  else
    loud_skip "protoc not found and not installable: conform against rust-control-plane did not run"
  fi
}
bg_start rust-servers-conform rust_servers_conform

step "conform client <-> xds-client 0.1.0-alpha.4 (grpc_hook/hook.py, conform_client_child)"
start_hook "$WORK/hook-xds-client.log" python3 tests/interop/grpc_hook/hook.py \
  --control 127.0.0.1:17331 --peer xds-client --child-bin "$PEERS/conform_client_child" \
  --workdir "$WORK/hook-xds-client"
conform_peer xds-client client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17331 \
  --variant sotw --transport ads scenarios/client scenarios/seed
kill "$HOOK_PID" 2>/dev/null || true

step "conform client <-> junction-core 0.3.2 (grpc_hook/hook.py, conform_client_child, scenarios/junction)"
"$PEERS/conform_client_child" junction-bodies >"$WORK/junction_bodies.json"
start_hook "$WORK/hook-junction.log" python3 tests/interop/grpc_hook/hook.py \
  --control 127.0.0.1:17332 --peer junction --child-bin "$PEERS/conform_client_child" \
  --workdir "$WORK/hook-junction"
conform_peer junction client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17332 \
  --bodies "$WORK/junction_bodies.json" tests/interop/scenarios/junction/
kill "$HOOK_PID" 2>/dev/null || true

step "conform client --fuzz <-> xds-client 0.1.0-alpha.4 (SotW over ADS, CDS and EDS, by name)"
start_hook "$WORK/hook-xds-client-fuzz.log" python3 tests/interop/grpc_hook/hook.py \
  --control 127.0.0.1:17333 --peer xds-client --child-bin "$PEERS/conform_client_child" \
  --workdir "$WORK/hook-xds-client-fuzz"
fuzz_peer xds-client client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17333 \
  --variant sotw --transport ads --fuzz-types CDS,EDS --fuzz-without wildcard
kill "$HOOK_PID" 2>/dev/null || true

step "our delta server <-> junction-core 0.3.2"
rm -rf "$WORK/junction"
timeout 300 "$PEERS/junction_flow" "$ADS_SERVER" "$WORK/junction"
check_record_delta "$WORK/junction/record.jsonl" "$WORK/junction/peer-violations.txt"

step "xds-sansio tap between junction-core and our delta server"
rm -rf "$WORK/junction_tap"
XDS_TAP=$CHECK timeout 300 "$PEERS/junction_flow" "$ADS_SERVER" "$WORK/junction_tap"
check_tap "$WORK/junction_tap" delta

step "our server <-> xds-client 0.1.0-alpha.4 (hyperium)"
rm -rf "$WORK/xds_client"
timeout 300 "$PEERS/xds_client_flow" "$ADS_SERVER" "$WORK/xds_client"
check_record "$WORK/xds_client/record.jsonl" server client "$WORK/xds_client/peer-violations.txt"

step "our client <-> xds-server 0.1.0"
rm -rf "$WORK/xds_server"
timeout 300 "$PEERS/xds_server_flow" "$WORK/xds_server"

step "our client (XdsClient) <-> rust-control-plane 0.1.2"
if [ ${#PEER_FEATURES[@]} -gt 0 ]; then
  rm -rf "$WORK/rust_control_plane"
  timeout 300 "$PEERS/rust_control_plane_flow" "$WORK/rust_control_plane"
else
  loud_skip "protoc not found and not installable: the rust-control-plane interop test did not run"
fi

# The field's implementations: grpc-go and go-control-plane, grpc-java and
# java-control-plane (each script installs its toolchain's packages, bounded).
# shellcheck source=tests/interop/go/run.sh
source tests/interop/go/run.sh
# shellcheck source=tests/interop/java/run.sh
source tests/interop/java/run.sh

bg_wait

step "summary ($WORK/REPORT.md)"
if command -v python3 >/dev/null; then
  python3 tests/interop/summary.py "$WORK"
fi

step "done in $(( $(date +%s) - START ))s"
