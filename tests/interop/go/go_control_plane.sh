# go-control-plane 0.14.0 as a management server, behind cmd/gcp_hook (a conform server
# hook), with its two caches: SnapshotCache and LinearCache (one per type, MuxCache).
# Sourced by tests/interop/go/run.sh: GO_BIN, WORK, CHECK and PEERS are set.

# conform server over the corpus: typed bodies (go-control-plane stores proto messages).
python3 tests/interop/typed_bodies.py scenarios/ >"$WORK/typed_bodies.json"
python3 tests/interop/typed_bodies.py --fuzz >"$WORK/fuzz_bodies.json"
for GCP_CACHE in snapshot linear; do
  if [ "$GCP_CACHE" = snapshot ]; then GCP_PORTS=(17351 17352); else GCP_PORTS=(17353 17354); fi
  step "conform server <-> go-control-plane 0.14.0, $GCP_CACHE cache (go/cmd/gcp_hook, the corpus)"
  start_hook "$WORK/hook-go-control-plane-$GCP_CACHE.log" timeout 900 "$GO_BIN/gcp_hook" \
    --cache "$GCP_CACHE" --control "127.0.0.1:${GCP_PORTS[0]}" --listen "127.0.0.1:${GCP_PORTS[1]}"
  conform_peer "go-control-plane-$GCP_CACHE" server --target "127.0.0.1:${GCP_PORTS[1]}" \
    --hook-socket "127.0.0.1:${GCP_PORTS[0]}" --bodies "$WORK/typed_bodies.json" \
    --descriptors examples/data/envoy.desc scenarios/
  # Neither cache has aliases; no TTLs against a server (heartbeats race real time
  # against the model's virtual time).
  FUZZ_WITHOUT=aliases,ttl
  fuzz_peer "go-control-plane-$GCP_CACHE" server --target "127.0.0.1:${GCP_PORTS[1]}" \
    --hook-socket "127.0.0.1:${GCP_PORTS[0]}" --fuzz-types CDS,EDS,LDS,RDS \
    --fuzz-without "$FUZZ_WITHOUT" --bodies "$WORK/fuzz_bodies.json" \
    --descriptors examples/data/envoy.desc
  kill "$HOOK_PID" 2>/dev/null || true
done

# Our client (XdsClient) against it: watch, update, NACK, restart; SotW and delta, ADS and
# per-type. hook_server_flow starts the hook itself.
for GCP_CACHE in snapshot linear; do
  if [ "$GCP_CACHE" = snapshot ]; then GCP_PORTS=(17355 17356); else GCP_PORTS=(17357 17358); fi
  step "our client (XdsClient) <-> go-control-plane 0.14.0, $GCP_CACHE cache (rust_peers hook_server_flow)"
  rm -rf "$WORK/go_control_plane_$GCP_CACHE"
  timeout 300 "$PEERS/hook_server_flow" --peer "go-control-plane 0.14.0 ($GCP_CACHE)" \
    --hook-cmd "$GO_BIN/gcp_hook --cache $GCP_CACHE --control 127.0.0.1:${GCP_PORTS[0]} --listen 127.0.0.1:${GCP_PORTS[1]}" \
    --control "127.0.0.1:${GCP_PORTS[0]}" --target "127.0.0.1:${GCP_PORTS[1]}" \
    "$WORK/go_control_plane_$GCP_CACHE" >"$WORK/go_control_plane_$GCP_CACHE.txt" 2>&1 \
    || { tail -n 60 "$WORK/go_control_plane_$GCP_CACHE.txt" >&2; exit 1; }
  grep -E '^\[' "$WORK/go_control_plane_$GCP_CACHE.txt" | cut -c1-240
  echo "the peer's deviations, listed, not failures:"
  python3 -c 'import json, sys; print("\n".join("  " + d for d in json.load(open(sys.argv[1]))["deviations"]) or "  (none)")' \
    "$WORK/go_control_plane_$GCP_CACHE/report.json"
done

# A multi-authority bootstrap (gRFC A47) against two go-control-plane servers: xdstp names
# of two authorities, each fetched from its own server; one server down reaches only its
# authority's watches; it comes back on its own.
step "our client (XdsClient), two authorities <-> two go-control-plane 0.14.0 servers (rust_peers authorities_flow)"
rm -rf "$WORK/authorities"
timeout 200 "$PEERS/authorities_flow" --peer "go-control-plane 0.14.0, two servers" \
  --hook-a "$GO_BIN/gcp_hook --cache snapshot --control 127.0.0.1:17371 --listen 127.0.0.1:17372" \
  --control-a 127.0.0.1:17371 --target-a 127.0.0.1:17372 \
  --hook-b "$GO_BIN/gcp_hook --cache snapshot --control 127.0.0.1:17373 --listen 127.0.0.1:17374" \
  --control-b 127.0.0.1:17373 --target-b 127.0.0.1:17374 \
  "$WORK/authorities" >"$WORK/authorities.txt" 2>&1 \
  || { tail -n 60 "$WORK/authorities.txt" >&2; exit 1; }
python3 -c 'import json, sys; [print("  " + s["step"] + ":", s["detail"]) for s in json.load(open(sys.argv[1]))["steps"]]' \
  "$WORK/authorities/report.json"
