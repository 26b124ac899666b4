package io.github.xdssansio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.grpc.CallOptions;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Java package against the real peer of its language: grpc-java's xDS client resolving
 * xds:///echo.test through the in-process control plane (the repository's
 * examples/data/resources.json, canonical JSON read with examples/data/envoy.desc), then
 * the checker on what it did.
 */
class GrpcJavaXdsTest {
  static final String CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
  static final String EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
  static final Path DATA = Path.of("..", "..", "examples", "data").toAbsolutePath().normalize();
  static final String DESCRIPTORS = DATA.resolve("envoy.desc").toString();
  static final long WAIT_MS = 20_000;

  static final MethodDescriptor<byte[], byte[]> ECHO =
      MethodDescriptor.<byte[], byte[]>newBuilder()
          .setType(MethodDescriptor.MethodType.UNARY)
          .setFullMethodName("interop.Echo/Echo")
          .setRequestMarshaller(new Bytes())
          .setResponseMarshaller(new Bytes())
          .build();

  /** The four resources of the story, the endpoints on {@code port}; STATIC when invalid. */
  static String resources(int port, boolean valid) throws IOException {
    JsonObject all = JsonParser.parseString(Files.readString(DATA.resolve("resources.json"))).getAsJsonObject();
    for (JsonElement element : all.getAsJsonArray("resources")) {
      JsonObject r = element.getAsJsonObject();
      String type = r.get("@type").getAsString();
      if (type.equals(EDS)) {
        r.getAsJsonArray("endpoints").get(0).getAsJsonObject()
            .getAsJsonArray("lbEndpoints").get(0).getAsJsonObject()
            .getAsJsonObject("endpoint").getAsJsonObject("address")
            .getAsJsonObject("socketAddress").addProperty("portValue", port);
      }
      if (type.equals(CDS) && !valid) {
        r.addProperty("type", "STATIC");
      }
    }
    return all.toString();
  }

  static Server backend(String name) throws IOException {
    ServerServiceDefinition service =
        ServerServiceDefinition.builder("interop.Echo")
            .addMethod(ECHO, ServerCalls.asyncUnaryCall((request, response) -> {
              response.onNext(name.getBytes(StandardCharsets.UTF_8));
              response.onCompleted();
            }))
            .build();
    return NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .addService(service).build().start();
  }

  static String call(ManagedChannel channel) {
    try {
      byte[] answer = ClientCalls.blockingUnaryCall(channel, ECHO,
          CallOptions.DEFAULT.withDeadlineAfter(2, TimeUnit.SECONDS), "hi".getBytes(StandardCharsets.UTF_8));
      return new String(answer, StandardCharsets.UTF_8);
    } catch (StatusRuntimeException e) {
      return "error:" + e.getStatus().getCode().name();
    }
  }

  static void waitFor(String what, BooleanSupplier ok) throws InterruptedException {
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while (System.currentTimeMillis() < deadline) {
      if (ok.getAsBoolean()) {
        return;
      }
      Thread.sleep(100);
    }
    fail("timed out waiting for " + what);
  }

  /** The client's requests of a recording, as JSON messages. */
  static List<JsonObject> requests(String records) {
    List<JsonObject> out = new ArrayList<>();
    for (String line : records.strip().split("\n")) {
      JsonObject entry = JsonParser.parseString(line).getAsJsonObject();
      if (entry.has("dir") && entry.get("dir").getAsString().equals("C->S")) {
        out.add(entry.getAsJsonObject("message"));
      }
    }
    return out;
  }

  static List<JsonObject> cds(ControlPlane plane) {
    return requests(plane.records()).stream()
        .filter(r -> r.get("typeUrl").getAsString().equals(CDS)).toList();
  }

  @Test
  @Timeout(120)
  void grpcJavaXdsClientThroughTheControlPlaneBreaksNoRule(@org.junit.jupiter.api.io.TempDir Path workdir)
      throws Exception {
    Server b1 = backend("B1");
    Server b2 = backend("B2");
    try (ControlPlane plane = ControlPlane.start(resources(b1.getPort(), true), DESCRIPTORS)) {
      Path bootstrap = workdir.resolve("bootstrap.json");
      Files.writeString(bootstrap, "{\"xds_servers\": [{\"server_uri\": \"" + plane.address()
          + "\", \"channel_creds\": [{\"type\": \"insecure\"}], \"server_features\": [\"xds_v3\"]}],"
          + " \"node\": {\"id\": \"xds-sansio-java-test\", \"locality\": {\"zone\": \"z\"}}}");
      System.setProperty("io.grpc.xds.bootstrap", bootstrap.toString());
      ManagedChannel channel = Grpc.newChannelBuilder("xds:///echo.test", InsecureChannelCredentials.create()).build();
      try {
        waitFor("an RPC to B1", () -> call(channel).equals("B1"));
        plane.replace(resources(b2.getPort(), true));
        waitFor("an RPC to B2", () -> call(channel).equals("B2"));
        plane.replace(resources(b2.getPort(), false));
        waitFor("the NACK of the STATIC Cluster", () -> cds(plane).stream().anyMatch(r -> r.has("errorDetail")));
        plane.replace(resources(b2.getPort(), true));
        waitFor("the ACK of the fixed Cluster", () -> {
          List<JsonObject> rs = cds(plane);
          return !rs.get(rs.size() - 1).has("errorDetail");
        });
        assertEquals("B2", call(channel));
      } finally {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        b1.shutdownNow();
        b2.shutdownNow();
      }
      plane.stop();
      Set<String> types = new HashSet<>();
      requests(plane.records()).forEach(r -> types.add(r.get("typeUrl").getAsString()));
      assertEquals(4, types.size(), types.toString());
      List<Finding> findings = plane.findings();
      assertTrue(findings.isEmpty(), findings.toString());

      // The same recording with an ACK naming a nonce never sent: the checker must find it.
      String[] lines = plane.records().strip().split("\n");
      int at = -1;
      for (int i = 0; i < lines.length && at < 0; i++) {
        JsonObject entry = JsonParser.parseString(lines[i]).getAsJsonObject();
        if (entry.has("dir") && entry.get("dir").getAsString().equals("C->S")
            && entry.getAsJsonObject("message").has("responseNonce")) {
          entry.getAsJsonObject("message").addProperty("responseNonce", "never-sent");
          lines[i] = entry.toString();
          at = i + 1;
        }
      }
      List<Finding> broken = XdsSansio.check(String.join("\n", lines), "client", DESCRIPTORS);
      assertEquals(1, broken.size(), broken.toString());
      assertEquals("nonce-unknown", broken.get(0).rule());
      assertEquals(at, broken.get(0).line());
      assertFalse(broken.get(0).passage().isEmpty());
    }
  }

  private static final class Bytes implements MethodDescriptor.Marshaller<byte[]> {
    @Override
    public InputStream stream(byte[] value) {
      return new ByteArrayInputStream(value);
    }

    @Override
    public byte[] parse(InputStream stream) {
      try {
        return stream.readAllBytes();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }
}
