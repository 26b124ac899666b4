//! Bodies that carry given references, built from the minimal messages: what scenarios
//! (`[ref=TYPE:name]`), the conformance toolkit and tests of servers and clients write. Field 1 (the name) is written first, then the
//! message, so a SotW client reads the name as from any resource.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use prost::Message;

use super::wire;
use super::{AGGREGATE_CLUSTER, HTTP_CONNECTION_MANAGER, UPSTREAM_TLS};
use crate::pb::google::protobuf::{Any, TypeUrl};
use crate::types::{
    CLUSTER, ENDPOINT, EXTENSION_CONFIG, LISTENER, ROUTE, SCOPED_ROUTE, SECRET, VIRTUAL_HOST,
};

/// `Any` type of the router HTTP filter's configuration.
const ROUTER: &str = "envoy.extensions.filters.http.router.v3.Router";

fn any(full_name: &str, message: &impl Message) -> Any {
    Any {
        type_url: TypeUrl::from(alloc::format!("type.googleapis.com/{full_name}").as_str()),
        value: Bytes::from(message.encode_to_vec()),
    }
}

/// A body of `type_url` named `name` whose references are `refs` (`(type URL, name)`);
/// `tag` is written too (as an unknown field), so different tags are different bodies.
/// Listener: an HTTP connection manager per RDS reference (the first in `api_listener`, the
/// others in filter chains) and per SRDS reference (scopes over SRDS, keyed by a header),
/// each ending in the router filter; an ECDS reference is an HTTP filter of the first
/// manager configured by `config_discovery`. RouteConfiguration: a route per CDS reference;
/// any VHDS reference sets `vhds`. ScopedRouteConfiguration: its RDS reference and a key.
/// VirtualHost: a route per CDS reference, the domain after the last `/` of its name.
/// Cluster: EDS with the service name of its EDS reference, aggregate over its CDS
/// references, an upstream TLS secret per SDS reference. TypedExtensionConfig: the router
/// filter's configuration. Other types: the name and the tag only.
pub fn body_with_refs(type_url: &str, name: &str, refs: &[(&str, &str)], tag: &str) -> Bytes {
    let of = |t: &str| -> Vec<String> {
        refs.iter()
            .filter(|(rt, _)| *rt == t)
            .map(|(_, n)| String::from(*n))
            .collect()
    };
    let mut out = Vec::new();
    prost::encoding::string::encode(1, &String::from(name), &mut out);
    if type_url == LISTENER.type_url {
        listener(
            &of(ROUTE.type_url),
            &of(SCOPED_ROUTE.type_url),
            &of(EXTENSION_CONFIG.type_url),
        )
        .encode(&mut out)
        .ok();
    } else if type_url == ROUTE.type_url {
        let route = wire::RouteConfiguration {
            virtual_hosts: alloc::vec![virtual_host(Vec::new(), of(CLUSTER.type_url))],
            vhds: (!of(VIRTUAL_HOST.type_url).is_empty()).then(|| wire::Vhds {
                config_source: Some(wire::ConfigSource::ads()),
            }),
            ..Default::default()
        };
        route.encode(&mut out).ok();
    } else if type_url == SCOPED_ROUTE.type_url {
        let scope = wire::ScopedRouteConfiguration {
            route_configuration_name: of(ROUTE.type_url).into_iter().next().unwrap_or_default(),
            key: Some(wire::ScopeKey {
                fragments: alloc::vec![wire::ScopeKeyFragment {
                    string_key: name.into(),
                }],
            }),
            route_configuration: None,
        };
        scope.encode(&mut out).ok();
    } else if type_url == VIRTUAL_HOST.type_url {
        let host = name.rsplit('/').next().unwrap_or(name);
        virtual_host(alloc::vec![host.into()], of(CLUSTER.type_url))
            .encode(&mut out)
            .ok();
    } else if type_url == EXTENSION_CONFIG.type_url {
        let (_, router) = router();
        wire::TypedExtensionConfig {
            name: String::new(),
            typed_config: Some(router),
        }
        .encode(&mut out)
        .ok();
    } else if type_url == CLUSTER.type_url {
        cluster(
            &of(ENDPOINT.type_url),
            of(CLUSTER.type_url),
            &of(SECRET.type_url),
        )
        .encode(&mut out)
        .ok();
    }
    if !tag.is_empty() {
        // Field 999, skipped by every reader: the tag makes bodies differ.
        prost::encoding::string::encode(999, &String::from(tag), &mut out);
    }
    Bytes::from(out)
}

/// The router filter (`envoy.filters.http.router`), the last HTTP filter of a manager.
fn router() -> (String, Any) {
    (
        "envoy.filters.http.router".into(),
        any(ROUTER, &wire::Present {}),
    )
}

