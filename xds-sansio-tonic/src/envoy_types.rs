//! Interop with the `envoy-types` crate (feature `envoy-types`): its discovery messages
//! and the core's, converted through their encoded bytes.
//!
//! ```
//! use xds_sansio_tonic::envoy_types::{IntoEnvoy, IntoSansio};
//! use envoy_types::pb::envoy::service::discovery::v3 as envoy;
//!
//! let theirs = envoy::DiscoveryResponse { version_info: "v1".into(), ..Default::default() };
//! let ours = theirs.into_sansio()?;            // xds_sansio::pb::discovery::DiscoveryResponse
//! assert_eq!(ours.version_info, "v1");
//! let back: envoy::DiscoveryResponse = ours.into_envoy()?;
//! # Ok::<(), prost::DecodeError>(())
//! ```
//!
//! # Decisions
//!
//! - **Through bytes, one way each.** The two crates' messages are the same protobuf, so
//!   a message is encoded once and decoded once on the other side. Resource bodies are an
//!   `Any` on both sides and are never decoded: into the core they become slices of the
//!   one encoded buffer (the core's zero-copy rule), out of it they are copied into the
//!   `Any`'s vector that `envoy-types` holds.
//! - **Resources themselves** (a `Listener`, a `Cluster`) are the application's business:
//!   decode a watch's body with the `envoy-types` message when needed
//!   ([`decode`]); the client validates and caches them without decoding.
//! - **Extension traits**, since neither message type is this crate's: [`IntoSansio`] for
//!   `envoy-types` messages, [`IntoEnvoy`] for the core's.

use bytes::Bytes;
use prost::Message;

use envoy_types::pb::envoy::config::core::v3 as envoy_core;
use envoy_types::pb::envoy::service::discovery::v3 as envoy;
use xds_sansio::pb::discovery as ours;
use xds_sansio::pb::envoy::config::core::v3 as ours_core;

fn convert<T: Message + Default>(from: &impl Message) -> Result<T, prost::DecodeError> {
    T::decode(Bytes::from(from.encode_to_vec()))
}

/// Converts an `envoy-types` message into the core's.
pub trait IntoSansio {
    /// The core's message.
    type Output;
    /// Encodes `self` and decodes the core's message from the bytes (bodies are slices
    /// of them).
    fn into_sansio(self) -> Result<Self::Output, prost::DecodeError>;
}

/// Converts a core message into the `envoy-types` one.
pub trait IntoEnvoy<T> {
    /// Encodes `self` and decodes the `envoy-types` message from the bytes.
    fn into_envoy(self) -> Result<T, prost::DecodeError>;
}

macro_rules! bridge {
    ($($envoy:ty => $ours:ty),* $(,)?) => {$(
        impl IntoSansio for $envoy {
            type Output = $ours;
            fn into_sansio(self) -> Result<$ours, prost::DecodeError> {
                convert(&self)
            }
        }
        impl IntoSansio for &$envoy {
            type Output = $ours;
            fn into_sansio(self) -> Result<$ours, prost::DecodeError> {
                convert(self)
            }
        }
        impl IntoEnvoy<$envoy> for $ours {
            fn into_envoy(self) -> Result<$envoy, prost::DecodeError> {
                convert(&self)
            }
        }
        impl IntoEnvoy<$envoy> for &$ours {
            fn into_envoy(self) -> Result<$envoy, prost::DecodeError> {
                convert(self)
            }
        }
    )*};
}

bridge! {
    envoy::DiscoveryRequest => ours::DiscoveryRequest,
    envoy::DiscoveryResponse => ours::DiscoveryResponse,
    envoy::DeltaDiscoveryRequest => ours::DeltaDiscoveryRequest,
    envoy::DeltaDiscoveryResponse => ours::DeltaDiscoveryResponse,
    envoy::Resource => ours::Resource,
    envoy_core::Node => ours_core::Node,
}

