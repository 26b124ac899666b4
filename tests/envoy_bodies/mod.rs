//! Envoy resource bodies built with envoy-types' full prost messages (generated from the
//! public protos), so they are independent of the crate's minimal reference messages: a
//! wrong field number there shows up as a missing reference here. Shared by
//! tests/refs.rs, tests/deps.rs, tests/consistency.rs and benches/refs.rs.
#![allow(dead_code)]

use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as endpoint;
use envoy_types::pb::envoy::config::listener::v3 as listener;
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::extensions::clusters::aggregate::v3 as aggregate;
use envoy_types::pb::envoy::extensions::filters::http::router::v3 as router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3 as tcp;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::envoy::extensions::upstreams::http::v3 as upstream_http;
use envoy_types::util::pack_any;
use prost::Message;

pub use cluster::Cluster;
pub use listener::Listener;
pub use route::RouteConfiguration;

fn ads() -> Option<core::ConfigSource> {
    Some(core::ConfigSource {
        config_source_specifier: Some(core::config_source::ConfigSourceSpecifier::Ads(
            core::AggregatedConfigSource {},
        )),
        ..Default::default()
    })
}

fn secs(seconds: i64) -> Option<envoy_types::pb::google::protobuf::Duration> {
    Some(envoy_types::pb::google::protobuf::Duration { seconds, nanos: 0 })
}

fn u32v(value: u32) -> Option<envoy_types::pb::google::protobuf::UInt32Value> {
    Some(envoy_types::pb::google::protobuf::UInt32Value { value })
}

