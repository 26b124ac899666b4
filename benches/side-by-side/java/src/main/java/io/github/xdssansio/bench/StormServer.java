package io.github.xdssansio.bench;

import io.envoyproxy.controlplane.cache.SnapshotConsistencyException;
import io.envoyproxy.controlplane.cache.v3.SimpleCache;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.controlplane.server.V3DiscoveryServer;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.Reader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * The java-control-plane side of the connection-storm benchmark, the twin of
 * benches/side-by-side/go/storm: java-control-plane's real ADS server (SotW and delta,
 * {@link V3DiscoveryServer} with its defaults) on a grpc-java Netty server, as an operator would
 * run it, serving one snapshot of 1 000 clusters to every client, whatever its node id.
 *
 * <p>Protocol with the parent (the Rust benchmark): once it serves, StormServer prints one line,
 * "listening 127.0.0.1:PORT", and nothing else to stdout. Each stdin line "tick N" sets snapshot
 * version N, where cluster-0000 carries tick N. Stdin EOF stops the server (not gracefully:
 * clients may hold streams open) and exits 0; any other line, or any error, goes to stderr with
 * exit status 2.
 *
 * <pre>java -cp "target/classes:$(cat target/classpath.txt)" io.github.xdssansio.bench.StormServer</pre>
 */
public final class StormServer {
  static final int CLUSTERS = 1_000;
  /** The encoded size of every cluster; the Rust and Go sides serve the same bytes. */
  static final int CLUSTER_SIZE = 150;
  static final String NODE_KEY = "storm";
  /** The most "t%08d-" holds in 9 bytes (keeping CLUSTER_SIZE). */
  static final long MAX_TICK = 99_999_999L;
  private static final String TICK = "tick ";
  /** What Go's strconv.ParseUint(s, 10, 64) accepts, bar the range: no sign, no spaces. */
  private static final Pattern DIGITS = Pattern.compile("[0-9]+");

  /** Every node, whatever its id, is in the one group NODE_KEY. */
  private final SimpleCache<String> cache = new SimpleCache<>(node -> NODE_KEY);
  /** Clusters 1..999 at tick 0, built once and shared by every snapshot. */
  private final List<Cluster> fixed = new ArrayList<>(CLUSTERS - 1);
  private Server server;

  StormServer() {
    for (int i = 1; i < CLUSTERS; i++) {
      fixed.add(cluster(i, 0));
    }
  }

  /**
   * Cluster i at tick: a 12-byte name and a 132-byte alt_stat_name (field 28, so a two-byte
   * tag), which encode to exactly CLUSTER_SIZE bytes.
   */
  static Cluster cluster(int i, long tick) {
    return Cluster.newBuilder()
        .setName(String.format("cluster-%04d", i))
        .setAltStatName(String.format("t%08d-", tick) + "x".repeat(122))
        .build();
  }

  /** Makes version tick the snapshot of every node: cluster-0000 at tick, the rest at 0. */
  void set(long tick) {
    if (tick < 0 || tick > MAX_TICK) {
      throw new IllegalArgumentException("tick " + tick + " exceeds " + MAX_TICK);
    }
    Cluster first = cluster(0, tick);
    int size = first.getSerializedSize();
    if (size != CLUSTER_SIZE) {
      throw new IllegalStateException(
          "cluster-0000 encodes to " + size + " bytes, not " + CLUSTER_SIZE);
    }
    List<Cluster> clusters = new ArrayList<>(CLUSTERS);
    clusters.add(first);
    clusters.addAll(fixed);
    Snapshot snapshot = Snapshot.create(clusters, List.of(), List.of(), List.of(), List.of(),
        Long.toString(tick));
    try {
      snapshot.ensureConsistent();
    } catch (SnapshotConsistencyException e) {
      throw new IllegalStateException("inconsistent snapshot: " + e.getMessage(), e);
    }
    cache.setSnapshot(NODE_KEY, snapshot);
  }

  /** Runs one stdin line; IllegalArgumentException when it is not "tick N". */
  void handle(String line) {
    if (!line.startsWith(TICK)) {
      throw new IllegalArgumentException("unexpected line \"" + line + "\" (want \"tick N\")");
    }
    String arg = line.substring(TICK.length());
    if (!DIGITS.matcher(arg).matches()) {
      throw new IllegalArgumentException("unexpected line \"" + line + "\": not a tick");
    }
    long tick;
    try {
      tick = Long.parseLong(arg);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("unexpected line \"" + line + "\": out of range", e);
    }
    set(tick);
  }

  /** Sets snapshot 0, then serves ADS on 127.0.0.1 at an ephemeral port. */
  void start() throws IOException {
    set(0);
    V3DiscoveryServer discovery = new V3DiscoveryServer(cache);
    // Clients multiplex 100 streams per connection: never refuse one. All else default.
    server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .maxConcurrentCallsPerConnection(1 << 20)
        .addService(discovery.getAggregatedDiscoveryServiceImpl())
        .build()
        .start();
  }

  int port() {
    return server.getPort();
  }

  /** Stops the server, cancelling open streams (the Go side's grpc.Server.Stop). */
  void stop() throws InterruptedException {
    if (server != null) {
      server.shutdownNow();
      server.awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  /**
   * Serves until in ends (0) or a line is wrong (2, the error on err); the listening line goes
   * to out. It is main without the process: tests drive it through pipes.
   */
  static int run(Reader in, PrintStream out, PrintStream err) {
    StormServer s = new StormServer();
    try {
      s.start();
      out.println("listening 127.0.0.1:" + s.port());
      out.flush();
      if (out.checkError()) {
        throw new IOException("cannot write the listening line");
      }
      BufferedReader lines = new BufferedReader(in);
      for (String line = lines.readLine(); line != null; line = lines.readLine()) {
        s.handle(line);
      }
      return 0;
    } catch (Exception e) {
      err.println("storm: " + (e.getMessage() != null ? e.getMessage() : e.toString()));
      err.flush();
      return 2;
    } finally {
      if (s.server != null) {
        s.server.shutdownNow();
      }
    }
  }

  public static void main(String[] args) {
    // Stdout carries the listening line only: anything else printing to System.out (a
    // library's logging) goes to stderr.
    PrintStream stdout = System.out;
    System.setOut(System.err);
    int status = run(new InputStreamReader(System.in, StandardCharsets.UTF_8), stdout, System.err);
    // grpc and Netty threads may linger after shutdownNow.
    System.exit(status);
  }
}
