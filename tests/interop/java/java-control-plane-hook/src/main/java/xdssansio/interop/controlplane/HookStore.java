package xdssansio.interop.controlplane;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.Parser;
import io.envoyproxy.controlplane.cache.SnapshotResources;
import io.envoyproxy.controlplane.cache.VersionedResource;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.endpoint.v3.ClusterLoadAssignment;
import io.envoyproxy.envoy.config.listener.v3.Listener;
import io.envoyproxy.envoy.config.route.v3.RouteConfiguration;
import io.envoyproxy.envoy.extensions.transport_sockets.tls.v3.Secret;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The hook's store: what the scenario has published so far (type -> name -> body), and
 * the java-control-plane Snapshot it makes. The snapshot has one version per type, advanced
 * for the types a publication touches; a type never published has the version "" (a
 * request at "" waits, as for a type nobody published). A resource set with a version
 * (`a@1`) has it as its own (delta's per-resource version); without one, java-control-
 * plane's default, a hash of the message.
 */
final class HookStore {
  static final String CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
  static final String EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
  static final String LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";
  static final String RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
  static final String SDS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

  /** The types a v3 Snapshot holds, with their messages. */
  private static final Map<String, Parser<? extends Message>> PARSERS =
      Map.of(
          CDS, Cluster.parser(),
          EDS, ClusterLoadAssignment.parser(),
          LDS, Listener.parser(),
          RDS, RouteConfiguration.parser(),
          SDS, Secret.parser());

  private final Map<String, Map<String, VersionedResource<Message>>> resources = new HashMap<>();
  private final Map<String, Long> versions = new HashMap<>();

  /** A body decoded as its type's message, as java-control-plane stores it. */
  static Message decode(String typeUrl, String name, byte[] body) throws HookException {
    Parser<? extends Message> parser = PARSERS.get(typeUrl);
    if (parser == null) {
      throw new HookException("this peer does not serve " + typeUrl);
    }
    Message message;
    try {
      message = parser.parseFrom(body);
    } catch (InvalidProtocolBufferException e) {
      throw new HookException(
          "this peer stores typed resources: the body is not a "
              + typeUrl.substring(typeUrl.lastIndexOf('.') + 1) + " (" + e.getMessage()
              + "); give real bodies with --bodies");
    }
    // It encodes again what it stores: the bytes must survive the trip.
    if (!Arrays.equals(message.toByteArray(), body)) {
      throw new HookException(
          "this peer stores typed resources: " + name
              + "'s body does not survive decoding and encoding; give real bodies with --bodies");
    }
    return message;
  }

  void set(String typeUrl, String name, Message message, String version) {
    resources
        .computeIfAbsent(typeUrl, t -> new TreeMap<>())
        .put(
            name,
            version.isEmpty()
                ? VersionedResource.create(message)
                : VersionedResource.create(message, version));
  }

  void remove(String typeUrl, String name) {
    Map<String, VersionedResource<Message>> ofType = resources.get(typeUrl);
    if (ofType != null) {
      ofType.remove(name);
    }
  }

  /** One publication done: the touched types move to their next version. */
  void advance(Set<String> touched) {
    for (String typeUrl : touched) {
      versions.merge(typeUrl, 1L, Long::sum);
    }
  }

  private String version(String typeUrl) {
    Long version = versions.get(typeUrl);
    return version == null ? "" : version.toString();
  }

  private <T extends Message> SnapshotResources<T> of(String typeUrl) {
    List<VersionedResource<Message>> items =
        new ArrayList<>(resources.getOrDefault(typeUrl, Map.of()).values());
    return SnapshotResources.create(items, version(typeUrl));
  }

  Snapshot snapshot() {
    return new HookSnapshot(of(CDS), of(EDS), of(LDS), of(RDS), of(SDS));
  }
}