/// Decodes a resource body (from a [`WatchEvent::Changed`](crate::client::WatchEvent))
/// as the `envoy-types` message `M`, e.g. a `Listener`.
pub fn decode<M: Message + Default>(body: &Bytes) -> Result<M, prost::DecodeError> {
    M::decode(body.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::google::protobuf::Any;

    fn cluster(name: &str) -> Any {
        Any {
            type_url: xds_sansio::types::CLUSTER.type_url.into(),
            value: Cluster {
                name: name.into(),
                alt_stat_name: "x".repeat(100),
                ..Default::default()
            }
            .encode_to_vec(),
        }
    }

    #[test]
    fn responses_round_trip_and_bodies_are_slices_of_one_buffer() {
        let theirs = envoy::DiscoveryResponse {
            version_info: "v1".into(),
            resources: vec![cluster("a"), cluster("b")],
            type_url: xds_sansio::types::CLUSTER.type_url.into(),
            nonce: "n".into(),
            control_plane: Some(envoy_core::ControlPlane {
                identifier: "cp".into(),
            }),
            ..Default::default()
        };
        let ours = theirs.clone().into_sansio().unwrap();
        assert_eq!(ours.resources.len(), 2);
        assert_eq!(ours.control_plane.as_ref().unwrap().identifier, "cp");
        let back: envoy::DiscoveryResponse = (&ours).into_envoy().unwrap();
        assert_eq!(back, theirs);
        // Both bodies point into the one buffer the response was encoded to.
        let (a, b) = (
            ours.resources[0].value.as_ptr(),
            ours.resources[1].value.as_ptr(),
        );
        assert!((b as usize).abs_diff(a as usize) < theirs.encoded_len());
        let c: Cluster = decode(&ours.resources[1].value).unwrap();
        assert_eq!(c.name, "b");
        let delta = envoy::DeltaDiscoveryResponse {
            system_version_info: "s".into(),
            resources: vec![envoy::Resource {
                name: "a".into(),
                version: "1".into(),
                resource: Some(cluster("a")),
                aliases: vec!["x".into()],
                ..Default::default()
            }],
            removed_resources: vec!["gone".into()],
            nonce: "n".into(),
            ..Default::default()
        };
        let ours = (&delta).into_sansio().unwrap();
        assert_eq!(ours.removed_resources, ["gone"]);
        let back: envoy::DeltaDiscoveryResponse = ours.into_envoy().unwrap();
        assert_eq!(back, delta);
    }

    #[test]
    fn requests_and_nodes_round_trip() {
        let node = envoy_core::Node {
            id: "n".into(),
            cluster: "c".into(),
            client_features: vec!["f".into()],
            ..Default::default()
        };
        let request = envoy::DiscoveryRequest {
            node: Some(node.clone()),
            resource_names: vec!["a".into()],
            type_url: "t".into(),
            ..Default::default()
        };
        let ours = (&request).into_sansio().unwrap();
        assert_eq!(ours.node.as_ref().unwrap().id, "n");
        let back: envoy::DiscoveryRequest = ours.into_envoy().unwrap();
        assert_eq!(back, request);
        let delta = envoy::DeltaDiscoveryRequest {
            node: Some(node.clone()),
            resource_names_subscribe: vec!["a".into()],
            initial_resource_versions: [("a".to_string(), "1".to_string())].into(),
            ..Default::default()
        };
        let back: envoy::DeltaDiscoveryRequest =
            delta.clone().into_sansio().unwrap().into_envoy().unwrap();
        assert_eq!(back, delta);
        let n = node.clone().into_sansio().unwrap();
        assert_eq!(IntoEnvoy::<envoy_core::Node>::into_envoy(n).unwrap(), node);
    }

    /// The hand-written CSDS messages decode as Envoy's generated ones, field by field.
    #[test]
    fn csds_messages_match_envoys_field_numbers() {
        use crate::csds::pb;
        use envoy_types::pb::envoy::admin::v3 as admin;
        use envoy_types::pb::envoy::service::status::v3 as status;
        let ours = pb::ClientStatusResponse {
            config: vec![pb::ClientConfig {
                node: Some(xds_sansio::pb::envoy::config::core::v3::Node {
                    id: "n".into(),
                    ..Default::default()
                }),
                generic_xds_configs: vec![pb::GenericXdsConfig {
                    type_url: "t".into(),
                    name: "a".into(),
                    version_info: "1".into(),
                    xds_config: Some(prost_types::Any {
                        type_url: "t".into(),
                        value: vec![1, 2],
                    }),
                    last_updated: Some(prost_types::Timestamp {
                        seconds: 5,
                        nanos: 6,
                    }),
                    config_status: 1,
                    client_status: pb::ClientResourceStatus::Nacked as i32,
                    error_state: Some(pb::UpdateFailureState {
                        details: "bad".into(),
                        version_info: "2".into(),
                        last_update_attempt: Some(prost_types::Timestamp {
                            seconds: 7,
                            nanos: 0,
                        }),
                        failed_configuration: Some(prost_types::Any {
                            type_url: "t".into(),
                            value: vec![3],
                        }),
                    }),
                    is_static_resource: true,
                }],
                client_scope: "scope".into(),
            }],
        };
        let theirs =
            status::ClientStatusResponse::decode(Bytes::from(ours.encode_to_vec())).unwrap();
        let c = &theirs.config[0];
        assert_eq!(c.node.as_ref().unwrap().id, "n");
        assert_eq!(c.client_scope, "scope");
        let g = &c.generic_xds_configs[0];
        assert_eq!(
            (
                g.type_url.as_str(),
                g.name.as_str(),
                g.version_info.as_str()
            ),
            ("t", "a", "1")
        );
        assert_eq!(g.xds_config.as_ref().unwrap().value, [1, 2]);
        assert_eq!(g.last_updated.as_ref().unwrap().seconds, 5);
        assert_eq!(g.config_status, status::ConfigStatus::Synced as i32);
        assert_eq!(g.client_status, admin::ClientResourceStatus::Nacked as i32);
        let e = g.error_state.as_ref().unwrap();
        assert_eq!((e.details.as_str(), e.version_info.as_str()), ("bad", "2"));
        assert_eq!(e.last_update_attempt.as_ref().unwrap().seconds, 7);
        assert_eq!(e.failed_configuration.as_ref().unwrap().value, [3]);
        assert!(g.is_static_resource);
        // Every status value means the same on both sides.
        for (o, t) in [
            (
                pb::ClientResourceStatus::Unknown,
                admin::ClientResourceStatus::Unknown,
            ),
            (
                pb::ClientResourceStatus::Requested,
                admin::ClientResourceStatus::Requested,
            ),
            (
                pb::ClientResourceStatus::DoesNotExist,
                admin::ClientResourceStatus::DoesNotExist,
            ),
            (
                pb::ClientResourceStatus::Acked,
                admin::ClientResourceStatus::Acked,
            ),
            (
                pb::ClientResourceStatus::Nacked,
                admin::ClientResourceStatus::Nacked,
            ),
            (
                pb::ClientResourceStatus::ReceivedError,
                admin::ClientResourceStatus::ReceivedError,
            ),
            (
                pb::ClientResourceStatus::Timeout,
                admin::ClientResourceStatus::Timeout,
            ),
        ] {
            assert_eq!(o as i32, t as i32);
        }
        // And the request, the other way.
        let request = status::ClientStatusRequest {
            node_matchers: vec![Default::default()],
            node: Some(Default::default()),
            exclude_resource_contents: true,
        };
        let ours = pb::ClientStatusRequest::decode(Bytes::from(request.encode_to_vec())).unwrap();
        assert_eq!(ours.node_matchers.len(), 1);
        assert!(ours.node.is_some() && ours.exclude_resource_contents);
    }
}
