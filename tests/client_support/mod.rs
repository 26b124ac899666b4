//! Helpers shared by the client tests: message builders and drain loops.
#![allow(dead_code)]

use bytes::Bytes;
use prost::Message;
use xds_sansio::client::{Client, ClientConfig, ClientEvent};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
    ResourceError, ResourceName,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::types::{CLUSTER, ENDPOINT, LISTENER, RESOURCE_WRAPPER_TYPE_URL};
use xds_sansio::{Instant, Request, Response, Transport, Variant};

pub const EDS: &str = ENDPOINT.type_url;
pub const CDS: &str = CLUSTER.type_url;
pub const LDS: &str = LISTENER.type_url;

pub fn node() -> Node {
    Node {
        id: "envoy".into(),
        ..Node::default()
    }
}

pub fn config(variant: Variant, transport: Transport) -> ClientConfig {
    ClientConfig::new(variant, transport, node())
}

pub fn sotw_ads() -> Client {
    Client::new(config(Variant::Sotw, Transport::Aggregated))
}

pub fn delta_ads() -> Client {
    Client::new(config(Variant::Delta, Transport::Aggregated))
}

pub fn t(secs: u64) -> Instant {
    Instant::from_secs(secs)
}

/// An encoded resource whose name is field 1, with `payload` in field 2.
pub fn body(name: &str, payload: &str) -> Bytes {
    let mut out = Vec::new();
    prost::encoding::string::encode(1, &name.to_string(), &mut out);
    prost::encoding::string::encode(2, &payload.to_string(), &mut out);
    Bytes::from(out)
}

pub fn any(type_url: &str, name: &str, payload: &str) -> Any {
    Any {
        type_url: type_url.into(),
        value: body(name, payload),
    }
}

/// A SotW `Resource` wrapper.
pub fn wrapped(
    type_url: &str,
    name: &str,
    version: &str,
    payload: Option<&str>,
    ttl_secs: Option<i64>,
) -> Any {
    let r = Resource {
        name: name.into(),
        version: version.into(),
        resource: payload.map(|p| any(type_url, name, p)),
        ttl: ttl_secs.map(|s| prost_types::Duration {
            seconds: s,
            nanos: 0,
        }),
        ..Resource::default()
    };
    Any {
        type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
        value: r.encode_to_vec().into(),
    }
}

pub fn sotw_raw(type_url: &str, version: &str, nonce: &str, resources: Vec<Any>) -> Response {
    Response::Sotw(DiscoveryResponse {
        version_info: version.into(),
        resources,
        type_url: type_url.into(),
        nonce: nonce.into(),
        ..DiscoveryResponse::default()
    })
}

/// A SotW response with `(name, payload)` resources.
pub fn sotw(type_url: &str, version: &str, nonce: &str, resources: &[(&str, &str)]) -> Response {
    sotw_raw(
        type_url,
        version,
        nonce,
        resources.iter().map(|(n, p)| any(type_url, n, p)).collect(),
    )
}

pub fn res(type_url: &str, name: &str, version: &str, payload: Option<&str>) -> Resource {
    Resource {
        name: name.into(),
        version: version.into(),
        resource: payload.map(|p| any(type_url, name, p)),
        ..Resource::default()
    }
}

pub fn delta_raw(
    type_url: &str,
    nonce: &str,
    resources: Vec<Resource>,
    removed: &[&str],
) -> Response {
    Response::Delta(DeltaDiscoveryResponse {
        system_version_info: format!("sys-{nonce}"),
        resources,
        type_url: type_url.into(),
        removed_resources: removed.iter().map(|s| s.to_string()).collect(),
        nonce: nonce.into(),
        ..DeltaDiscoveryResponse::default()
    })
}

/// An incremental response with `(name, version, payload)` resources.
pub fn delta(
    type_url: &str,
    nonce: &str,
    resources: &[(&str, &str, &str)],
    removed: &[&str],
) -> Response {
    delta_raw(
        type_url,
        nonce,
        resources
            .iter()
            .map(|(n, v, p)| res(type_url, n, v, Some(p)))
            .collect(),
        removed,
    )
}

