//! Bodies that carry given references, built from the minimal messages: what scenarios
//! (`[ref=TYPE:name]`) and tests write. Field 1 (the name) is written first, then the
//! message, so a SotW client reads the name as from any resource.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use prost::Message;

use super::wire;
use super::{AGGREGATE_CLUSTER, HTTP_CONNECTION_MANAGER, UPSTREAM_TLS};
use crate::pb::google::protobuf::{Any, TypeUrl};
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET};

fn any(full_name: &str, message: &impl Message) -> Any {
    Any {
        type_url: TypeUrl::from(alloc::format!("type.googleapis.com/{full_name}").as_str()),
        value: Bytes::from(message.encode_to_vec()),
    }
}

/// A body of `type_url` named `name` whose references are `refs` (`(type URL, name)`);
/// `tag` is written too (as an unknown field), so different tags are different bodies.
/// Listener: an API listener per RDS reference (the first in `api_listener`, the others in
/// filter chains). RouteConfiguration: a route per CDS reference. Cluster: EDS with the
/// service name of its EDS reference, aggregate over its CDS references, an upstream TLS
/// secret per SDS reference. Other types: the name and the tag only.
pub(crate) fn body_with_refs(
    type_url: &str,
    name: &str,
    refs: &[(&str, &str)],
    tag: &str,
) -> Bytes {
    let of = |t: &str| -> Vec<String> {
        refs.iter()
            .filter(|(rt, _)| *rt == t)
            .map(|(_, n)| String::from(*n))
            .collect()
    };
    let mut out = Vec::new();
    prost::encoding::string::encode(1, &String::from(name), &mut out);
    if type_url == LISTENER.type_url {
        let managers: Vec<Any> = of(ROUTE.type_url)
            .into_iter()
            .map(|route_config_name| {
                let hcm = wire::HttpConnectionManager {
                    rds: Some(wire::Rds { route_config_name }),
                    route_config: None,
                    scoped_routes: None,
                };
                any(HTTP_CONNECTION_MANAGER, &hcm)
            })
            .collect();
        let mut managers = managers.into_iter();
        let listener = wire::Listener {
            api_listener: managers.next().map(|a| wire::ApiListener {
                api_listener: Some(a),
            }),
            filter_chains: managers
                .map(|a| wire::FilterChain {
                    filters: alloc::vec![wire::Filter {
                        typed_config: Some(a)
                    }],
                    transport_socket: None,
                })
                .collect(),
            default_filter_chain: None,
        };
        listener.encode(&mut out).ok();
    } else if type_url == ROUTE.type_url {
        let route = wire::RouteConfiguration {
            virtual_hosts: alloc::vec![wire::VirtualHost {
                routes: of(CLUSTER.type_url)
                    .into_iter()
                    .map(|cluster| wire::Route {
                        route: Some(wire::RouteAction {
                            cluster,
                            ..Default::default()
                        }),
                    })
                    .collect(),
                request_mirror_policies: Vec::new(),
            }],
            ..Default::default()
        };
        route.encode(&mut out).ok();
    } else if type_url == CLUSTER.type_url {
        let eds = of(ENDPOINT.type_url);
        let children = of(CLUSTER.type_url);
        let secrets = of(SECRET.type_url);
        let cluster = wire::Cluster {
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
        };
        cluster.encode(&mut out).ok();
    }
    if !tag.is_empty() {
        // Field 999, skipped by every reader: the tag makes bodies differ.
        prost::encoding::string::encode(999, &String::from(tag), &mut out);
    }
    Bytes::from(out)
}
