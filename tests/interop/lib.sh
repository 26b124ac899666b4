# Shared by tests/interop/run.sh and the per-peer scripts it sources (go/run.sh,
# java/run.sh): the step banner, loud skips, hooks, conform against a peer with its
# classified failures, and the checker over a recording or a tap. Expects WORK (the
# report directory), CHECK (the xds-sansio binary) and START (the run's start time).

step() { printf '\n=== interop: %s (%ss) ===\n' "$*" "$(( $(date +%s) - START ))"; }
loud_skip() { printf '\n!!!!!!!!!! SKIPPED: %s !!!!!!!!!!\n\n' "$*" >&2; }

# conform against a peer behind its hook: every failure must be one docs/conform.md
# classifies (tests/interop/conform_known_failures.txt, under LABEL).
conform_peer() { # label, side, conform args (with the scenario paths)...
  local label=$1 side=$2; shift 2
  mkdir -p "$WORK/conform"
  local log=$WORK/conform/$label.txt
  timeout 600 "$CHECK" conform "$side" "$@" --patience-ms 2000 \
    --junit "$WORK/conform/$label.xml" >"$log" 2>&1 || true
  echo "$(grep -E '^[0-9]+ passed, ' "$log" | tail -n 1) (report: $log)"
  if ! python3 tests/interop/conform_verdicts.py "$label" "$WORK/conform/$label.xml" \
      tests/interop/conform_known_failures.txt; then
    tail -n 40 "$log" >&2
    exit 1
  fi
}

# conform --fuzz against a peer behind its hook: a bounded number of generated cases; a
# divergence of a kind tests/interop/fuzz_known_divergences.txt does not list under LABEL
# fails the run (docs/conform.md, "Differential fuzzing"). Minimal scenarios land in
# $WORK/conform/fuzz-LABEL/. FUZZ_REPORT_ONLY=1 lists new kinds without failing (to
# classify them after a peer's upgrade).
FUZZ_CASES=${FUZZ_CASES:-5}
fuzz_peer() { # label, side, conform args (profile flags, hook, address)...
  local label=$1 side=$2; shift 2
  mkdir -p "$WORK/conform"
  local log=$WORK/conform/fuzz-$label.txt
  rm -rf "$WORK/conform/fuzz-$label"
  if ! timeout 600 "$CHECK" conform "$side" "$@" --patience-ms 2000 --fuzz "$FUZZ_CASES" \
      --seed 1 --fuzz-len 10 --fuzz-shrink 8 --fuzz-out "$WORK/conform/fuzz-$label" \
      --known-divergences tests/interop/fuzz_known_divergences.txt --fuzz-label "$label" \
      >"$log" 2>&1; then
    grep -E '^fuzz seed [0-9]+: |^  (NEW|known|unsteady): ' "$log" >&2 || tail -n 40 "$log" >&2
    echo "conform --fuzz against $label: a divergence of a kind not classified (above; $log)" >&2
    [ -n "${FUZZ_REPORT_ONLY:-}" ] || exit 1
  fi
  grep -E '^  (known|found|unsteady|NEW): ' "$log" || true
  echo "$(grep -E '^[0-9]+ passed, ' "$log" | tail -n 1) (report: $log)"
}

# conform --fuzz against a gRPC client (its hook already listening on PORT): SotW over ADS,
# the chain of scenarios/grpc/bodies.json followed from the watch of echo.test.
GRPC_CHAIN="LDS echo.test l1; RDS route-1 r1; CDS cluster-1 c1 c2 other:c1; EDS cluster-1 e1 e2"
fuzz_grpc_peer() { # label, hook port
  fuzz_peer "$1" client --listen 127.0.0.1:0 --hook-socket "127.0.0.1:$2" --variant sotw \
    --transport ads --fuzz-without wildcard,ttl,aliases --fuzz-follows "$GRPC_CHAIN" \
    --bodies tests/interop/scenarios/grpc/bodies.json --descriptors examples/data/envoy.desc
}

# conform over the whole corpus against one of the adapter's peers.
conform_corpus() { # side, conform args...
  local side=$1; shift
  conform_peer "$side" "$side" "$@" scenarios/
}

# Starts a hook (a control socket) in the background and waits until it listens.
start_hook() { # log, command...
  local log=$1; shift
  "$@" >"$log" 2>&1 &
  HOOK_PID=$!
  for _ in $(seq 100); do
    grep -q 'listening on' "$log" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$log" >&2
  echo "the hook did not start: $*" >&2
  exit 1
}

