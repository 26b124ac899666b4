package xdssansio.interop.grpcjava;

import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.internal.GrpcUtil;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.xds.CsdsService;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.listener.v3.Listener;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import static xdssansio.interop.grpcjava.Resources.CDS;
import static xdssansio.interop.grpcjava.Resources.EDS;
import static xdssansio.interop.grpcjava.Resources.LDS;
import static xdssansio.interop.grpcjava.Resources.RDS;
import static xdssansio.interop.grpcjava.Resources.TARGET;

/**
 * Interop: our ads_server example <-> grpc-java's xDS client (io.grpc:grpc-xds), the
 * story of tests/interop/grpc_python/xds_flow.py step by step.
 *
 * <p>Starts two echo backends, our ads_server (SotW ADS) on 127.0.0.1, and a channel to
 * xds:///echo.test whose bootstrap (the io.grpc.xds.bootstrap property) names the server
 * (or, with XDS_TAP, `xds-sansio tap` in front of it). Serves a Listener, a
 * RouteConfiguration, a Cluster and a ClusterLoadAssignment, then walks the story, reading
 * the client's view through CSDS (grpc-xds's CsdsService on an admin server) after each
 * step and comparing it with the store. Every wait is bounded. Writes report.json (steps,
 * deviations, result) and exits non-zero on a failed expectation.
 *
 * <p>usage: XdsFlow ADS_SERVER_BINARY DESCRIPTORS WORKDIR
 */
public final class XdsFlow {
  private static final Duration STEP_TIMEOUT = Duration.ofSeconds(20);

  private final Report report = new Report("grpc-java " + GrpcUtil.IMPLEMENTATION_VERSION);

  static void log(String text) {
    System.out.println("[grpc-java] " + text);
    System.out.flush();
  }

  private static String waitCall(ManagedChannel channel, String what, Predicate<String> ok)
      throws InterruptedException {
    long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
    String result = null;
    while (System.nanoTime() < deadline) {
      result = Echo.call(channel);
      if (ok.test(result)) {
        return result;
      }
      Thread.sleep(100);
    }
    throw new FlowFailure("timed out waiting for RPCs: " + what + " (last result " + result + ")");
  }

  private static Map<Key, Set<String>> expect(Object... keysAndStatuses) {
    Map<Key, Set<String>> out = new LinkedHashMap<>();
    for (int i = 0; i < keysAndStatuses.length; i += 2) {
      out.put((Key) keysAndStatuses[i], Set.of((String[]) keysAndStatuses[i + 1]));
    }
    return out;
  }

  private static String[] any(String... statuses) {
    return statuses;
  }

  private static Cluster heldCluster(Csds.Entry entry) throws InvalidProtocolBufferException {
    return Cluster.parseFrom(entry.body() == null ? new byte[0] : entry.body());
  }

  private static void writeBootstrap(Path file, String address) throws IOException {
    Files.writeString(
        file,
        "{\"xds_servers\": [{\"server_uri\": \"" + address + "\","
            + " \"channel_creds\": [{\"type\": \"insecure\"}],"
            + " \"server_features\": [\"xds_v3\"]}],"
            + " \"node\": {\"id\": \"grpc-java-interop\", \"cluster\": \"interop\","
            + " \"locality\": {\"zone\": \"z\"}}}\n",
        StandardCharsets.UTF_8);
  }

  private void run(String binary, String descriptors, Path workdir) throws Exception {
    Files.createDirectories(workdir);
    Record record = new Record(workdir.resolve("record.jsonl"));
    Server backend1 = Echo.backend("B1");
    Server backend2 = Echo.backend("B2");
    Store store = new Store(workdir.resolve("resources.json"));
    store.set(Resources.listener());
    store.set(Resources.route());
    store.set(Resources.cluster(true, false));
    store.set(Resources.endpoints(backend1.getPort()));
    store.write();

    Process server =
        new ProcessBuilder(
                binary, "--listen", "127.0.0.1:0", "--resources",
                workdir.resolve("resources.json").toString(), "--descriptors", descriptors,
                "--record", record.path.toString(), "--verbose")
            .redirectError(workdir.resolve("ads_server.log").toFile())
            .start();
    store.serveTo(server);
    Tap tap = null;
    Server admin = null;
    ManagedChannel channel = null;
    ManagedChannel adminChannel = null;
    try {
      BufferedReader out =
          new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
      String line = out.readLine();
      if (line == null || !line.startsWith("listening on ")) {
        throw new FlowFailure("ads_server did not start: " + line);
      }
      drain(out);
      String[] words = line.split("\\s+");
      String address = words[words.length - 1];
      log("ads_server at " + address);
      tap = Tap.start(address, workdir);
      if (tap != null) {
        address = tap.address;
        log("the client goes through the tap at " + address);
      }
      Path bootstrap = workdir.resolve("bootstrap.json");
      writeBootstrap(bootstrap, address);
      // Read when the first xDS channel starts: one XdsClient per process.
      System.setProperty("io.grpc.xds.bootstrap", bootstrap.toString());

      admin =
          NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
              .addService(CsdsService.newInstance())
              .build()
              .start();
      adminChannel =
          Grpc.newChannelBuilder(
                  "127.0.0.1:" + admin.getPort(), InsecureChannelCredentials.create())
              .build();
      Csds csds = new Csds(adminChannel, report);

      channel =
          Grpc.newChannelBuilder("xds:///" + TARGET, InsecureChannelCredentials.create()).build();
      story(channel, csds, store, record, server, backend2.getPort());
    } finally {
      if (channel != null) {
        channel.shutdownNow();
      }
      if (adminChannel != null) {
        adminChannel.shutdownNow();
      }
      if (admin != null) {
        admin.shutdownNow();
      }
      if (tap != null) {
        tap.stop();
      }
      server.destroy();
      if (!server.waitFor(5, TimeUnit.SECONDS)) {
        server.destroyForcibly();
      }
      backend1.shutdownNow();
      backend2.shutdownNow();
    }
  }