fn listener(routes: &[String], scope_sets: &[String], discovered: &[String]) -> wire::Listener {
    let mut filters: Vec<wire::HttpFilter> = discovered
        .iter()
        .map(|name| wire::HttpFilter {
            name: name.clone(),
            typed_config: None,
            config_discovery: Some(wire::ExtensionConfigSource {
                config_source: Some(wire::ConfigSource::ads()),
                type_urls: alloc::vec![alloc::format!("type.googleapis.com/{ROUTER}")],
            }),
        })
        .collect();
    let (router_name, router) = router();
    filters.push(wire::HttpFilter {
        name: router_name,
        typed_config: Some(router),
        config_discovery: None,
    });
    let mut managers: Vec<wire::HttpConnectionManager> = routes
        .iter()
        .map(|route_config_name| wire::HttpConnectionManager {
            rds: Some(wire::Rds {
                config_source: Some(wire::ConfigSource::ads()),
                route_config_name: route_config_name.clone(),
            }),
            ..Default::default()
        })
        .chain(scope_sets.iter().map(|set| wire::HttpConnectionManager {
            scoped_routes: Some(wire::ScopedRoutes {
                name: set.clone(),
                scope_key_builder: Some(wire::ScopeKeyBuilder {
                    fragments: alloc::vec![wire::FragmentBuilder {
                        header_value_extractor: Some(wire::HeaderValueExtractor {
                            name: "x-scope".into(),
                        }),
                    }],
                }),
                rds_config_source: Some(wire::ConfigSource::ads()),
                scoped_route_configurations_list: None,
                scoped_rds: Some(wire::ScopedRds {
                    scoped_rds_config_source: Some(wire::ConfigSource::ads()),
                }),
            }),
            ..Default::default()
        }))
        .collect();
    if managers.is_empty() && !discovered.is_empty() {
        // Filters need a manager: one with an empty inline route configuration.
        managers.push(wire::HttpConnectionManager {
            route_config: Some(wire::RouteConfiguration::default()),
            ..Default::default()
        });
    }
    for manager in &mut managers {
        manager.http_filters = alloc::vec![filters.last().cloned().unwrap_or_default()];
    }
    if let Some(first) = managers.first_mut() {
        first.http_filters = filters;
    }
    let mut managers = managers.iter().map(|hcm| any(HTTP_CONNECTION_MANAGER, hcm));
    wire::Listener {
        api_listener: managers.next().map(|a| wire::ApiListener {
            api_listener: Some(a),
        }),
        filter_chains: managers
            .map(|a| wire::FilterChain {
                filters: alloc::vec![wire::Filter {
                    name: "envoy.filters.network.http_connection_manager".into(),
                    typed_config: Some(a),
                    config_discovery: None,
                }],
                transport_socket: None,
            })
            .collect(),
        listener_filters: Vec::new(),
        default_filter_chain: None,
    }
}

fn virtual_host(domains: Vec<String>, clusters: Vec<String>) -> wire::VirtualHost {
    wire::VirtualHost {
        domains,
        routes: clusters
            .into_iter()
            .map(|cluster| wire::Route {
                route: Some(wire::RouteAction {
                    cluster,
                    ..Default::default()
                }),
            })
            .collect(),
        request_mirror_policies: Vec::new(),
    }
}

fn cluster(eds: &[String], children: Vec<String>, secrets: &[String]) -> wire::Cluster {
    wire::Cluster {
        name: String::new(),
        r#type: (!eds.is_empty()).then_some(wire::DISCOVERY_TYPE_EDS),
        eds_cluster_config: eds.first().map(|service| wire::EdsClusterConfig {
            service_name: service.clone(),
        }),
        transport_socket: (!secrets.is_empty()).then(|| wire::TransportSocket {
            typed_config: Some(any(
                UPSTREAM_TLS,
                &wire::UpstreamTlsContext {
                    common_tls_context: Some(wire::CommonTlsContext {
                        tls_certificate_sds_secret_configs: secrets
                            .iter()
                            .map(|s| wire::SdsSecretConfig {
                                name: s.clone(),
                                sds_config: Some(wire::Present {}),
                            })
                            .collect(),
                        ..Default::default()
                    }),
                },
            )),
        }),
        cluster_type: (!children.is_empty()).then(|| wire::TypedExtensionConfig {
            name: "envoy.clusters.aggregate".into(),
            typed_config: Some(any(
                AGGREGATE_CLUSTER,
                &wire::AggregateClusterConfig { clusters: children },
            )),
        }),
        transport_socket_matches: Vec::new(),
    }
}
