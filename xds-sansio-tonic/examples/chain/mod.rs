//! A listener -> route -> cluster -> endpoints chain of `envoy-types` messages that a gRPC
//! client follows (gRFC A27), every config source the client's ADS stream. Shared by the
//! examples that serve it (`hello`, `complete_server`); none of it touches this crate.

use envoy_types::pb::envoy::config::cluster::v3::{cluster, Cluster};
use envoy_types::pb::envoy::config::core::v3::{self as core, address, config_source};
use envoy_types::pb::envoy::config::endpoint::v3 as endpoint;
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use prost::Name;

/// Every config source of the chain: the ADS stream the client already has.
pub fn ads() -> Option<core::ConfigSource> {
    Some(core::ConfigSource {
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            core::AggregatedConfigSource {},
        )),
        resource_api_version: core::ApiVersion::V3 as i32,
        ..Default::default()
    })
}

pub fn pack<M: prost::Message + Name>(message: &M) -> Option<Any> {
    Some(Any {
        type_url: M::type_url(),
        value: message.encode_to_vec(),
    })
}

/// A gRPC client's listener (gRFC A27): an API listener whose HTTP connection manager
/// takes its routes over RDS.
pub fn listener(name: &str, route: &str) -> Listener {
    let manager = hcm::HttpConnectionManager {
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::Rds(
            hcm::Rds {
                config_source: ads(),
                route_config_name: route.into(),
            },
        )),
        http_filters: vec![hcm::HttpFilter {
            name: "router".into(),
            config_type: Some(hcm::http_filter::ConfigType::TypedConfig(
                pack(&Router::default()).unwrap_or_default(),
            )),
            ..Default::default()
        }],
        ..Default::default()
    };
    Listener {
        name: name.into(),
        api_listener: Some(ApiListener {
            api_listener: pack(&manager),
        }),
        ..Default::default()
    }
}

/// Every request to one cluster.
pub fn route_to(name: &str, cluster: &str) -> route::RouteConfiguration {
    route::RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![route::VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes: vec![route::Route {
                r#match: Some(route::RouteMatch {
                    path_specifier: Some(route::route_match::PathSpecifier::Prefix(String::new())),
                    ..Default::default()
                }),
                action: Some(route::route::Action::Route(route::RouteAction {
                    cluster_specifier: Some(route::route_action::ClusterSpecifier::Cluster(
                        cluster.into(),
                    )),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A cluster whose endpoints come over EDS.
pub fn eds_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: ads(),
            service_name: String::new(),
        }),
        lb_policy: cluster::LbPolicy::RoundRobin as i32,
        ..Default::default()
    }
}

/// One endpoint at `backend`.
pub fn endpoints(cluster: &str, backend: std::net::SocketAddr) -> endpoint::ClusterLoadAssignment {
    let address = core::Address {
        address: Some(address::Address::SocketAddress(core::SocketAddress {
            address: backend.ip().to_string(),
            port_specifier: Some(core::socket_address::PortSpecifier::PortValue(
                backend.port().into(),
            )),
            ..Default::default()
        })),
    };
    endpoint::ClusterLoadAssignment {
        cluster_name: cluster.into(),
        endpoints: vec![endpoint::LocalityLbEndpoints {
            locality: Some(core::Locality {
                region: "local".into(),
                ..Default::default()
            }),
            // gRPC skips a locality without a weight.
            load_balancing_weight: Some(UInt32Value { value: 1 }),
            lb_endpoints: vec![endpoint::LbEndpoint {
                host_identifier: Some(endpoint::lb_endpoint::HostIdentifier::Endpoint(
                    endpoint::Endpoint {
                        address: Some(address),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}
