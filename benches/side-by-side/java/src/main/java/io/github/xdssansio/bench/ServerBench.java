package io.github.xdssansio.bench;

import com.google.protobuf.Any;
import com.google.protobuf.ByteString;
import io.envoyproxy.controlplane.cache.v3.SimpleCache;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.controlplane.server.serializer.ProtoResourcesSerializer;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.core.v3.Node;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Server: a wildcard CDS request on a new ADS stream to the wire bytes of the 10 000-cluster
 * response. "fresh": a SimpleCache loaded (untimed) just before with newly parsed clusters,
 * the request the first it serves; "update": a new snapshot with cluster 0 changed set
 * (untimed) on a cache already used, the request the first at that revision; "hot": a
 * further stream at the same revision.
 */
final class ServerBench {
  static final String NODE = "envoy-0";

  private ServerBench() {}

  /** A cache grouping nodes by id (go-control-plane's IDHash), one snapshot of clusters. */
  static SimpleCache<String> newCache(List<Cluster> clusters, String version) {
    SimpleCache<String> cache = new SimpleCache<>(Node::getId);
    cache.setSnapshot(NODE, snapshot(clusters, version));
    return cache;
  }

  static Snapshot snapshot(List<Cluster> clusters, String version) {
    return Snapshot.create(clusters, List.of(), List.of(), List.of(), List.of(), version);
  }

  /** One wildcard request on a new stream, timed to the wire bytes; returns ns. */
  static long wildcardSpan(ProtoResourcesSerializer serializer, SimpleCache<String> cache,
      SotwStream[] keep) {
    SotwStream s = new SotwStream(serializer, NODE, List.of());
    s.keepWire = keep != null;
    long start = System.nanoTime();
    s.request(cache);
    long d = System.nanoTime() - start;
    if (s.responses != 1) {
      throw new IllegalStateException("the cache did not answer");
    }
    if (keep != null) {
      keep[0] = s;
    }
    return d;
  }

  /** Decodes wire and checks it carries exactly bodies (any order). */
  static void checkResponse(String label, byte[] wire, List<ByteString> bodies) throws IOException {
    DiscoveryResponse resp = DiscoveryResponse.parseFrom(wire);
    List<ByteString> got = new ArrayList<>();
    for (Any a : resp.getResourcesList()) {
      if (!a.getTypeUrl().equals(SotwStream.CDS)) {
        throw new IllegalStateException(label + ": type url " + a.getTypeUrl());
      }
      got.add(a.getValue());
    }
    List<ByteString> want = new ArrayList<>(bodies);
    Comparator<ByteString> order = ByteString.unsignedLexicographicalComparator();
    got.sort(order);
    want.sort(order);
    if (!got.equals(want)) {
      throw new IllegalStateException(label + ": " + got.size() + " resources, not the "
          + want.size() + " bodies");
    }
  }

  /**
   * label is "java" (the default serializer) or "java-cached" (CachedProtoResourcesSerializer:
   * one process-wide Guava cache of each message's Any, weak values, so a message's Any is
   * reused while any response still holds it; a "fresh" cache's newly parsed clusters are
   * equal to earlier ones and may hit it too).
   */
  static void run(Bodies b, String label, ProtoResourcesSerializer serializer, int iterations,
      double warmupSeconds) throws IOException {
    SimpleCache<String> hot = newCache(b.fresh(), "v1");
    SotwStream[] kept = new SotwStream[1];
    wildcardSpan(serializer, newCache(b.fresh(), "v1"), kept);
    checkResponse(label + ", fresh", kept[0].lastWire, b.javaRaw);
    wildcardSpan(serializer, hot, kept);
    checkResponse(label + ", hot", kept[0].lastWire, b.javaRaw);
    List<Cluster> updated = new ArrayList<>(b.typed);
    updated.set(0, b.changed[0]);
    SimpleCache<String> check = newCache(b.fresh(), "v1");
    wildcardSpan(serializer, check, null);
    check.setSnapshot(NODE, snapshot(updated, "v2"));
    wildcardSpan(serializer, check, kept);
    List<ByteString> updatedBodies = new ArrayList<>(b.javaRaw);
    updatedBodies.set(0, b.changed[0].toByteString());
    checkResponse(label + ", update", kept[0].lastWire, updatedBodies);

    int[] generation = {0};
    List<Timing.Contender> contenders = List.of(
        new Timing.Contender(label + ", fresh",
            () -> wildcardSpan(serializer, newCache(b.fresh(), "v1"), null)),
        new Timing.Contender(label + ", update", () -> {
          generation[0]++;
          List<Cluster> clusters = new ArrayList<>(b.typed);
          clusters.set(0, b.changed[generation[0] % 2]);
          hot.setSnapshot(NODE, snapshot(clusters, "v" + (generation[0] + 1)));
          return wildcardSpan(serializer, hot, null);
        }),
        new Timing.Contender(label + ", hot", () -> wildcardSpan(serializer, hot, null)));
    long start = System.nanoTime();
    int rounds = Timing.warmUp(warmupSeconds, contenders);
    System.err.printf("# server, %s: JIT warm-up, %d untimed rounds of 3 contenders in %.1f s%n",
        label, rounds, (System.nanoTime() - start) / 1e9);
    Timing.rotate("server", iterations, contenders);
  }
}
