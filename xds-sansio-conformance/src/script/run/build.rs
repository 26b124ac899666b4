//! Building the messages of the side the scenario plays, from their patterns.
//!
//! Decisions:
//! - Fields left out are empty; symbols stand for themselves unless the model bound them.
//! - The first request of a stream carries node `client` unless the line says otherwise
//!   (`node=-`: none), since a server requires a node on the first request (xDS protocol,
//!   "Basic Protocol Overview"; `DiscoveryRequest.node`).
//! - A SotW resource with a TTL or without a body is wrapped in `Resource`, the only place
//!   those can be said (`discovery.proto`, `Resource.ttl`).
//! - Bodies are made from the name and the tag (or the version): same tag, same body.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use prost::Message;

use super::Runner;
use crate::script::ast::{ErrorPattern, Item, MessagePattern, LATEST_NONCE, NO_NODE};
use crate::transcript::notation;
use xds_sansio::message::{Request, Response};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
    ResourceError, ResourceName,
};
use xds_sansio::pb::envoy::config::core::v3::{ControlPlane, Node};
use xds_sansio::pb::google::protobuf::{Any, Duration as PbDuration};
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::types::RESOURCE_WRAPPER_TYPE_URL;

/// The `error_detail` a scenario's `E=` stands for.
fn status(error: &ErrorPattern) -> Option<Status> {
    let message = match error {
        ErrorPattern::Absent => return None,
        ErrorPattern::Any => "rejected".into(),
        ErrorPattern::Contains(text) | ErrorPattern::Exact(text) => text.clone(),
    };
    Some(Status {
        code: 13,
        message,
        details: Vec::new(),
    })
}

/// A TTL as the wire writes it.
pub(super) fn ttl_of(duration: Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    }
}

/// `F={name@CODE,..}` as `resource_errors` (the message is the code's name).
pub(super) fn resource_errors_of(items: &Option<Vec<Item>>) -> Vec<ResourceError> {
    items
        .iter()
        .flatten()
        .map(|item| {
            let code = item
                .version
                .as_deref()
                .and_then(notation::code_of)
                .unwrap_or(2);
            ResourceError {
                resource_name: Some(ResourceName {
                    name: item.name.clone(),
                    ..Default::default()
                }),
                error_detail: Some(Status {
                    code,
                    message: notation::code_name(code),
                    details: Vec::new(),
                }),
            }
        })
        .collect()
}

/// `CP=id` as `control_plane` (`CP=-`, or no `CP=`: none).
fn control_plane_of(identifier: &Option<String>) -> Option<ControlPlane> {
    match identifier.as_deref() {
        None | Some("-") => None,
        Some(identifier) => Some(ControlPlane {
            identifier: identifier.into(),
        }),
    }
}

/// The body an item of `type_url` stands for: its tag, else its version, else
/// `fallback_tag`. With references (`[ref=..]`), or in a scenario that runs the dependency
/// manager (`refs_bodies`) for a type whose references are read, a real message of the
/// type that carries them ([`xds_sansio::refs`]), so the manager and the consistency check read
/// what the scenario says.
pub(super) fn body_of(
    item: &Item,
    type_url: &str,
    fallback_tag: &str,
    refs_bodies: bool,
) -> bytes::Bytes {
    let tag = item
        .tag
        .as_deref()
        .or(item.version.as_deref())
        .unwrap_or(fallback_tag);
    let reads_refs = xds_sansio::refs::REFERRING.contains(&type_url);
    if !item.refs.is_empty() || (refs_bodies && reads_refs) {
        let refs: Vec<(&str, &str)> = item
            .refs
            .iter()
            .map(|(t, n)| (t.as_str(), n.as_str()))
            .collect();
        return xds_sansio::refs::build::body_with_refs(type_url, &item.name, &refs, tag);
    }
    notation::body(&item.name, tag)
}

