package xdssansio.interop.grpcjava;

import com.google.gson.JsonObject;
import com.google.protobuf.Message;
import io.grpc.Channel;
import io.grpc.xds.shaded.io.envoyproxy.envoy.service.status.v3.ClientConfig;
import io.grpc.xds.shaded.io.envoyproxy.envoy.service.status.v3.ClientStatusDiscoveryServiceGrpc;
import io.grpc.xds.shaded.io.envoyproxy.envoy.service.status.v3.ClientStatusRequest;
import io.grpc.xds.shaded.io.envoyproxy.envoy.service.status.v3.ClientStatusResponse;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/** The client's view through CSDS (grpc-xds's CsdsService), compared with the store. */
final class Csds {
  /** One resource as CSDS shows it. */
  record Entry(String status, String version, byte[] body, String error, String failedVersion) {
    @Override
    public String toString() {
      return "{status=" + status + ", version=" + version + ", error=" + error
          + ", failed_version=" + failedVersion + "}";
    }
  }

  static final long STEP_TIMEOUT_MS = 20_000;
  private final ClientStatusDiscoveryServiceGrpc.ClientStatusDiscoveryServiceBlockingStub stub;
  private final Report report;

  Csds(Channel admin, Report report) {
    this.stub = ClientStatusDiscoveryServiceGrpc.newBlockingStub(admin);
    this.report = report;
  }

  Map<Key, Entry> view() {
    ClientStatusResponse response =
        stub.withDeadlineAfter(5, TimeUnit.SECONDS)
            .fetchClientStatus(ClientStatusRequest.getDefaultInstance());
    Map<Key, Entry> view = new LinkedHashMap<>();
    for (ClientConfig config : response.getConfigList()) {
      for (ClientConfig.GenericXdsConfig g : config.getGenericXdsConfigsList()) {
        view.put(
            new Key(g.getTypeUrl(), g.getName()),
            new Entry(
                g.getClientStatus().name(),
                g.getVersionInfo(),
                g.hasXdsConfig() ? g.getXdsConfig().getValue().toByteArray() : null,
                g.hasErrorState() ? g.getErrorState().getDetails() : "",
                g.hasErrorState() ? g.getErrorState().getVersionInfo() : ""));
      }
    }
    return view;
  }

  /**
   * The client's CSDS view against the store: every stored resource is ACKED with the same
   * content, except the keys of `expect` (acceptable statuses, ABSENT for not listed).
   */
  Map<Key, Entry> compare(Store store, String step, Map<Key, Set<String>> expect)
      throws Exception {
    long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
    while (true) {
      Map<Key, Entry> view = view();
      List<String> problems = new ArrayList<>();
      Set<Key> keys = new LinkedHashSet<>(store.resources.keySet());
      keys.addAll(expect.keySet());
      for (Key key : keys) {
        Set<String> want = expect.getOrDefault(key, Set.of("ACKED"));
        Entry got = view.get(key);
        String status = got != null ? got.status() : "ABSENT";
        if (!want.contains(status)) {
          problems.add(key + ": " + status + " (want " + want + ")");
        } else if (status.equals("ACKED")) {
          Message stored = store.resources.get(key);
          Message held = Store.parseLike(stored, got.body() == null ? new byte[0] : got.body());
          if (!held.equals(stored)) {
            problems.add(key.name() + ": CSDS content differs from the store");
          }
        }
      }
      if (problems.isEmpty()) {
        JsonObject summary = new JsonObject();
        view.forEach((k, v) -> summary.addProperty(k.toString(), v.status()));
        report.step(Report.step(step, "csds", summary));
        XdsFlow.log("CSDS after " + step + ": " + summary);
        return view;
      }
      if (System.currentTimeMillis() > deadline) {
        throw new FlowFailure("CSDS after " + step + ": " + problems + "; CSDS view: " + view);
      }
      Thread.sleep(100);
    }
  }
}
