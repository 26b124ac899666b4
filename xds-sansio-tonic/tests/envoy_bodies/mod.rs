//! Envoy resource bodies shared by the adapter's tests that need real messages.

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as endpoint;
use prost::Message;

/// One endpoint, 127.0.0.1:`port`.
pub fn endpoints_body(name: &str, port: u32) -> Bytes {
    let address = core::Address {
        address: Some(core::address::Address::SocketAddress(core::SocketAddress {
            address: "127.0.0.1".into(),
            port_specifier: Some(core::socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    };
    Bytes::from(
        endpoint::ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![endpoint::LocalityLbEndpoints {
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
        .encode_to_vec(),
    )
}
