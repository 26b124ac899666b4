package io.github.xdssansio.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.envoyproxy.controlplane.cache.Resources;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.core.v3.Node;
import io.envoyproxy.envoy.service.discovery.v3.AggregatedDiscoveryServiceGrpc;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DeltaDiscoveryResponse;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PipedReader;
import java.io.PipedWriter;
import java.io.PrintStream;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Go twin's tests (benches/side-by-side/go/storm/main_test.go) on the Java server. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class StormServerTest {
  private static final String CDS = Resources.V3.CLUSTER_TYPE_URL;
  private static final long WAIT_SECONDS = 20;

  private ManagedChannel channel;
  private PipedWriter stdin;
  private CompletableFuture<Integer> status;

  @AfterEach
  void tearDown() throws Exception {
    if (channel != null) {
      channel.shutdownNow();
      channel.awaitTermination(WAIT_SECONDS, TimeUnit.SECONDS);
    }
    if (stdin != null) {
      stdin.close();
      assertEquals(0, status.get(WAIT_SECONDS, TimeUnit.SECONDS), "run's exit status");
    }
  }

  /** TestClusterBytes: the wire layout the Rust and Go sides also serve. */
  @Test
  void clusterBytes() {
    byte[] b = StormServer.cluster(7, 7).toByteArray();
    assertEquals(StormServer.CLUSTER_SIZE, b.length);
    assertEquals(0x0a, b[0], "name tag");
    assertEquals(12, b[1], "name length");
    assertEquals("cluster-0007", new String(b, 2, 12, StandardCharsets.UTF_8));
    assertArrayEquals(new byte[] {(byte) 0xe2, 0x01}, Arrays.copyOfRange(b, 14, 16),
        "alt_stat_name tag");
    assertArrayEquals(new byte[] {(byte) 0x84, 0x01}, Arrays.copyOfRange(b, 16, 18),
        "alt_stat_name length (varint 132)");
    String alt = new String(b, 18, b.length - 18, StandardCharsets.UTF_8);
    assertEquals(132, alt.length());
    assertEquals("t00000007-" + "x".repeat(122), alt);
  }

  /**
   * Runs StormServer.run in process, stdin a pipe this test writes lines to, and returns the
   * port of its listening line; tearDown closes stdin and checks run returned 0.
   */
  private int start() throws Exception {
    stdin = new PipedWriter();
    PipedReader in = new PipedReader(stdin, 1 << 16);
    CompletableFuture<String> line = new CompletableFuture<>();
    PrintStream out = new PrintStream(new LineOut(line), true, StandardCharsets.UTF_8);
    status = CompletableFuture.supplyAsync(() -> {
      int s = StormServer.run(in, out, System.err);
      line.complete("(run returned " + s + " first)");
      return s;
    }, r -> new Thread(r, "storm-run").start());
    String got = line.get(WAIT_SECONDS, TimeUnit.SECONDS);
    String prefix = "listening 127.0.0.1:";
    assertTrue(got.startsWith(prefix), "first line " + got);
    int port = Integer.parseInt(got.substring(prefix.length()));
    channel = NettyChannelBuilder.forAddress("127.0.0.1", port).usePlaintext().build();
    return port;
  }

  @Test
  void sotw() throws Exception {
    start();
    Responses<DiscoveryResponse> responses = new Responses<>();
    StreamObserver<DiscoveryRequest> requests =
        AggregatedDiscoveryServiceGrpc.newStub(channel).streamAggregatedResources(responses);
    requests.onNext(DiscoveryRequest.newBuilder()
        .setNode(Node.newBuilder().setId("anything"))
        .setTypeUrl(CDS)
        .build());
    DiscoveryResponse r = responses.next();
    assertEquals(StormServer.CLUSTERS, r.getResourcesCount(), "first response's resources");
    assertEquals("0", r.getVersionInfo());
    requests.onNext(DiscoveryRequest.newBuilder()
        .setTypeUrl(CDS)
        .setVersionInfo(r.getVersionInfo())
        .setResponseNonce(r.getNonce())
        .build());
    stdin.write("tick 3\n");
    stdin.flush();
    r = responses.next();
    assertEquals(StormServer.CLUSTERS, r.getResourcesCount(), "second response's resources");
    assertEquals("3", r.getVersionInfo());
    Cluster first = null;
    for (var any : r.getResourcesList()) {
      Cluster c = any.unpack(Cluster.class);
      if (c.getName().equals("cluster-0000")) {
        first = c;
      }
    }
    assertNotNull(first, "no cluster-0000");
    assertTrue(first.getAltStatName().startsWith("t00000003-"),
        "cluster-0000 alt_stat_name " + first.getAltStatName());
    requests.onCompleted();
  }

  @Test
  void deltaWildcard() throws Exception {
    start();
    Responses<DeltaDiscoveryResponse> responses = new Responses<>();
    StreamObserver<DeltaDiscoveryRequest> requests =
        AggregatedDiscoveryServiceGrpc.newStub(channel).deltaAggregatedResources(responses);
    requests.onNext(DeltaDiscoveryRequest.newBuilder()
        .setNode(Node.newBuilder().setId("other-node"))
        .setTypeUrl(CDS)
        .addResourceNamesSubscribe("*")
        .build());
    DeltaDiscoveryResponse r = responses.next();
    assertEquals(StormServer.CLUSTERS, r.getResourcesCount());
    requests.onCompleted();
  }

  /** TestBadLine: a line other than "tick N" is an error (main exits 2 on it). */
  @Test
  void badLine() {
    for (String line : new String[] {"tock 1", "tick", "tick ", "tick -1", "tick +1", "tick x",
        "tick 100000000", "tick 99999999999999999999", " tick 1", "tick 1 "}) {
      assertThrows(IllegalArgumentException.class, () -> new StormServer().handle(line),
          "\"" + line + "\" accepted");
    }
    new StormServer().handle("tick 99999999");
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int s = StormServer.run(new StringReader("tick 1\ntock 2\n"), new PrintStream(out, true),
        new PrintStream(err, true));
    assertEquals(2, s);
    assertTrue(err.toString(StandardCharsets.UTF_8).contains("tock 2"), err.toString());
    assertEquals(1, out.toString(StandardCharsets.UTF_8).split("\n", -1).length - 1);
  }

  /** TestImmediateEOF: stdin may end at once; that is still exit 0, one line out. */
  @Test
  void immediateEof() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int s = StormServer.run(new StringReader(""), new PrintStream(out, true), System.err);
    assertEquals(0, s);
    String got = out.toString(StandardCharsets.UTF_8);
    assertTrue(got.matches("listening 127\\.0\\.0\\.1:[0-9]+\n"), "stdout " + got);
  }

  /** Completes line with the first line written, without its newline. */
  private static final class LineOut extends OutputStream {
    private final CompletableFuture<String> line;
    private final ByteArrayOutputStream buf = new ByteArrayOutputStream();

    LineOut(CompletableFuture<String> line) {
      this.line = line;
    }

    @Override
    public synchronized void write(int b) {
      if (b == '\n') {
        line.complete(buf.toString(StandardCharsets.UTF_8));
      } else {
        buf.write(b);
      }
    }
  }

  /** A response observer whose next() waits up to WAIT_SECONDS for the next response. */
  private static final class Responses<T> implements StreamObserver<T> {
    private final BlockingQueue<Object> queue = new LinkedBlockingQueue<>();

    @Override
    public void onNext(T value) {
      queue.add(value);
    }

    @Override
    public void onError(Throwable t) {
      queue.add(t);
    }

    @Override
    public void onCompleted() {
      queue.add(new IOException("stream completed"));
    }

    @SuppressWarnings("unchecked")
    T next() throws Exception {
      Object o = queue.poll(WAIT_SECONDS, TimeUnit.SECONDS);
      if (o == null) {
        fail("no response in " + WAIT_SECONDS + " s");
      }
      if (o instanceof Throwable t) {
        throw new AssertionError("stream failed", t);
      }
      return (T) o;
    }
  }
}
