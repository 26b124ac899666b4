package io.github.xdssansio.bench;

import com.google.protobuf.Any;
import io.envoyproxy.controlplane.cache.ConfigWatcher;
import io.envoyproxy.controlplane.cache.Resources;
import io.envoyproxy.controlplane.cache.Response;
import io.envoyproxy.controlplane.cache.XdsRequest;
import io.envoyproxy.controlplane.server.serializer.CachedProtoResourcesSerializer;
import io.envoyproxy.controlplane.server.serializer.DefaultProtoResourcesSerializer;
import io.envoyproxy.controlplane.server.serializer.ProtoResourcesSerializer;
import io.envoyproxy.envoy.config.core.v3.Node;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryRequest;
import io.envoyproxy.envoy.service.discovery.v3.DiscoveryResponse;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * One ADS stream's CDS state and what java-control-plane's SotW server
 * ({@code DiscoveryRequestStreamObserver} with {@code V3DiscoveryServer}'s defaults: direct
 * executor, no callbacks, and the serializer given: the default
 * {@code DefaultProtoResourcesSerializer} or the opt-in {@code CachedProtoResourcesSerializer})
 * does per request and per response, minus the gRPC transport: the watch created with the
 * stream's acknowledged names, and on each response the resources packed into {@code Any}s, the
 * {@code DiscoveryResponse} built with a stream nonce, the latest response's names recorded,
 * and the {@code toByteArray()} gRPC's marshaller does.
 */
final class SotwStream {
  static final String CDS = Resources.V3.CLUSTER_TYPE_URL;
  static final ProtoResourcesSerializer DEFAULT = new DefaultProtoResourcesSerializer();
  static final ProtoResourcesSerializer CACHED = new CachedProtoResourcesSerializer();

  private final ProtoResourcesSerializer serializer;
  private final Node node;
  private final List<String> names;
  private long streamNonce;
  private String latestNonce;
  private Set<String> latestNames;
  private Set<String> acked = Collections.emptySet();
  private String lastVersion = "";
  /** Responses serialized so far, and the length and resource count of the last one. */
  int responses;
  int lastLength;
  int lastResources;
  /** The last response's bytes, kept only when asked (1.5 MB each for wildcard). */
  byte[] lastWire;
  boolean keepWire;

  SotwStream(ProtoResourcesSerializer serializer, String nodeId, List<String> names) {
    this.serializer = serializer;
    this.node = Node.newBuilder().setId(nodeId).build();
    this.names = names;
  }

  /** The stream's first request (no version, no nonce). */
  void request(ConfigWatcher cache) {
    DiscoveryRequest req = DiscoveryRequest.newBuilder()
        .setNode(node).setTypeUrl(CDS).addAllResourceNames(names).build();
    watch(cache, req);
  }

  /** An ACK of the last response: the server records its names as acknowledged, new watch. */
  void ack(ConfigWatcher cache) {
    DiscoveryRequest req = DiscoveryRequest.newBuilder()
        .setNode(node).setTypeUrl(CDS).addAllResourceNames(names)
        .setVersionInfo(lastVersion).setResponseNonce(latestNonce).build();
    acked = latestNames;
    watch(cache, req);
  }

  /** Starts from other's state after its first response (what this stream would hold). */
  void copyStateOf(SotwStream other) {
    streamNonce = other.streamNonce;
    latestNonce = other.latestNonce;
    latestNames = other.latestNames;
    lastVersion = other.lastVersion;
  }

  private void watch(ConfigWatcher cache, DiscoveryRequest req) {
    // The server's consumer runs send on its executor, the direct one by default.
    cache.createWatch(true, XdsRequest.create(req), acked, this::send, false, false);
  }

  private void send(Response response) {
    String nonce = Long.toString(streamNonce++);
    Collection<Any> resources = serializer.serialize(response.resources(), Resources.ApiVersion.V3);
    DiscoveryResponse out = DiscoveryResponse.newBuilder()
        .setNonce(nonce)
        .setVersionInfo(response.version())
        .addAllResources(resources)
        .setTypeUrl(CDS)
        .build();
    latestNonce = nonce;
    latestNames = response.resources().stream()
        .map(Resources::getResourceName).collect(Collectors.toSet());
    lastVersion = response.version();
    byte[] wire = out.toByteArray();
    responses++;
    lastLength = wire.length;
    lastResources = resources.size();
    if (keepWire) {
      lastWire = wire;
    }
  }
}