fn header(key: &str, value: &str) -> core::HeaderValueOption {
    core::HeaderValueOption {
        header: Some(core::HeaderValue {
            key: key.into(),
            value: value.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn body(message: impl Message) -> Bytes {
    Bytes::from(message.encode_to_vec())
}

pub fn sds(name: &str) -> tls::SdsSecretConfig {
    tls::SdsSecretConfig {
        name: name.into(),
        sds_config: ads(),
    }
}

/// An HTTP connection manager whose routes come from RDS.
pub fn hcm_rds(route_name: &str) -> hcm::HttpConnectionManager {
    hcm::HttpConnectionManager {
        stat_prefix: "ingress".into(),
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::Rds(
            hcm::Rds {
                config_source: ads(),
                route_config_name: route_name.into(),
            },
        )),
        ..Default::default()
    }
}

/// gRPC's shape: an API listener whose connection manager names `route_name`.
pub fn api_listener(name: &str, route_name: &str) -> Bytes {
    body(Listener {
        name: name.into(),
        api_listener: Some(listener::ApiListener {
            api_listener: Some(pack_any(hcm_rds(route_name))),
        }),
        ..Default::default()
    })
}

fn filter(config: envoy_types::pb::google::protobuf::Any) -> listener::Filter {
    listener::Filter {
        name: "f".into(),
        config_type: Some(listener::filter::ConfigType::TypedConfig(config)),
    }
}

/// Envoy's shape: a socket listener with three chains: RDS + a TLS secret, an inline route
/// config, a TCP proxy with weighted clusters (default chain); a session-ticket secret.
pub fn socket_listener(name: &str) -> Bytes {
    let downstream = tls::DownstreamTlsContext {
        common_tls_context: Some(tls::CommonTlsContext {
            tls_certificate_sds_secret_configs: vec![sds("server-cert")],
            validation_context_type: Some(
                tls::common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(
                    sds("client-ca"),
                ),
            ),
            ..Default::default()
        }),
        session_ticket_keys_type: Some(
            tls::downstream_tls_context::SessionTicketKeysType::SessionTicketKeysSdsSecretConfig(
                sds("ticket-keys"),
            ),
        ),
        ..Default::default()
    };
    let inline = hcm::HttpConnectionManager {
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::RouteConfig(
            route_config("inline", &["inline-a"], &[]),
        )),
        ..Default::default()
    };
    let proxy = tcp::TcpProxy {
        stat_prefix: "tcp".into(),
        cluster_specifier: Some(tcp::tcp_proxy::ClusterSpecifier::WeightedClusters(
            tcp::tcp_proxy::WeightedCluster {
                clusters: vec![
                    tcp::tcp_proxy::weighted_cluster::ClusterWeight {
                        name: "tcp-a".into(),
                        weight: 1,
                        ..Default::default()
                    },
                    tcp::tcp_proxy::weighted_cluster::ClusterWeight {
                        name: "tcp-b".into(),
                        weight: 1,
                        ..Default::default()
                    },
                ],
            },
        )),
        ..Default::default()
    };
    body(Listener {
        name: name.into(),
        filter_chains: vec![
            listener::FilterChain {
                filters: vec![filter(pack_any(hcm_rds("rds-route")))],
                transport_socket: Some(core::TransportSocket {
                    name: "envoy.transport_sockets.tls".into(),
                    config_type: Some(core::transport_socket::ConfigType::TypedConfig(pack_any(
                        downstream,
                    ))),
                }),
                ..Default::default()
            },
            listener::FilterChain {
                filters: vec![filter(pack_any(inline))],
                ..Default::default()
            },
        ],
        default_filter_chain: Some(listener::FilterChain {
            filters: vec![filter(pack_any(proxy))],
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A listener whose connection manager uses scoped routes over SRDS.
pub fn scoped_listener(name: &str, scopes: &str) -> Bytes {
    let manager = hcm::HttpConnectionManager {
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::ScopedRoutes(
            hcm::ScopedRoutes {
                name: scopes.into(),
                config_specifier: Some(hcm::scoped_routes::ConfigSpecifier::ScopedRds(
                    hcm::ScopedRds {
                        scoped_rds_config_source: ads(),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    body(Listener {
        name: name.into(),
        filter_chains: vec![listener::FilterChain {
            filters: vec![filter(pack_any(manager))],
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn to_cluster(cluster: &str) -> route::Route {
    route::Route {
        r#match: Some(route::RouteMatch {
            path_specifier: Some(route::route_match::PathSpecifier::Prefix(format!(
                "/{cluster}"
            ))),
            ..Default::default()
        }),
        action: Some(route::route::Action::Route(route::RouteAction {
            cluster_specifier: Some(route::route_action::ClusterSpecifier::Cluster(
                cluster.into(),
            )),
            timeout: Some(envoy_types::pb::google::protobuf::Duration {
                seconds: 15,
                nanos: 0,
            }),
            ..Default::default()
        })),
        name: format!("to-{cluster}"),
        ..Default::default()
    }
}

/// A route configuration: one virtual host, one route per cluster in `clusters`, and one
/// weighted route over `weighted` when not empty.
pub fn route_config(name: &str, clusters: &[&str], weighted: &[&str]) -> RouteConfiguration {
    let mut routes: Vec<route::Route> = clusters.iter().map(|c| to_cluster(c)).collect();
    if !weighted.is_empty() {
        routes.push(route::Route {
            action: Some(route::route::Action::Route(route::RouteAction {
                cluster_specifier: Some(route::route_action::ClusterSpecifier::WeightedClusters(
                    route::WeightedCluster {
                        clusters: weighted
                            .iter()
                            .map(|c| route::weighted_cluster::ClusterWeight {
                                name: (*c).into(),
                                weight: Some(envoy_types::pb::google::protobuf::UInt32Value {
                                    value: 10,
                                }),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            })),
            ..Default::default()
        });
    }
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![route::VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub fn route(name: &str, clusters: &[&str], weighted: &[&str]) -> Bytes {
    body(route_config(name, clusters, weighted))
}

/// A route configuration with a mirror policy at the route and at the top, and VHDS.
pub fn route_with_mirrors_and_vhds(name: &str) -> Bytes {
    let mut config = route_config(name, &["main"], &[]);
    if let Some(route::route::Action::Route(action)) = config
        .virtual_hosts
        .first_mut()
        .and_then(|h| h.routes.first_mut())
        .and_then(|r| r.action.as_mut())
    {
        action.request_mirror_policies = vec![route::route_action::RequestMirrorPolicy {
            cluster: "shadow".into(),
            ..Default::default()
        }];
    }
    config.request_mirror_policies = vec![route::route_action::RequestMirrorPolicy {
        cluster: "top-shadow".into(),
        ..Default::default()
    }];
    config.vhds = Some(route::Vhds {
        config_source: ads(),
    });
    body(config)
}

/// An EDS cluster (its endpoints under `service`, else under its own name), with an
/// upstream TLS socket naming `secret` when given.
pub fn eds_cluster(name: &str, service: Option<&str>, secret: Option<&str>) -> Bytes {
    let transport_socket = secret.map(|secret| core::TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(core::transport_socket::ConfigType::TypedConfig(pack_any(
            tls::UpstreamTlsContext {
                common_tls_context: Some(tls::CommonTlsContext {
                    validation_context_type: Some(
                        tls::common_tls_context::ValidationContextType::CombinedValidationContext(
                            tls::common_tls_context::CombinedCertificateValidationContext {
                                default_validation_context: Some(Default::default()),
                                validation_context_sds_secret_config: Some(sds(secret)),
                                ..Default::default()
                            },
                        ),
                    ),
                    ..Default::default()
                }),
                sni: "upstream".into(),
                ..Default::default()
            },
        ))),
    });
    body(Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::Type(
            cluster::cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::cluster::EdsClusterConfig {
            eds_config: ads(),
            service_name: service.unwrap_or("").into(),
        }),
        connect_timeout: Some(envoy_types::pb::google::protobuf::Duration {
            seconds: 1,
            nanos: 0,
        }),
        lb_policy: cluster::cluster::LbPolicy::RoundRobin as i32,
        transport_socket,
        health_checks: vec![core::HealthCheck {
            timeout: secs(1),
            interval: secs(5),
            unhealthy_threshold: u32v(3),
            healthy_threshold: u32v(2),
            health_checker: Some(core::health_check::HealthChecker::HttpHealthCheck(
                core::health_check::HttpHealthCheck {
                    host: format!("{name}.internal"),
                    path: "/healthz".into(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        }],
        circuit_breakers: Some(cluster::CircuitBreakers {
            thresholds: vec![cluster::circuit_breakers::Thresholds {
                max_connections: u32v(1024),
                max_pending_requests: u32v(1024),
                max_requests: u32v(4096),
                ..Default::default()
            }],
            ..Default::default()
        }),
        outlier_detection: Some(cluster::OutlierDetection {
            consecutive_5xx: u32v(5),
            interval: secs(10),
            base_ejection_time: secs(30),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A STRICT_DNS cluster: no endpoints to discover; an SDS secret in a socket match.
pub fn dns_cluster(name: &str, secret: &str) -> Bytes {
    body(Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::Type(
            cluster::cluster::DiscoveryType::StrictDns as i32,
        )),
        transport_socket_matches: vec![cluster::cluster::TransportSocketMatch {
            name: "m".into(),
            transport_socket: Some(core::TransportSocket {
                name: "tls".into(),
                config_type: Some(core::transport_socket::ConfigType::TypedConfig(pack_any(
                    tls::UpstreamTlsContext {
                        common_tls_context: Some(tls::CommonTlsContext {
                            tls_certificate_sds_secret_configs: vec![sds(secret)],
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ))),
            }),
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// An aggregate cluster over `children`, in priority order.
pub fn aggregate_cluster(name: &str, children: &[&str]) -> Bytes {
    body(Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::ClusterType(
            cluster::cluster::CustomClusterType {
                name: "envoy.clusters.aggregate".into(),
                typed_config: Some(pack_any(aggregate::ClusterConfig {
                    clusters: children.iter().map(|c| (*c).into()).collect(),
                })),
            },
        )),
        lb_policy: cluster::cluster::LbPolicy::ClusterProvided as i32,
        ..Default::default()
    })
}

/// A ClusterLoadAssignment with `hosts` endpoints.
pub fn endpoints(name: &str, hosts: u32) -> Bytes {
    body(endpoint::ClusterLoadAssignment {
        cluster_name: name.into(),
        endpoints: vec![endpoint::LocalityLbEndpoints {
            lb_endpoints: (0..hosts)
                .map(|i| endpoint::LbEndpoint {
                    host_identifier: Some(endpoint::lb_endpoint::HostIdentifier::Endpoint(
                        endpoint::Endpoint {
                            address: Some(core::Address {
                                address: Some(core::address::Address::SocketAddress(
                                    core::SocketAddress {
                                        address: format!("10.0.{}.{}", i / 256, i % 256),
                                        port_specifier: Some(
                                            core::socket_address::PortSpecifier::PortValue(8080),
                                        ),
                                        ..Default::default()
                                    },
                                )),
                            }),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// An SRDS scope naming a route configuration.
pub fn scope(name: &str, route_name: &str) -> Bytes {
    body(route::ScopedRouteConfiguration {
        name: name.into(),
        route_configuration_name: route_name.into(),
        ..Default::default()
    })
}

/// Filters configured over ECDS: `config_discovery` with a default and the type URL the
/// configuration may carry.
fn discovery() -> core::ExtensionConfigSource {
    core::ExtensionConfigSource {
        config_source: ads(),
        default_config: None,
        apply_default_config_without_warming: false,
        type_urls: vec![
            "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router".into(),
        ],
    }
}

/// A socket listener whose HTTP filters `http_filters`, network filter `network` and
/// listener filter `listener_filter` are configured over ECDS (their names are the ECDS
/// resource names), its connection manager naming `route_name`; the router is inline.
pub fn ecds_listener(
    name: &str,
    route_name: &str,
    http_filters: &[&str],
    network: &str,
    listener_filter: &str,
) -> Bytes {
    let mut manager = hcm_rds(route_name);
    manager.http_filters = http_filters
        .iter()
        .map(|f| hcm::HttpFilter {
            name: (*f).into(),
            config_type: Some(hcm::http_filter::ConfigType::ConfigDiscovery(discovery())),
            ..Default::default()
        })
        .chain([hcm::HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(hcm::http_filter::ConfigType::TypedConfig(pack_any(
                router::Router::default(),
            ))),
            ..Default::default()
        }])
        .collect();
    body(Listener {
        name: name.into(),
        listener_filters: vec![listener::ListenerFilter {
            name: listener_filter.into(),
            config_type: Some(listener::listener_filter::ConfigType::ConfigDiscovery(
                discovery(),
            )),
            ..Default::default()
        }],
        filter_chains: vec![listener::FilterChain {
            filters: vec![
                listener::Filter {
                    name: network.into(),
                    config_type: Some(listener::filter::ConfigType::ConfigDiscovery(discovery())),
                },
                filter(pack_any(manager)),
            ],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// An ECDS resource: the router filter's configuration named `name`.
pub fn extension_config(name: &str) -> Bytes {
    body(core::TypedExtensionConfig {
        name: name.into(),
        typed_config: Some(pack_any(router::Router::default())),
    })
}

/// An ECDS resource that is a whole connection manager naming `route_name`.
pub fn extension_config_hcm(name: &str, route_name: &str) -> Bytes {
    body(core::TypedExtensionConfig {
        name: name.into(),
        typed_config: Some(pack_any(hcm_rds(route_name))),
    })
}

/// A route configuration whose virtual hosts come from VHDS (none inline).
pub fn vhds_route(name: &str) -> Bytes {
    body(RouteConfiguration {
        name: name.into(),
        vhds: Some(route::Vhds {
            config_source: ads(),
        }),
        ..Default::default()
    })
}

/// A VHDS virtual host `<route configuration>/<host>` routing to `clusters`.
pub fn virtual_host(name: &str, clusters: &[&str]) -> Bytes {
    let host = name.rsplit('/').next().unwrap_or(name);
    body(route::VirtualHost {
        name: name.into(),
        domains: vec![host.into()],
        routes: clusters.iter().map(|c| to_cluster(c)).collect(),
        ..Default::default()
    })
}

/// A STRICT_DNS cluster with upstream filters over ECDS: a network filter
/// (`Cluster.filters`) and an HTTP filter of its `HttpProtocolOptions`.
pub fn cluster_with_upstream_filters(name: &str, network: &str, http: &str) -> Bytes {
    let options = upstream_http::HttpProtocolOptions {
        http_filters: vec![hcm::HttpFilter {
            name: http.into(),
            config_type: Some(hcm::http_filter::ConfigType::ConfigDiscovery(discovery())),
            ..Default::default()
        }],
        ..Default::default()
    };
    body(cluster::Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::Type(1)),
        filters: vec![cluster::Filter {
            name: network.into(),
            typed_config: None,
            config_discovery: Some(discovery()),
        }],
        typed_extension_protocol_options: [(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_string(),
            pack_any(options),
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    })
}