  /** Reads what ads_server prints after its first line, so its pipe never fills. */
  private static void drain(BufferedReader out) {
    Thread thread =
        new Thread(
            () -> {
              try {
                while (out.readLine() != null) {
                  // discarded: the record and the log say it all
                }
              } catch (IOException e) {
                // the server ended
              }
            });
    thread.setDaemon(true);
    thread.start();
  }

  private void story(
      ManagedChannel channel, Csds csds, Store store, Record record, Process server, int port2)
      throws Exception {
    Key cds = new Key(CDS, "cluster-1");
    Key eds = new Key(EDS, "cluster-1");
    Key rds = new Key(RDS, "route-1");
    Key lds = new Key(LDS, TARGET);

    // 1. An RPC through xDS succeeds.
    waitCall(channel, "first RPC through xDS", "B1"::equals);
    csds.compare(store, "first fetch", Map.of());
    log("1. RPC through xDS: ok");

    // 2. An invalid Cluster is NACKed with error_detail; the server holds it.
    store.set(Resources.cluster(false, false));
    store.write();
    Map.Entry<Integer, JsonObject> nack =
        record.await(
            "a CDS NACK",
            (i, l) ->
                Record.fromClient(l)
                    && Record.str(Record.message(l), "typeUrl").equals(CDS)
                    && Record.message(l).has("errorDetail"),
            STEP_TIMEOUT);
    JsonObject error = Record.message(nack.getValue()).getAsJsonObject("errorDetail");
    log("2. NACK: " + error);
    if (!error.has("message") || Record.str(error, "message").isEmpty()) {
      report.deviation("NACK error_detail has no message");
    }
    Thread.sleep(2000);
    List<JsonObject> messages = record.messages();
    for (int i = nack.getKey() + 1; i < messages.size(); i++) {
      JsonObject l = messages.get(i);
      if (!Record.fromClient(l) && Record.str(Record.message(l), "typeUrl").equals(CDS)) {
        throw new FlowFailure("the server resent CDS after the NACK: " + l);
      }
    }
    if (!Echo.call(channel).equals("B1")) {
      throw new FlowFailure("RPCs stopped working after the NACK");
    }
    Map<Key, Csds.Entry> view = csds.compare(store, "NACK", expect(cds, any("NACKED")));
    if (view.get(cds).error().isEmpty()) {
      report.deviation("CSDS shows no error_state details for the NACKed cluster");
    }
    if (!heldCluster(view.get(cds)).equals(Resources.cluster(true, false))) {
      report.deviation("CSDS does not show the last good cluster while NACKED");
    }
    JsonObject nackStep = Report.step("NACK", "error_detail", error);
    nackStep.addProperty("resent", false);
    report.step(nackStep);

    // 3. Fix the cluster; an endpoint change takes effect.
    store.set(Resources.cluster(true, false));
    store.write();
    csds.compare(store, "cluster fixed", Map.of());
    store.set(Resources.endpoints(port2));
    store.write();
    waitCall(channel, "endpoint change to B2", "B2"::equals);
    csds.compare(store, "endpoint change", Map.of());
    log("3. endpoint change: ok");

    // 4. Cluster removal and restore.
    store.remove(CDS, "cluster-1");
    store.write();
    record.await("a CDS response without cluster-1", (i, l) -> emptyResponse(l, CDS), STEP_TIMEOUT);
    csds.compare(
        store,
        "cluster removal",
        // No cluster, no interest in its endpoints.
        expect(cds, any("DOES_NOT_EXIST", "ABSENT"), eds, any("ACKED", "ABSENT")));
    Thread.sleep(1000);
    String afterRemoval = Echo.call(channel);
    report.step(Report.step("cluster removal", "rpc", new JsonPrimitive(afterRemoval)));
    if (afterRemoval.equals("B2")) {
      report.deviation(
          "after the Cluster is removed RPCs still reach the old endpoints "
              + "(deletion ignored, as gRFC A88 allows without fail_on_data_errors)");
    }
    store.set(Resources.cluster(true, true));
    store.write();
    waitCall(channel, "RPCs after the cluster is restored", "B2"::equals);
    csds.compare(store, "cluster restore", Map.of());
    log("4. cluster removal/restore: ok (RPC during removal: " + afterRemoval + ")");

    // 5. Listener removal and restore.
    store.remove(LDS, TARGET);
    store.write();
    record.await(
        "an LDS response without the listener", (i, l) -> emptyResponse(l, LDS), STEP_TIMEOUT);
    csds.compare(
        store,
        "listener removal",
        // No listener, no interest in what it referred to.
        expect(
            lds, any("DOES_NOT_EXIST", "ABSENT"),
            rds, any("ACKED", "ABSENT"),
            cds, any("ACKED", "ABSENT"),
            eds, any("ACKED", "ABSENT")));
    Thread.sleep(1000);
    afterRemoval = Echo.call(channel);
    report.step(Report.step("listener removal", "rpc", new JsonPrimitive(afterRemoval)));
    if (afterRemoval.equals("B2")) {
      report.deviation("after the Listener is removed RPCs still work (deletion ignored)");
    }
    Listener restored = Resources.listener().toBuilder().setStatPrefix("restored").build();
    store.set(restored);
    store.write();
    waitCall(channel, "RPCs after the listener is restored", "B2"::equals);
    csds.compare(store, "listener restore", Map.of());
    log("5. listener removal/restore: ok (RPC during removal: " + afterRemoval + ")");

    // 6. The server ends the stream; the client reconnects with its last versions.
    record.settled(STEP_TIMEOUT);
    Map<String, String> last = new LinkedHashMap<>();
    Set<String> streams = new HashSet<>();
    for (JsonObject l : record.messages()) {
      JsonObject m = Record.message(l);
      streams.add(Record.stream(l));
      if (Record.fromClient(l) && !m.has("errorDetail") && !Record.str(m, "versionInfo").isEmpty()) {
        last.put(Record.str(m, "typeUrl"), Record.str(m, "versionInfo"));
      }
    }
    Signals.send(server, "USR1");
    record.await(
        "requests on a new stream",
        (i, l) -> !streams.contains(Record.stream(l)) && Record.fromClient(l),
        STEP_TIMEOUT);
    Thread.sleep(1000);
    Map<String, String> first = new LinkedHashMap<>();
    for (JsonObject l : record.messages()) {
      if (!streams.contains(Record.stream(l)) && Record.fromClient(l)) {
        JsonObject m = Record.message(l);
        first.putIfAbsent(Record.str(m, "typeUrl"), Record.str(m, "versionInfo"));
      }
    }
    JsonObject reconnect = Report.step("reconnect", "held", toJson(last));
    reconnect.add("first_requests", toJson(first));
    report.step(reconnect);
    for (Map.Entry<String, String> held : last.entrySet()) {
      String got = first.get(held.getKey());
      if (!held.getValue().equals(got)) {
        report.deviation(
            "after reconnect the first " + Resources.shortType(held.getKey())
                + " request carries version '" + got + "', not the last ACKed '"
                + held.getValue() + "'");
      }
    }
    if (!Echo.call(channel).equals("B2")) {
      throw new FlowFailure("RPCs broke across the reconnect");
    }
    csds.compare(store, "reconnect", Map.of());
    log("6. reconnect with last versions: " + first);
  }

  private static boolean emptyResponse(JsonObject line, String typeUrl) {
    JsonObject m = Record.message(line);
    return !Record.fromClient(line)
        && Record.str(m, "typeUrl").equals(typeUrl)
        && (!m.has("resources") || m.getAsJsonArray("resources").isEmpty());
  }

  private static JsonObject toJson(Map<String, String> map) {
    JsonObject out = new JsonObject();
    map.forEach(out::addProperty);
    return out;
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: XdsFlow ADS_SERVER_BINARY DESCRIPTORS WORKDIR");
      System.exit(2);
    }
    Path workdir = Path.of(args[2]);
    XdsFlow flow = new XdsFlow();
    int code = 0;
    try {
      flow.run(args[0], args[1], workdir);
      flow.report.finish("passed", null);
    } catch (Exception e) { // report, then fail
      String message = e instanceof FlowFailure ? e.getMessage() : e.toString();
      flow.report.finish("FAILED: " + message, message);
      if (!(e instanceof FlowFailure)) {
        e.printStackTrace();
      }
      code = 1;
    }
    Files.createDirectories(workdir);
    flow.report.write(workdir.resolve("report.json"));
    log("report: " + flow.report.text());
    System.exit(code);
  }
}
