package xdssansio.interop.controlplane;

import io.envoyproxy.controlplane.cache.Resources.ResourceType;
import io.envoyproxy.controlplane.cache.SnapshotResources;
import io.envoyproxy.controlplane.cache.VersionedResource;
import io.envoyproxy.controlplane.cache.v3.Snapshot;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.endpoint.v3.ClusterLoadAssignment;
import io.envoyproxy.envoy.config.listener.v3.Listener;
import io.envoyproxy.envoy.config.route.v3.RouteConfiguration;
import io.envoyproxy.envoy.extensions.transport_sockets.tls.v3.Secret;
import java.util.Map;

/**
 * A v3 Snapshot whose resources carry the versions the scenario gives (`a@1`): the public
 * Snapshot.create makes every per-resource version a hash of the message, and delta
 * responses carry those. Built from SnapshotResources of VersionedResources, java-control-
 * plane's own API for versions by resource.
 */
final class HookSnapshot extends Snapshot {
  private final SnapshotResources<Cluster> clusters;
  private final SnapshotResources<ClusterLoadAssignment> endpoints;
  private final SnapshotResources<Listener> listeners;
  private final SnapshotResources<RouteConfiguration> routes;
  private final SnapshotResources<Secret> secrets;

  HookSnapshot(
      SnapshotResources<Cluster> clusters,
      SnapshotResources<ClusterLoadAssignment> endpoints,
      SnapshotResources<Listener> listeners,
      SnapshotResources<RouteConfiguration> routes,
      SnapshotResources<Secret> secrets) {
    this.clusters = clusters;
    this.endpoints = endpoints;
    this.listeners = listeners;
    this.routes = routes;
    this.secrets = secrets;
  }

  @Override
  public SnapshotResources<Cluster> clusters() {
    return clusters;
  }

  @Override
  public SnapshotResources<ClusterLoadAssignment> endpoints() {
    return endpoints;
  }

  @Override
  public SnapshotResources<Listener> listeners() {
    return listeners;
  }

  @Override
  public SnapshotResources<RouteConfiguration> routes() {
    return routes;
  }

  @Override
  public SnapshotResources<Secret> secrets() {
    return secrets;
  }

  // v3.Snapshot implements this with another spelling of the same generic type, which javac
  // does not take for the override in a subclass: the same method, restated.
  @Override
  public Map<String, VersionedResource<?>> versionedResources(ResourceType resourceType) {
    return super.versionedResources(resourceType);
  }
}
