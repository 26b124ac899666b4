#!/usr/bin/env bash
# Side by side with go-control-plane and grpc-go (issue 25, section 2). Builds the Rust
# side (`vs_go`, this workspace, release, into the root target/) and the Go side
# (benches/side-by-side/go, pinned go-control-plane v0.14.0, envoy v1.40.0, grpc v1.85.0),
# writes the Cluster bodies both serve, then for each round runs every section on the
# Rust side and then on the Go side, and prints the ratios of medians (Go / ours) per
# round and their median over the rounds, with `uptime` before and after. The memory
# section runs in the first round only (counted, not timed). With --java, the server and
# fan-out sections also run on java-control-plane 1.0.49 (benches/side-by-side/java, a
# Maven module, built offline from ~/.m2 when it can be, else resolved online first),
# after the Go side in each round.
#
#   benches/side-by-side/go.sh [--rounds R] [--iterations N] [--go-fanout-iterations N] [--client-iterations N]
#                              [--sections "server fanout memory client"]
#                              [--java] [--java-fanout-iterations N] [--java-warmup-seconds S]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3
ITERATIONS=21
RUST_FANOUT_ITERATIONS=21
GO_FANOUT_ITERATIONS=1
CLIENT_ITERATIONS=5
SECTIONS="server fanout memory client"
JAVA=0
JAVA_FANOUT_ITERATIONS=3
JAVA_WARMUP_SECONDS=10
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --iterations) ITERATIONS=$2; shift 2 ;;
    --go-fanout-iterations) GO_FANOUT_ITERATIONS=$2; shift 2 ;;
    --client-iterations) CLIENT_ITERATIONS=$2; shift 2 ;;
    --sections) SECTIONS=$2; shift 2 ;;
    --java) JAVA=1; shift ;;
    --java-fanout-iterations) JAVA_FANOUT_ITERATIONS=$2; shift 2 ;;
    --java-warmup-seconds) JAVA_WARMUP_SECONDS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
OUT=$(mktemp -d /tmp/side-by-side-go.XXXXXX)
export CARGO_INCREMENTAL=0
if ! command -v protoc >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq protobuf-compiler >/dev/null
  fi
fi
timeout 3600 cargo build --release --manifest-path benches/side-by-side/Cargo.toml --target-dir target --bin vs_go
(cd benches/side-by-side/go && timeout 900 go build -o "$OUT/side-by-side-go" .)
if [ "$JAVA" = 1 ]; then
  (cd benches/side-by-side/java &&
    { timeout 600 mvn -q -B -o package || timeout 900 mvn -q -B package; })
  JAVA_CMD=(java -cp "benches/side-by-side/java/target/classes:$(cat benches/side-by-side/java/target/classpath.txt)"
    io.github.xdssansio.bench.Main)
fi
RUST=target/release/vs_go
GO=$OUT/side-by-side-go
BODIES=$OUT/bodies.bin
"$RUST" bodies "$BODIES"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(rustc --version); $(go version)"
if [ "$JAVA" = 1 ]; then
  echo "java-control-plane 1.0.49; $(java -version 2>&1 | head -1); Java fan-out iterations: SotW wildcard $JAVA_FANOUT_ITERATIONS, by name $ITERATIONS; JIT warm-up ${JAVA_WARMUP_SECONDS} s"
fi
echo "rounds: $ROUNDS; iterations: $ITERATIONS (fan-out: ours $RUST_FANOUT_ITERATIONS, Go $GO_FANOUT_ITERATIONS); sections: $SECTIONS"
echo "load before: $(uptime)"
for round in $(seq 1 "$ROUNDS"); do
  for section in $SECTIONS; do
    # Memory is counted, not timed: once per run.
    if [ "$section" = memory ] && [ "$round" -gt 1 ]; then
      continue
    fi
    if [ "$section" = client ]; then
      for peer in rust-opaque rust-typed grpc-go; do
        # A new client per iteration, its first response timed (grpc-go's channel with
        # 10 000 clusters stays busy for minutes after its endpoints arrive, so later
        # responses cannot be timed apart from that work).
        timeout 900 "$GO" -bodies "$BODIES" -iterations "$CLIENT_ITERATIONS" -client-first \
          -client-peer "$peer" -rust-bin "$RUST" client
      done
    else
      timeout 1800 "$RUST" "$section" --iterations "$ITERATIONS" \
        --fanout-iterations "$RUST_FANOUT_ITERATIONS"
      timeout 1800 "$GO" -bodies "$BODIES" -iterations "$ITERATIONS" \
        -fanout-iterations "$GO_FANOUT_ITERATIONS" "$section"
      if [ "$JAVA" = 1 ] && { [ "$section" = server ] || [ "$section" = fanout ]; }; then
        # SLF4J's note that no logger is bound (java-control-plane then logs nothing) is
        # dropped; every other line of stderr is kept.
        timeout 1800 "${JAVA_CMD[@]}" -bodies "$BODIES" -iterations "$ITERATIONS" \
          -fanout-iterations "$JAVA_FANOUT_ITERATIONS" -warmup-seconds "$JAVA_WARMUP_SECONDS" \
          "$section" 2> >(grep -v '^SLF4J: ' >&2)
      fi
    fi
  done | sed "s/^/$round\t/" | tee -a "$OUT/results.tsv"
done
echo "load after: $(uptime)"
# Ratios of medians (Go or Java / ours; memory: Go bytes / our bytes) per round, then the median
# of each over the rounds.
python3 - "$OUT/results.tsv" <<'PY'
import statistics, sys
from collections import defaultdict
med = defaultdict(dict)   # (figure, label) -> {round: value}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 5 and f[1] in ("RESULT", "MEMORY"):
        med[(f[2], f[3])][f[0]] = float(f[4])
pairs = []
for kind in ("fresh", "update", "hot"):
    for ours in (f"ours, {kind}", f"ours, {kind}, contiguous"):
        for go in ("snapshot", "linear", "java", "java-cached"):
            pairs.append(("server", f"{go}, {kind}", ours))
for fig in ("fanout.sotw-wildcard", "fanout.sotw-names", "fanout.delta",
            "memory.stream", "memory.tracked", "memory.stored"):
    for go in ("snapshot", "linear", "java", "java-cached"):
        pairs.append((fig, go, "ours"))
for ours in ("rust-opaque", "rust-typed"):
    pairs.append(("client.first", "grpc-go", ours))
    pairs.append(("client", "grpc-go", ours))
def show(fig, v):
    return f"{v:.0f} B" if fig.startswith("memory") else f"{v * 1e3:.3f} ms"
print("\n| figure | peer | ours | peer medians | our medians | ratio per round | median ratio |")
print("|---|---|---|---|---|---|---|")
for fig, go, ours in pairs:
    g, o = med.get((fig, go)), med.get((fig, ours))
    if not g or not o:
        continue
    rounds = sorted(set(g) & set(o), key=int)
    ratios = [g[r] / o[r] for r in rounds if o[r] > 0]
    if not ratios:
        continue
    print(f"| {fig} | {go} | {ours} | {', '.join(show(fig, g[r]) for r in rounds)} | "
          f"{', '.join(show(fig, o[r]) for r in rounds)} | {', '.join(f'{x:.1f}' for x in ratios)} | "
          f"**{statistics.median(ratios):.1f}x** |")
PY
echo "raw lines: $OUT/results.tsv"