# Judges a recorded conversation: our side must have no violation; the peer's are listed.
check_record() { # record, our side, peer side, report
  local record=$1 ours=$2 peer=$3 out=$4
  echo "checker, our side ($ours):"
  "$CHECK" check "$record" --side "$ours" --variant sotw | tee "$(dirname "$out")/our-violations.txt"
  echo "checker, peer side ($peer), deviations listed, not failures:"
  "$CHECK" check "$record" --side "$peer" --variant sotw | tee "$out" || true
}

check_record_delta() { # record, report (our side is the server)
  echo "checker, our side (server):"
  "$CHECK" check "$1" --side server --variant delta | tee "$(dirname "$2")/our-violations.txt"
  echo "checker, peer side (client), deviations listed, not failures:"
  "$CHECK" check "$1" --side client --variant delta | tee "$2" || true
}

# Judges a run through `xds-sansio tap`: our server must be clean; the client's findings,
# printed live by the tap, must be the checker's on the server's own recording.
check_tap() { # workdir, variant
  local dir=$1 variant=$2 tapped own
  echo "tap: $(grep -E 'messages checked' "$dir/tap.txt")"
  if grep -q ' server broke ' "$dir/tap.txt"; then
    grep -A1 ' server broke ' "$dir/tap.txt" >&2
    echo "the tap reports a violation of our server" >&2
    exit 1
  fi
  tapped=$(grep -oE ' client broke [a-z-]+' "$dir/tap.txt" | awk '{print $3}' | sort | uniq -c || true)
  own=$("$CHECK" check "$dir/record.jsonl" --side client --variant "$variant" \
    | grep -oE '^[^ ]+:[0-9]+: [a-z-]+:' | awk '{print $2}' | tr -d ':' | sort | uniq -c || true)
  echo "the client's findings, live through the tap:"
  echo "${tapped:-  (none)}"
  if [ "$tapped" != "$own" ]; then
    echo "the checker on the server's own recording finds instead:" >&2
    echo "${own:-  (none)}" >&2
    exit 1
  fi
}

# A per-peer script (go/run.sh, java/run.sh) run on its own rather than sourced by run.sh:
# the same report directory and binaries, built by run.sh's steps (or by hand before).
standalone_env() {
  WORK=${WORK:-target/interop}
  mkdir -p "$WORK"
  START=${START:-$(date +%s)}
  ADS_SERVER=${ADS_SERVER:-$PWD/target/debug/examples/ads_server}
  CHECK=${CHECK:-$PWD/target/debug/xds-sansio}
  PEER=${PEER:-$PWD/target/debug/examples/conform_peer}
  PEERS=${PEERS:-$PWD/$WORK/rust_peers/debug}
}

# Steps that mostly wait (conform against a peer waits out its patience on every failing
# line) run beside the others: a block started here runs in a subshell of its own, its
# output kept in $WORK/background-NAME.log, and bg_wait prints that log and fails the run
# if the block failed. A block must use ports and files no other step uses.
BG_BLOCKS=()
bg_start() { # name, function...
  local name=$1; shift
  printf '\n=== interop: %s started in the background (%ss; log: %s) ===\n' \
    "$name" "$(( $(date +%s) - START ))" "$WORK/background-$name.log"
  ( "$@" ) >"$WORK/background-$name.log" 2>&1 &
  BG_BLOCKS+=("$!:$name")
  # A run that fails in the foreground does not leave the block running behind it.
  trap bg_stop EXIT
}

bg_stop() {
  local entry
  for entry in "${BG_BLOCKS[@]}"; do
    kill "${entry%%:*}" 2>/dev/null || true
  done
}

bg_wait() { # waits for every block bg_start began
  local entry pid name rc failed=()
  for entry in "${BG_BLOCKS[@]}"; do
    pid=${entry%%:*}
    name=${entry#*:}
    rc=0
    wait "$pid" || rc=$?
    printf '\n=== interop: %s, run in the background, ended with %s (%ss); its log: ===\n' \
      "$name" "$rc" "$(( $(date +%s) - START ))"
    cat "$WORK/background-$name.log"
    [ "$rc" -eq 0 ] || failed+=("$name")
  done
  BG_BLOCKS=()
  if [ ${#failed[@]} -gt 0 ]; then
    echo "a block run in the background failed: ${failed[*]} (its log above)" >&2
    exit 1
  fi
}