impl Runner<'_> {
    /// The body an item of `type_url` stands for ([`body_of`]); the real body the remote
    /// gives for it, when a real implementation plays a side and has one.
    pub(super) fn body_for(&self, type_url: &str, item: &Item, fallback_tag: &str) -> bytes::Bytes {
        let tag = item
            .tag
            .as_deref()
            .or(item.version.as_deref())
            .unwrap_or(fallback_tag);
        self.remote
            .as_deref()
            .and_then(|remote| remote.body(type_url, &item.name, tag))
            .unwrap_or_else(|| body_of(item, type_url, fallback_tag, self.refs_bodies))
    }

    fn node_for(&mut self, node: &Option<String>) -> Option<Node> {
        let first = !self.first_request_sent;
        self.first_request_sent = true;
        let id = match node {
            // `node=-`: a request without a node, even the first.
            Some(id) if id == NO_NODE => return None,
            Some(id) => id.clone(),
            None if first => "client".into(),
            None => return None,
        };
        Some(Node {
            id,
            ..Node::default()
        })
    }

    /// The value a symbol of the scenario side stands for: a version of `type_url`.
    fn version_input(&mut self, type_url: &str, symbol: &Option<String>) -> String {
        self.versions_of(type_url)
            .input(symbol.as_deref().unwrap_or(""))
    }

    /// The nonce a request of the scenario side echoes: `N=^` is the latest of its type.
    fn nonce_input(&mut self, type_url: &str, symbol: &Option<String>) -> String {
        match symbol.as_deref() {
            Some(LATEST_NONCE) => self.latest_nonce(type_url).into(),
            symbol => self.nonces.input(symbol.unwrap_or("")),
        }
    }

    /// The request a `C->S` line stands for, when the scenario plays the client.
    pub(super) fn build_request(&mut self, pattern: &MessagePattern) -> Request {
        match pattern {
            MessagePattern::SotwRequest {
                version,
                names,
                nonce,
                type_url,
                error,
                node,
            } => Request::Sotw(DiscoveryRequest {
                version_info: self.version_input(type_url, version),
                node: self.node_for(node),
                resource_names: names.clone().unwrap_or_default(),
                type_url: type_url.clone(),
                response_nonce: self.nonce_input(type_url, nonce),
                error_detail: status(error),
                ..Default::default()
            }),
            MessagePattern::DeltaRequest {
                type_url,
                subscribe,
                unsubscribe,
                initial,
                nonce,
                error,
                node,
            } => {
                let initial_resource_versions = initial
                    .iter()
                    .flatten()
                    .map(|i| (i.name.clone(), self.version_input(type_url, &i.version)))
                    .collect();
                Request::Delta(DeltaDiscoveryRequest {
                    node: self.node_for(node),
                    type_url: type_url.clone(),
                    resource_names_subscribe: subscribe.clone().unwrap_or_default(),
                    resource_names_unsubscribe: unsubscribe.clone().unwrap_or_default(),
                    initial_resource_versions,
                    response_nonce: self.nonce_input(type_url, nonce),
                    error_detail: status(error),
                    ..Default::default()
                })
            }
            // Responses never reach here: the parser gives C->S lines request patterns.
            MessagePattern::SotwResponse { type_url, .. }
            | MessagePattern::DeltaResponse { type_url, .. } => Request::Sotw(DiscoveryRequest {
                type_url: type_url.clone(),
                ..Default::default()
            }),
        }
    }

    fn build_resource(&mut self, item: &Item, type_url: &str, fallback_tag: &str) -> Resource {
        Resource {
            name: item.name.clone(),
            aliases: item.aliases.clone(),
            version: self.version_input(type_url, &item.version),
            resource: (!item.no_body).then(|| Any {
                type_url: item
                    .any_type
                    .clone()
                    .unwrap_or_else(|| type_url.into())
                    .into(),
                value: self.body_for(type_url, item, fallback_tag),
            }),
            ttl: item.ttl.map(ttl_of),
            ..Default::default()
        }
    }

    /// One SotW resource: the body, or the body wrapped in `Resource`.
    fn build_sotw_resource(&mut self, item: &Item, type_url: &str, version_info: &str) -> Any {
        if item.wrapped || item.no_body {
            let wrapper = self.build_resource(item, type_url, version_info);
            Any {
                type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
                value: wrapper.encode_to_vec().into(),
            }
        } else {
            Any {
                type_url: item
                    .any_type
                    .clone()
                    .unwrap_or_else(|| type_url.into())
                    .into(),
                value: self.body_for(type_url, item, version_info),
            }
        }
    }

    /// The response an `S->C` line stands for, when the scenario plays the server.
    pub(super) fn build_response(&mut self, pattern: &MessagePattern) -> Response {
        match pattern {
            MessagePattern::SotwResponse {
                version,
                resources,
                nonce,
                type_url,
                errors,
                control_plane,
            } => {
                let version_info = self.version_input(type_url, version);
                let resources = resources
                    .iter()
                    .flatten()
                    .map(|item| self.build_sotw_resource(item, type_url, &version_info))
                    .collect();
                Response::Sotw(DiscoveryResponse {
                    version_info,
                    resources,
                    type_url: type_url.clone(),
                    nonce: self.nonces.input(nonce.as_deref().unwrap_or("")),
                    resource_errors: resource_errors_of(errors),
                    control_plane: control_plane_of(control_plane),
                    ..Default::default()
                })
            }
            MessagePattern::DeltaResponse {
                version,
                resources,
                removed,
                nonce,
                type_url,
                errors,
                control_plane,
            } => {
                let system_version_info = self.version_input(type_url, version);
                let resources = resources
                    .iter()
                    .flatten()
                    .map(|item| self.build_resource(item, type_url, ""))
                    .collect();
                Response::Delta(DeltaDiscoveryResponse {
                    system_version_info,
                    resources,
                    type_url: type_url.clone(),
                    removed_resources: removed.clone().unwrap_or_default(),
                    nonce: self.nonces.input(nonce.as_deref().unwrap_or("")),
                    resource_errors: resource_errors_of(errors),
                    control_plane: control_plane_of(control_plane),
                    ..Default::default()
                })
            }
            MessagePattern::SotwRequest { type_url, .. }
            | MessagePattern::DeltaRequest { type_url, .. } => Response::Sotw(DiscoveryResponse {
                type_url: type_url.clone(),
                ..Default::default()
            }),
        }
    }
}
