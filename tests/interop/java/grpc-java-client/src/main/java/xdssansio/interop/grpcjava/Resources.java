package xdssansio.interop.grpcjava;

import com.google.protobuf.Any;
import com.google.protobuf.Message;
import com.google.protobuf.UInt32Value;
import com.google.protobuf.util.JsonFormat;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.cluster.v3.CircuitBreakers;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.core.v3.Address;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.core.v3.AggregatedConfigSource;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.core.v3.ApiVersion;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.core.v3.ConfigSource;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.core.v3.Locality;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.core.v3.SocketAddress;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.endpoint.v3.ClusterLoadAssignment;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.endpoint.v3.Endpoint;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.endpoint.v3.LbEndpoint;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.endpoint.v3.LocalityLbEndpoints;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.listener.v3.ApiListener;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.listener.v3.Listener;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.route.v3.Route;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.route.v3.RouteAction;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.route.v3.RouteConfiguration;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.route.v3.RouteMatch;
import io.grpc.xds.shaded.io.envoyproxy.envoy.config.route.v3.VirtualHost;
import io.grpc.xds.shaded.io.envoyproxy.envoy.extensions.filters.http.router.v3.Router;
import io.grpc.xds.shaded.io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager;
import io.grpc.xds.shaded.io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter;
import io.grpc.xds.shaded.io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.Rds;

/**
 * The resources of the story (the same as xds_flow.py's), built with grpc-xds's own
 * (shaded) Envoy classes: their descriptors keep the Envoy names, so the type URLs and
 * the JSON are Envoy's.
 */
final class Resources {
  static final String LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";
  static final String RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
  static final String CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
  static final String EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
  static final String TARGET = "echo.test";

  /** Every message an Any of the story holds, for canonical JSON. */
  static final JsonFormat.TypeRegistry TYPES =
      JsonFormat.TypeRegistry.newBuilder()
          .add(Listener.getDescriptor())
          .add(HttpConnectionManager.getDescriptor())
          .add(Router.getDescriptor())
          .add(RouteConfiguration.getDescriptor())
          .add(Cluster.getDescriptor())
          .add(ClusterLoadAssignment.getDescriptor())
          .build();

  private Resources() {}

  private static ConfigSource ads() {
    return ConfigSource.newBuilder()
        .setAds(AggregatedConfigSource.getDefaultInstance())
        .setResourceApiVersion(ApiVersion.V3)
        .build();
  }

  static Listener listener() {
    HttpConnectionManager hcm =
        HttpConnectionManager.newBuilder()
            .setRds(Rds.newBuilder().setConfigSource(ads()).setRouteConfigName("route-1"))
            .addHttpFilters(
                HttpFilter.newBuilder()
                    .setName("router")
                    .setTypedConfig(Any.pack(Router.getDefaultInstance())))
            .build();
    return Listener.newBuilder()
        .setName(TARGET)
        .setApiListener(ApiListener.newBuilder().setApiListener(Any.pack(hcm)))
        .build();
  }

  static RouteConfiguration route() {
    return RouteConfiguration.newBuilder()
        .setName("route-1")
        .addVirtualHosts(
            VirtualHost.newBuilder()
                .setName("vh")
                .addDomains("*")
                .addRoutes(
                    Route.newBuilder()
                        .setMatch(RouteMatch.newBuilder().setPrefix(""))
                        .setRoute(RouteAction.newBuilder().setCluster("cluster-1"))))
        .build();
  }

  /** An EDS cluster; invalid: STATIC without endpoints. restored: a changed field clients
   * keep, so a restored Cluster differs from the deleted one. */
  static Cluster cluster(boolean valid, boolean restored) {
    Cluster.Builder c =
        Cluster.newBuilder()
            .setName("cluster-1")
            .setType(valid ? Cluster.DiscoveryType.EDS : Cluster.DiscoveryType.STATIC)
            .setEdsClusterConfig(Cluster.EdsClusterConfig.newBuilder().setEdsConfig(ads()))
            .setLbPolicy(Cluster.LbPolicy.ROUND_ROBIN);
    if (restored) {
      c.setCircuitBreakers(
          CircuitBreakers.newBuilder()
              .addThresholds(
                  CircuitBreakers.Thresholds.newBuilder().setMaxRequests(UInt32Value.of(1000))));
    }
    return c.build();
  }

  static ClusterLoadAssignment endpoints(int port) {
    return ClusterLoadAssignment.newBuilder()
        .setClusterName("cluster-1")
        .addEndpoints(
            LocalityLbEndpoints.newBuilder()
                .setLocality(Locality.newBuilder().setRegion("local"))
                .setLoadBalancingWeight(UInt32Value.of(1))
                .addLbEndpoints(
                    LbEndpoint.newBuilder()
                        .setEndpoint(
                            Endpoint.newBuilder()
                                .setAddress(
                                    Address.newBuilder()
                                        .setSocketAddress(
                                            SocketAddress.newBuilder()
                                                .setAddress("127.0.0.1")
                                                .setPortValue(port))))))
        .build();
  }

  /** The resource's name: a ClusterLoadAssignment's is its cluster_name. */
  static String name(Message message) {
    if (message instanceof ClusterLoadAssignment cla) {
      return cla.getClusterName();
    }
    return (String) message.getField(message.getDescriptorForType().findFieldByName("name"));
  }

  static String typeUrl(Message message) {
    return "type.googleapis.com/" + message.getDescriptorForType().getFullName();
  }

  /** The last word of a type URL: `Cluster/cluster-1` in the report. */
  static String shortType(String typeUrl) {
    return typeUrl.substring(typeUrl.lastIndexOf('.') + 1);
  }
}
