package io.github.xdssansio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.xds.shaded.io.envoyproxy.envoy.service.discovery.v3.DiscoveryRequest;
import io.grpc.xds.shaded.io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Errors with their lines, the replay and the stepper, through JNI. */
class ApiTest {
  static final String EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

  @Test
  void aMalformedRecordThrowsNamingItsLine() {
    String text = "{\"record\":\"xds-sansio\",\"version\":1}\n{\"dir\":\"C->S\",\"message\":{}}\n{oops\n";
    XdsSansioException e = assertThrows(XdsSansioException.class, () -> XdsSansio.check(text));
    assertEquals("record", e.kind());
    assertEquals(3, e.line());
  }

  @Test
  void replayDrawsTheScenarioAndNamesABadLine() {
    String scenario = "title: Simple ACK\nmodel: both\nvariant: sotw\n\nclient subscribe EDS foo\n"
        + "server set EDS foo:a\nC->S (V=,R={foo},N=,T=EDS)\nS->C (V=X,R={foo:a},N=A,T=EDS)\n"
        + "C->S (V=X,R={foo},N=A,T=EDS) [ack]\n";
    Report report = XdsSansio.replay(scenario, "ack.xds");
    assertTrue(report.passed(), report.diagram());
    assertTrue(report.diagram().contains("=> PASS"));
    assertFalse(XdsSansio.replay(scenario.replace("N=A,T=EDS) [ack]", "N=B,T=EDS) [ack]"), "x").passed());
    XdsSansioException e = assertThrows(XdsSansioException.class,
        () -> XdsSansio.replay("model: both\n\nclient frobnicate EDS foo\n", "bad"));
    assertEquals("scenario", e.kind());
    assertEquals(3, e.line());
  }

  @Test
  void aControlPlaneReadsADirectoryAndNamesABadFile(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
      throws java.io.IOException {
    java.nio.file.Files.writeString(dir.resolve("a.json"),
        "{\"resources\":[{\"@type\":\"" + EDS + "\",\"value\":\"CgNmb28=\"}]}");
    try (ControlPlane plane = ControlPlane.startFromPath(dir.toString())) {
      assertTrue(plane.records().contains("\"foo\""), plane.records());
    }
    java.nio.file.Files.writeString(dir.resolve("b.json"), "{\"resources\": 7}");
    XdsSansioException e = assertThrows(XdsSansioException.class, () -> ControlPlane.startFromPath(dir.toString()));
    assertEquals("resources", e.kind());
    assertTrue(e.getMessage().contains("b.json"), e.getMessage());
  }

  @Test
  void theStepperAnswersAsTheModelDoes() {
    try (Stepper client = new Stepper("client", "sotw", "n");
        Stepper server = new Stepper("server", "sotw", null)) {
      server.set(EDS, "\n\u0003foo".getBytes(StandardCharsets.ISO_8859_1));
      client.subscribe(EDS, "foo");
      Stepper.Message first = client.connected().messages().get(0);
      Stepper.Message answer = server.handle(first.bytes()).messages().get(0);
      Stepper.Step step = client.handle(answer.bytes());
      assertTrue(step.has("Upserted"), step.events().toString());
      assertTrue(server.handle(step.messages().get(0).bytes()).has("Acked"));
      XdsSansioException e = assertThrows(XdsSansioException.class,
          () -> server.handle(new byte[] {(byte) 0xff, (byte) 0xff}));
      assertEquals("message", e.kind());
    }
    assertThrows(XdsSansioException.class, () -> new Stepper("nobody", "sotw", null));
  }

  @Test
  void theStepperTakesGrpcJavasGeneratedMessages() throws Exception {
    try (Stepper client = new Stepper("client", "sotw", "n");
        Stepper server = new Stepper("server", "sotw", null)) {
      server.set(EDS, "\n\u0003foo".getBytes(StandardCharsets.ISO_8859_1));
      client.subscribe(EDS, "foo");
      // grpc-java's own generated envoy messages, parsed from the model's bytes and handed
      // back as messages.
      DiscoveryRequest request =
          DiscoveryRequest.parseFrom(client.connected().messages().get(0).bytes());
      assertEquals(EDS, request.getTypeUrl());
      DiscoveryResponse response =
          DiscoveryResponse.parseFrom(server.handle(request).messages().get(0).bytes());
      assertEquals(1, response.getResourcesCount());
      assertTrue(client.handle(response).has("Upserted"));
    }
  }
}
