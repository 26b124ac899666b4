#!/usr/bin/env bash
# The java peers (sourced by tests/interop/run.sh; also runs on its own from the
# repository root once run.sh's binaries are built: bash tests/interop/java/run.sh).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/../../.."
  # shellcheck source=tests/interop/lib.sh
  source tests/interop/lib.sh
  standalone_env
fi

# grpc-java 1.85.1 (io.grpc:grpc-xds) and java-control-plane 1.0.49
# (io.envoyproxy.controlplane:server), tests/interop/java/pom.xml: resolved from Maven
# Central into ~/.m2 and compiled once; each module's runtime classpath is written to
# target/classpath.txt. No java or mvn, or an artifact the registry refuses, is a loud skip.
JAVA_DIR=tests/interop/java
java_classpath() { # module
  echo "$PWD/$JAVA_DIR/$1/target/classes:$(cat "$JAVA_DIR/$1/target/classpath.txt")"
}
if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  loud_skip "mvn or java not found: the grpc-java and java-control-plane interop tests did not run"
else
  step "Java peers: resolve and build (tests/interop/java, grpc-java and java-control-plane)"
  mkdir -p "$WORK/java"
  JAVA_BUILT=1
  if ! (cd "$JAVA_DIR" && timeout 900 mvn -q -B package -DskipTests) >"$WORK/java/build.log" 2>&1; then
    if grep -qE 'Could not (resolve|transfer|find artifact)|was not found in|Non-resolvable|status code: (401|403|404)' "$WORK/java/build.log"; then
      loud_skip "Maven Central refused an artifact of tests/interop/java/pom.xml: $(grep -m1 -oE '(Could not|Non-resolvable)[^[]*' "$WORK/java/build.log" || true) (log: $WORK/java/build.log)"
      JAVA_BUILT=0
    else
      tail -n 60 "$WORK/java/build.log" >&2
      exit 1
    fi
  fi
fi

