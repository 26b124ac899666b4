# Two checks against Go peers beyond the xDS clients and control planes (sourced by
# tests/interop/go/run.sh after the others; GO_BIN, WORK, CHECK, ADS_SERVER and PEERS set):
# - gzip: our server with tonic's gzip against grpc-go 1.85.0's gRPC transport
#   compressing with gzip (go/cmd/gzip_ads), and the refusal without it;
# - v2: our client with the envoy.api.v2 type URLs against go-control-plane v0.9.7, the
#   last release that serves them (tests/interop/go-v2, its own module).

# Starts an ads_server in the background (ADS_PID) and sets ADS_ADDR from its first line.
start_ads_server() { # log, binary, args...
  local log=$1
  start_hook "$@"
  ADS_PID=$HOOK_PID
  ADS_ADDR=$(sed -n 's/^listening on //p' "$log" | head -n 1)
}

step "our server with gzip (ads_server --compress gzip) <-> grpc-go 1.85.0 transport with gzip (go/cmd/gzip_ads)"
# run.sh builds ads_server with the gzip feature; --compress gzip turns it on.
GZIP_DIR=$WORK/gzip
rm -rf "$GZIP_DIR" && mkdir -p "$GZIP_DIR"
start_ads_server "$GZIP_DIR/server.log" timeout 120 "$ADS_SERVER" --listen 127.0.0.1:0 \
  --compress gzip --resources examples/data/resources.json \
  --descriptors examples/data/envoy.desc --record "$GZIP_DIR/record.jsonl"
timeout 60 "$GO_BIN/gzip_ads" --server "$ADS_ADDR" --resources examples/data/resources.json \
  --record "$GZIP_DIR/record.jsonl" || { kill "$ADS_PID"; cat "$GZIP_DIR/server.log" >&2; exit 1; }
kill "$ADS_PID" 2>/dev/null || true
check_record "$GZIP_DIR/record.jsonl" server client "$GZIP_DIR/peer-violations.txt"

step "gzip refused: ads_server without --compress"
start_ads_server "$GZIP_DIR/plain.log" timeout 120 "$ADS_SERVER" --listen 127.0.0.1:0 \
  --resources examples/data/resources.json --descriptors examples/data/envoy.desc
timeout 60 "$GO_BIN/gzip_ads" --server "$ADS_ADDR" --resources examples/data/resources.json \
  --expect-refused || { kill "$ADS_PID"; exit 1; }
kill "$ADS_PID" 2>/dev/null || true

step "our client, v2 type URLs, per-type CDS/EDS <-> go-control-plane v0.9.7 envoy.api.v2 (go-v2/cmd/v2_server, rust_peers v2_flow)"
if ! (cd tests/interop/go-v2 && timeout 600 go mod download); then
  loud_skip "the Go module proxy did not serve tests/interop/go-v2's modules (go-control-plane v0.9.7): the v2 interop test did not run"
else
  (cd tests/interop/go-v2 && timeout 900 go build -o "$GO_BIN" ./cmd/...)
  rm -rf "$WORK/go_v2"
  timeout 180 "$PEERS/v2_flow" --server "$GO_BIN/v2_server" "$WORK/go_v2" >"$WORK/go_v2.txt" 2>&1 \
    || { tail -n 60 "$WORK/go_v2.txt" "$WORK/go_v2/v2_server.log" >&2; exit 1; }
  grep -E '^\[go-control-plane-v2\] ' "$WORK/go_v2.txt"
  check_record "$WORK/go_v2/record.jsonl" client server "$WORK/go_v2/peer-violations.txt"
fi
