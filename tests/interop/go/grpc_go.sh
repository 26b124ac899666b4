# grpc-go 1.85.0's xDS client (cmd/grpcgo_flow, cmd/grpcgo_child): against our server,
# through the tap, under conform client, and against go-control-plane with the tap between.
# Sourced by tests/interop/go/run.sh (GO_BIN holds the built programs; WORK, CHECK and
# ADS_SERVER are set).

step "our server <-> grpc-go 1.85.0 xDS client (go/cmd/grpcgo_flow)"
rm -rf "$WORK/grpc_go"
timeout 300 "$GO_BIN/grpcgo_flow" "$ADS_SERVER" examples/data/envoy.desc "$WORK/grpc_go" \
  >"$WORK/grpc_go.txt" 2>&1 || { tail -n 60 "$WORK/grpc_go.txt" >&2; exit 1; }
grep -E '^\[grpc-go\] [1-6]\. ' "$WORK/grpc_go.txt"
check_record "$WORK/grpc_go/record.jsonl" server client "$WORK/grpc_go/peer-violations.txt"

step "xds-sansio tap between grpc-go's client and our server"
rm -rf "$WORK/grpc_go_tap"
XDS_TAP=$CHECK timeout 300 "$GO_BIN/grpcgo_flow" "$ADS_SERVER" examples/data/envoy.desc \
  "$WORK/grpc_go_tap" >"$WORK/grpc_go_tap.txt" 2>&1 \
  || { tail -n 60 "$WORK/grpc_go_tap.txt" >&2; exit 1; }
check_tap "$WORK/grpc_go_tap" sotw

step "conform client <-> grpc-go 1.85.0 (grpc_hook --peer go, go/cmd/grpcgo_child, scenarios/grpc)"
start_hook "$WORK/hook-grpc-go.log" timeout 900 python3 tests/interop/grpc_hook/hook.py \
  --control 127.0.0.1:17341 --peer go --child-cmd "$GO_BIN/grpcgo_child" \
  --workdir "$WORK/hook-grpc-go"
conform_peer grpc-go client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:17341 \
  --bodies tests/interop/scenarios/grpc/bodies.json --descriptors examples/data/envoy.desc \
  tests/interop/scenarios/grpc/
fuzz_grpc_peer grpc-go 17341
kill "$HOOK_PID" 2>/dev/null || true

# The checker's findings on one side of the tap's recording, counted per rule, each with
# the classification docs/conform.md gives ("tap between real peers"): listed, not failures.
# What the tap reported live must be what the checker finds in its recording.
grpc_go_findings() { # workdir, side
  local dir=$1 side=$2 own tapped
  timeout 120 "$CHECK" check "$dir/tap.jsonl" --side "$side" --variant sotw \
    >"$dir/$side-findings.txt" 2>&1 || true
  echo "checker, $side side: $(tail -n 1 "$dir/$side-findings.txt")"
  own=$({ grep -oE '^[^ ]+:[0-9]+: [a-z-]+:' "$dir/$side-findings.txt" || true; } \
    | awk '{print $2}' | tr -d ':' | sort | uniq -c)
  tapped=$({ grep -oE " $side broke [a-z-]+" "$dir/tap.txt" || true; } | awk '{print $3}' \
    | sort | uniq -c)
  if [ "$own" != "$tapped" ]; then
    echo "on the $side side the tap reported live: ${tapped:-(none)}" >&2
    echo "and the checker finds in its recording: ${own:-(none)}" >&2
    exit 1
  fi
  if [ -z "$own" ]; then
    echo "  (none)"
    return 0
  fi
  echo "$own" | while read -r count rule; do
    case "$side $rule" in
      "server resent-rejected-version")
        why="peer (go-control-plane): a NACK, which carries the last accepted version, is answered at once with the rejected snapshot again" ;;
      *) why="not classified yet: see the first occurrence in $dir/$side-findings.txt" ;;
    esac
    echo "  $count x $rule: $why"
  done
}

step "grpc-go 1.85.0 client <-> go-control-plane 0.14.0 (SnapshotCache, SotW ADS), xds-sansio tap between"
rm -rf "$WORK/grpc_go_gcp"
XDS_TAP=$CHECK timeout 300 "$GO_BIN/grpcgo_flow" --server go-control-plane "$WORK/grpc_go_gcp" \
  >"$WORK/grpc_go_gcp.txt" 2>&1 || { tail -n 60 "$WORK/grpc_go_gcp.txt" >&2; exit 1; }
grep -E '^\[grpc-go\] [1-6]\. ' "$WORK/grpc_go_gcp.txt"
echo "tap: $(grep -E 'messages checked' "$WORK/grpc_go_gcp/tap.txt")"
python3 -c 'import json, sys; [print("  deviation:", d) for d in json.load(open(sys.argv[1]))["deviations"]]' \
  "$WORK/grpc_go_gcp/report.json"
grpc_go_findings "$WORK/grpc_go_gcp" client
grpc_go_findings "$WORK/grpc_go_gcp" server
