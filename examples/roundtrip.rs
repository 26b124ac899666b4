//! Round-trips every discovery message through the binary wire format and (with the
//! `json` feature) canonical proto3 JSON, printing each one and whether it came back
//! unchanged. Exits non-zero if any message does not.
//!
//! Run: `cargo run --release --example roundtrip --features json`

use bytes::Bytes;
use prost::{Message, Name};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use xds_sansio::pb::envoy::config::core::v3::{ControlPlane, Node};
use xds_sansio::pb::google::protobuf::{Any, Duration};
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::types::{CLUSTER, ENDPOINT};

fn check<M: Message + Name + Default + PartialEq + std::fmt::Debug>(message: &M) -> bool {
    let wire = Bytes::from(message.encode_to_vec());
    let binary_ok = M::decode(wire.clone()).as_ref() == Ok(message);
    print!(
        "{:<28} {:>4} bytes  binary {}",
        M::NAME,
        wire.len(),
        mark(binary_ok)
    );
    #[cfg(feature = "json")]
    let json_ok = {
        let codec = xds_sansio::codec::json::JsonCodec::new();
        let text = codec.to_string(message).unwrap_or_else(|e| e.to_string());
        let ok = codec.from_str::<M>(&text).as_ref() == Ok(message);
        println!("  json {}\n    {text}", mark(ok));
        ok
    };
    #[cfg(not(feature = "json"))]
    let json_ok = {
        println!("  json (feature `json` off)");
        true
    };
    binary_ok && json_ok
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "MISMATCH"
    }
}

fn main() {
    let node = Node {
        id: "envoy-1".into(),
        cluster: "edge".into(),
        client_features: vec!["xds.config.supports-resource-ttl".into()],
        ..Default::default()
    };
    let body = Any {
        type_url: CLUSTER.type_url.into(),
        value: Bytes::from_static(b"\x0a\x03foo"),
    };
    let results = [
        check(&DiscoveryRequest {
            node: Some(node.clone()),
            resource_names: vec!["foo".into(), "bar".into()],
            type_url: ENDPOINT.type_url.into(),
            ..Default::default()
        }),
        check(&DiscoveryResponse {
            version_info: "X".into(),
            resources: vec![body.clone()],
            type_url: CLUSTER.type_url.into(),
            nonce: "A".into(),
            control_plane: Some(ControlPlane {
                identifier: "xds-sansio".into(),
            }),
            ..Default::default()
        }),
        check(&DiscoveryRequest {
            version_info: String::new(),
            resource_names: vec!["foo".into()],
            type_url: CLUSTER.type_url.into(),
            response_nonce: "A".into(),
            error_detail: Some(Status {
                code: 13,
                message: "rejected".into(),
                details: vec![],
            }),
            ..Default::default()
        }),
        check(&DeltaDiscoveryRequest {
            node: Some(node),
            type_url: CLUSTER.type_url.into(),
            resource_names_subscribe: vec!["*".into()],
            initial_resource_versions: [("foo".to_string(), "1".to_string())].into(),
            ..Default::default()
        }),
        check(&DeltaDiscoveryResponse {
            system_version_info: "7".into(),
            resources: vec![Resource {
                name: "foo".into(),
                version: "2".into(),
                resource: Some(body),
                ttl: Some(Duration {
                    seconds: 30,
                    nanos: 0,
                }),
                ..Default::default()
            }],
            type_url: CLUSTER.type_url.into(),
            removed_resources: vec!["bar".into()],
            nonce: "B".into(),
            ..Default::default()
        }),
    ];
    let passed = results.iter().filter(|ok| **ok).count();
    println!("{} passed, {} failed", passed, results.len() - passed);
    if passed != results.len() {
        std::process::exit(1);
    }
}