if [ "${JAVA_BUILT:-0}" = 1 ]; then
  GRPC_JAVA_CP=$(java_classpath grpc-java-client)
  JCP_CP=$(java_classpath java-control-plane-hook)

  step "our server <-> grpc-java 1.85.1 xDS client (java/grpc-java-client XdsFlow)"
  rm -rf "$WORK/grpc_java"
  timeout 300 java -cp "$GRPC_JAVA_CP" xdssansio.interop.grpcjava.XdsFlow "$ADS_SERVER" \
    examples/data/envoy.desc "$WORK/grpc_java" >"$WORK/grpc_java.txt" 2>&1 \
    || { tail -n 60 "$WORK/grpc_java.txt" >&2; exit 1; }
  grep -E '^\[grpc-java\] [1-6]\. ' "$WORK/grpc_java.txt"
  check_record "$WORK/grpc_java/record.jsonl" server client "$WORK/grpc_java/peer-violations.txt"

  step "xds-sansio tap between grpc-java's client and our server"
  rm -rf "$WORK/grpc_java_tap"
  XDS_TAP=$CHECK timeout 300 java -cp "$GRPC_JAVA_CP" xdssansio.interop.grpcjava.XdsFlow \
    "$ADS_SERVER" examples/data/envoy.desc "$WORK/grpc_java_tap" >"$WORK/grpc_java_tap.txt" 2>&1 \
    || { tail -n 60 "$WORK/grpc_java_tap.txt" >&2; exit 1; }
  check_tap "$WORK/grpc_java_tap" sotw

  step "conform client <-> grpc-java 1.85.1 (grpc_hook --peer java, java Child, scenarios/grpc)"
  # A JVM per scenario: C2 off and the serial collector start it sooner on two cores.
  start_hook "$WORK/hook-grpc-java.log" timeout 900 python3 tests/interop/grpc_hook/hook.py \
    --control 127.0.0.1:17361 --peer java --workdir "$WORK/hook-grpc-java" --child-cmd \
    "java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp $GRPC_JAVA_CP xdssansio.interop.grpcjava.Child"
  conform_peer grpc-java client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17361 \
    --bodies tests/interop/scenarios/grpc/bodies.json --descriptors examples/data/envoy.desc \
    tests/interop/scenarios/grpc/
  fuzz_grpc_peer grpc-java 17361
  kill "$HOOK_PID" 2>/dev/null || true

  step "conform server <-> java-control-plane 1.0.49 (java-control-plane-hook, the corpus, SotW and delta)"
  # It stores typed resources: real bodies for the corpus's placeholders.
  python3 tests/interop/typed_bodies.py scenarios/ >"$WORK/typed_bodies.json"
  start_hook "$WORK/hook-java-control-plane.log" timeout 900 java -cp "$JCP_CP" \
    xdssansio.interop.controlplane.ConformServerHook --control 127.0.0.1:17362 \
    --listen 127.0.0.1:17363
  conform_peer java-control-plane server --target 127.0.0.1:17363 --hook-socket 127.0.0.1:17362 \
    --bodies "$WORK/typed_bodies.json" --descriptors examples/data/envoy.desc scenarios/
  python3 tests/interop/typed_bodies.py --fuzz >"$WORK/fuzz_bodies.json"
  # Its snapshots hold no TTLs and no aliases: the cases leave them out.
  fuzz_peer java-control-plane server --target 127.0.0.1:17363 --hook-socket 127.0.0.1:17362 \
    --fuzz-types CDS,EDS,LDS,RDS --fuzz-without ttl,aliases \
    --bodies "$WORK/fuzz_bodies.json" --descriptors examples/data/envoy.desc
  kill "$HOOK_PID" 2>/dev/null || true

  step "conform server <-> java-control-plane 1.0.49, node groups by node id (deps/cascade)"
  # The same server with the other usual NodeGroup, `node -> node.getId()`: a request
  # without a node (gRPC clients send it on the first request only) falls in group "".
  start_hook "$WORK/hook-java-control-plane-node-id.log" timeout 900 java -cp "$JCP_CP" \
    xdssansio.interop.controlplane.ConformServerHook --control 127.0.0.1:17364 \
    --listen 127.0.0.1:17365 --node-group node-id
  conform_peer java-control-plane-node-id server --target 127.0.0.1:17365 \
    --hook-socket 127.0.0.1:17364 --bodies "$WORK/typed_bodies.json" \
    --descriptors examples/data/envoy.desc scenarios/deps/cascade.xds
  kill "$HOOK_PID" 2>/dev/null || true
fi

if [ "${JAVA_BUILT:-0}" = 1 ]; then
  step "our client (XdsClient) <-> java-control-plane 1.0.49 (rust_peers hook_server_flow)"
  # SotW over ADS is left out: java-control-plane's SimpleCache answers an ADS request only
  # once every name it asks for exists, so the story's watch of a missing cluster withholds
  # the others (docs/conform.md, java-control-plane; conform shows it in deps/missing_cluster).
  rm -rf "$WORK/java_control_plane"
  timeout 300 "$PEERS/hook_server_flow" --peer "java-control-plane 1.0.49" \
    --runs delta-ads,sotw-per-type,delta-per-type \
    --hook-cmd "java -cp $JCP_CP xdssansio.interop.controlplane.ConformServerHook --control 127.0.0.1:17366 --listen 127.0.0.1:17367" \
    --control 127.0.0.1:17366 --target 127.0.0.1:17367 \
    "$WORK/java_control_plane" >"$WORK/java_control_plane.txt" 2>&1 \
    || { tail -n 60 "$WORK/java_control_plane.txt" >&2; exit 1; }
  grep -E '^\[' "$WORK/java_control_plane.txt" | cut -c1-240
  echo "the peer's deviations, listed, not failures:"
  python3 -c 'import json, sys; print("\n".join("  " + d for d in json.load(open(sys.argv[1]))["deviations"]) or "  (none)")' \
    "$WORK/java_control_plane/report.json"
fi
