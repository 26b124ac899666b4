//! Helpers shared by the server tests: request builders, bodies, draining.
#![allow(dead_code)]

use bytes::Bytes;
use prost::Message;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::server::{ResourceStore, ServerEvent, ServerStream};
use xds_sansio::types::{CLUSTER, ENDPOINT, LISTENER, RESOURCE_WRAPPER_TYPE_URL, ROUTE};
use xds_sansio::{Instant, Request, Response};

pub const CDS: &str = CLUSTER.type_url;
pub const EDS: &str = ENDPOINT.type_url;
pub const LDS: &str = LISTENER.type_url;
pub const RDS: &str = ROUTE.type_url;

pub fn node() -> Node {
    Node {
        id: "envoy".into(),
        cluster: "c".into(),
        ..Node::default()
    }
}

/// A resource body whose field 1 is `name` and field 2 is `data`.
pub fn body(name: &str, data: &str) -> Bytes {
    let mut out = Vec::new();
    out.push(0x0a);
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
    out.push(0x12);
    out.push(data.len() as u8);
    out.extend_from_slice(data.as_bytes());
    Bytes::from(out)
}

pub fn nack_status() -> Status {
    Status {
        code: 13,
        message: "rejected".into(),
        details: vec![],
    }
}

/// A SotW request (V, R, N, T) as the seeds draw them; the node is set when `with_node`.
pub fn sotw(t: &str, version: &str, names: &[&str], nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: version.into(),
        node: Some(node()),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        type_url: t.into(),
        response_nonce: nonce.into(),
        ..DiscoveryRequest::default()
    }
}

pub fn sotw_nack(t: &str, version: &str, names: &[&str], nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        error_detail: Some(nack_status()),
        ..sotw(t, version, names, nonce)
    }
}

pub fn delta(t: &str, sub: &[&str], unsub: &[&str], nonce: &str) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        node: Some(node()),
        type_url: t.into(),
        resource_names_subscribe: sub.iter().map(|n| n.to_string()).collect(),
        resource_names_unsubscribe: unsub.iter().map(|n| n.to_string()).collect(),
        response_nonce: nonce.into(),
        ..DeltaDiscoveryRequest::default()
    }
}

pub fn drain(s: &mut ServerStream, now: Instant, store: &ResourceStore) -> Vec<Response> {
    let mut out = Vec::new();
    while let Some(r) = s.poll_response(now, store) {
        out.push(r);
        assert!(out.len() < 100, "poll_response loops");
    }
    out
}

pub fn events(s: &mut ServerStream) -> Vec<ServerEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

pub fn one_sotw(mut v: Vec<Response>) -> DiscoveryResponse {
    assert_eq!(v.len(), 1, "expected one response, got {v:#?}");
    match v.pop() {
        Some(Response::Sotw(r)) => r,
        other => panic!("not sotw: {other:?}"),
    }
}

pub fn one_delta(mut v: Vec<Response>) -> DeltaDiscoveryResponse {
    assert_eq!(v.len(), 1, "expected one response, got {v:#?}");
    match v.pop() {
        Some(Response::Delta(r)) => r,
        other => panic!("not delta: {other:?}"),
    }
}

/// Names of the resources of a SotW response (unwrapping `Resource` wrappers).
pub fn sotw_names(r: &DiscoveryResponse) -> Vec<String> {
    r.resources
        .iter()
        .map(|any| {
            if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
                Resource::decode(any.value.clone()).unwrap().name
            } else {
                xds_sansio::resource::name_of(&any.value)
                    .unwrap()
                    .to_string()
            }
        })
        .collect()
}

pub fn delta_names(r: &DeltaDiscoveryResponse) -> Vec<&str> {
    r.resources.iter().map(|r| r.name.as_str()).collect()
}

pub const T0: Instant = Instant::ZERO;

pub fn req(r: DiscoveryRequest) -> Request {
    Request::Sotw(r)
}

pub fn dreq(r: DeltaDiscoveryRequest) -> Request {
    Request::Delta(r)
}