/// A `resource_errors` entry (xRFC TP3).
pub fn resource_error(name: &str, code: i32, message: &str) -> ResourceError {
    ResourceError {
        resource_name: Some(ResourceName {
            name: name.to_string(),
            ..ResourceName::default()
        }),
        error_detail: Some(Status {
            code,
            message: message.to_string(),
            details: vec![],
        }),
    }
}

pub fn requests(c: &mut Client, now: Instant) -> Vec<Request> {
    let mut out = Vec::new();
    while let Some(r) = c.poll_request(now) {
        out.push(r);
    }
    out
}

pub fn events(c: &mut Client) -> Vec<ClientEvent> {
    let mut out = Vec::new();
    while let Some(e) = c.poll_event() {
        out.push(e);
    }
    out
}

pub fn sotw_reqs(c: &mut Client, now: Instant) -> Vec<DiscoveryRequest> {
    requests(c, now)
        .into_iter()
        .map(|r| match r {
            Request::Sotw(r) => r,
            Request::Delta(_) => panic!("delta request from a SotW client"),
        })
        .collect()
}

pub fn delta_reqs(c: &mut Client, now: Instant) -> Vec<DeltaDiscoveryRequest> {
    requests(c, now)
        .into_iter()
        .map(|r| match r {
            Request::Delta(r) => r,
            Request::Sotw(_) => panic!("SotW request from a delta client"),
        })
        .collect()
}

/// The only SotW request queued.
pub fn one(c: &mut Client, now: Instant) -> DiscoveryRequest {
    let mut reqs = sotw_reqs(c, now);
    assert_eq!(reqs.len(), 1, "expected exactly one request, got {reqs:#?}");
    reqs.remove(0)
}

/// The only incremental request queued.
pub fn one_delta(c: &mut Client, now: Instant) -> DeltaDiscoveryRequest {
    let mut reqs = delta_reqs(c, now);
    assert_eq!(reqs.len(), 1, "expected exactly one request, got {reqs:#?}");
    reqs.remove(0)
}

/// Asserts a SotW request in the seeds' notation (V, R, N) and whether it is a NACK.
#[track_caller]
pub fn check(req: &DiscoveryRequest, v: &str, r: &[&str], n: &str, nack: bool) {
    assert_eq!(req.version_info, v, "version_info of {req:#?}");
    assert_eq!(req.resource_names, r, "resource_names of {req:#?}");
    assert_eq!(req.response_nonce, n, "response_nonce of {req:#?}");
    assert_eq!(req.error_detail.is_some(), nack, "error_detail of {req:#?}");
}

pub fn names_of(evs: &[ClientEvent]) -> Vec<String> {
    evs.iter()
        .map(|e| match e {
            ClientEvent::Upserted { name, .. } => format!("+{name}"),
            ClientEvent::Removed { name, reason, .. } => format!("-{name}:{reason:?}"),
            ClientEvent::DoesNotExist { name, .. } => format!("dne:{name}"),
            ClientEvent::Changed { changes, .. } => format!("changed:{}", changes.len()),
            ClientEvent::DeletionIgnored { name, .. } => format!("kept:{name}"),
            ClientEvent::ResourceError { name, code, .. } => format!("error:{name}:{code}"),
            ClientEvent::Acked { version, nonce, .. } => format!("ack:{version}/{nonce}"),
            ClientEvent::Nacked { version, nonce, .. } => format!("nack:{version}/{nonce}"),
            ClientEvent::Ready { .. } => "ready".into(),
            ClientEvent::ValidationNeeded { .. } => "validate".into(),
            ClientEvent::Ignored { reason, .. } => format!("ignored:{reason:?}"),
            other => format!("{other:?}"),
        })
        .collect()
}
