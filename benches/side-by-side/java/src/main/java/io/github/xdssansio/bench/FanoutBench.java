package io.github.xdssansio.bench;

import io.envoyproxy.controlplane.cache.v3.SimpleCache;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.controlplane.server.serializer.ProtoResourcesSerializer;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Fan-out: cluster 0 of the 10 000 changes; timed from the new snapshot handed to
 * {@code setSnapshot} (built untimed) to the wire bytes of every one of the 1 000 streams'
 * responses (SimpleCache answers every open watch inside {@code setSnapshot}, and the
 * server's consumer serializes on the direct executor). The 1 000 watches are of one node,
 * so one snapshot reaches them all; the ACKs that follow are untimed.
 */
final class FanoutBench {
  static final int STREAMS = 1_000;

  private final Bodies bodies;
  private final SimpleCache<String> cache;
  private final List<SotwStream> streams = new ArrayList<>();
  private final int want;
  private int round;

  /** Stream s of the by-name variant: the changed cluster and 10s+1 .. 10s+9. */
  static List<String> byName(int s) {
    List<String> names = new ArrayList<>();
    names.add(clusterName(0));
    for (int k = 1; k <= 9; k++) {
      names.add(clusterName(10 * s + k));
    }
    return names;
  }

  static String clusterName(int i) {
    return String.format("cluster-%05d", i);
  }

  /**
   * Every stream's first response and ACK. Wildcard: only stream 0 gets its first response
   * from the cache; the others start from a copy of its state (nonce, names, version: what
   * each would hold after its own first response), then ACK, as the Go side does.
   */
  FanoutBench(Bodies b, ProtoResourcesSerializer serializer, boolean wildcard) {
    this.bodies = b;
    this.cache = ServerBench.newCache(b.typed, "v0");
    SotwStream first = null;
    for (int s = 0; s < STREAMS; s++) {
      List<String> names = wildcard ? List.of() : byName(s);
      SotwStream st = new SotwStream(serializer, ServerBench.NODE, names);
      if (wildcard && first != null) {
        st.copyStateOf(first);
      } else {
        st.request(cache);
        if (st.responses != 1) {
          throw new IllegalStateException("stream " + s + ": no first response");
        }
        first = st;
      }
      st.ack(cache);
      streams.add(st);
    }
    this.want = wildcard ? b.typed.size() : 10;
  }

  /** One round; with check, two responses decoded and every stream's count checked after. */
  long run(boolean check) {
    round++;
    List<Cluster> clusters = new ArrayList<>(bodies.typed);
    clusters.set(0, bodies.changed[round % 2]);
    Snapshot snap = ServerBench.snapshot(clusters, "v" + round);
    SotwStream head = streams.get(0);
    SotwStream tail = streams.get(STREAMS - 1);
    head.keepWire = check;
    tail.keepWire = check;
    int[] before = new int[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
      before[i] = streams.get(i).responses;
    }
    long start = System.nanoTime();
    cache.setSnapshot(ServerBench.NODE, snap);
    long d = System.nanoTime() - start;
    for (int i = 0; i < STREAMS; i++) {
      SotwStream s = streams.get(i);
      if (s.responses != before[i] + 1 || s.lastResources != want) {
        throw new IllegalStateException("fan-out: a stream without its response of " + want);
      }
    }
    if (check) {
      for (SotwStream s : List.of(head, tail)) {
        try {
          int n = DiscoveryResponse.parseFrom(s.lastWire).getResourcesCount();
          if (n != want) {
            throw new IllegalStateException("fan-out: a response with " + n + ", want " + want);
          }
        } catch (IOException e) {
          throw new IllegalStateException(e);
        }
        s.lastWire = null;
        s.keepWire = false;
      }
    }
    for (SotwStream s : streams) {
      s.ack(cache);
    }
    return d;
  }

  /**
   * SotW wildcard: one untimed, checked warm-up round (10 M Cluster encodes: the JIT is warm
   * after it), then wildcardIterations timed rounds. SotW by name (cheap): warm-up rounds
   * for warmupSeconds (the first one checked), then namesIterations timed rounds.
   */
  static void run(Bodies b, String label, ProtoResourcesSerializer serializer,
      int wildcardIterations, int namesIterations, double warmupSeconds) {
    FanoutBench wildcard = new FanoutBench(b, serializer, true);
    long warm = wildcard.run(true);
    System.err.printf("# fanout.sotw-wildcard, %s: 1 untimed warm-up round, %.3f s%n", label,
        warm / 1e9);
    Timing.rotate("fanout.sotw-wildcard", wildcardIterations,
        List.of(new Timing.Contender(label, () -> wildcard.run(false))));
    wildcard.streams.clear();

    FanoutBench names = new FanoutBench(b, serializer, false);
    names.run(true);
    List<Timing.Contender> contenders =
        List.of(new Timing.Contender(label, () -> names.run(false)));
    long start = System.nanoTime();
    int rounds = Timing.warmUp(warmupSeconds, contenders);
    System.err.printf("# fanout.sotw-names, %s: JIT warm-up, %d untimed rounds in %.1f s%n",
        label, rounds + 1, (System.nanoTime() - start) / 1e9);
    Timing.rotate("fanout.sotw-names", namesIterations, contenders);
  }
}
