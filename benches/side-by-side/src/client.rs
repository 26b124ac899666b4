//! Client: bytes of a 10 000-cluster SotW CDS response to the ACK ready, in process.

use crate::common::{cluster_bytes, interleave, report, timed, Contender, CDS};
use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use prost::Message;
use std::hint::black_box;
use xds_sansio::client::{Client, ClientConfig, EventShape};
use xds_sansio::pb::decode_discovery_response;
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::{Instant, Response, Transport, Variant};

pub const N: usize = 10_000;

/// The wire bytes of the response: 10 000 real Clusters, version `v1`, nonce `n1`.
pub fn response_bytes() -> Bytes {
    let resp = DiscoveryResponse {
        version_info: "v1".into(),
        resources: (0..N)
            .map(|i| Any {
                type_url: CDS.into(),
                value: cluster_bytes(i, 1),
            })
            .collect(),
        type_url: CDS.into(),
        nonce: "n1".into(),
        ..DiscoveryResponse::default()
    };
    Bytes::from(resp.encode_to_vec())
}

fn client(shape: EventShape, typed: bool) -> Client {
    let mut config = ClientConfig::new(Variant::Sotw, Transport::Aggregated, Node::default());
    config.event_shape = shape;
    let mut c = Client::new(config);
    if typed {
        // The application's validator: every body decoded into a typed Cluster (and
        // dropped: the validator answers yes or no).
        c.set_validator(
            CDS,
            Box::new(|_name: &str, _version: &str, body: &Bytes| {
                Cluster::decode(&body[..])
                    .map(|c| {
                        black_box(c);
                    })
                    .map_err(|e| e.to_string())
            }),
        );
    }
    c.subscribe(CDS, &[]).unwrap_or_default();
    c.connected(Instant::ZERO);
    while c.poll_request(Instant::ZERO).is_some() {}
    c
}

/// decode (the crate's own, as its adapter does) + handle + ACK + drain the events; the
/// client (its cache) is returned so that it is dropped outside the timing.
fn crate_run(shape: EventShape, typed: bool, wire: &Bytes) -> std::time::Duration {
    let mut c = client(shape, typed);
    let (d, ack) = timed(|| {
        let resp = decode_discovery_response(wire.clone()).unwrap_or_default();
        c.handle_response(Instant::ZERO, Response::Sotw(resp));
        let ack = c.poll_request(Instant::ZERO);
        while let Some(e) = c.poll_event() {
            black_box(e);
        }
        ack
    });
    // Checked outside the timing: an ACK (not a NACK) of v1.
    match ack {
        Some(xds_sansio::Request::Sotw(r)) => {
            assert!(
                r.error_detail.is_none() && r.version_info == "v1",
                "not an ACK"
            );
        }
        other => panic!("no ACK: {other:?}"),
    }
    drop(c);
    d
}

pub fn run(iterations: usize, xds_client: Option<&crate::xds_client_peer::Peer>) {
    let wire = response_bytes();
    println!(
        "client: response of {N} clusters, {} bytes on the wire; cluster body {} bytes; \
         size_of::<envoy_types Cluster>() = {} bytes",
        wire.len(),
        cluster_bytes(0, 1).len(),
        std::mem::size_of::<Cluster>()
    );
    let mut contenders: Vec<Contender<'_>> = vec![
        (
            "prost floor: outer DiscoveryResponse (xds-sansio's pb, Bytes bodies)",
            Box::new(|| {
                let (d, r) = timed(|| DiscoveryResponse::decode(wire.clone()).unwrap_or_default());
                drop(black_box(r));
                d
            }),
        ),
        (
            "prost floor: outer DiscoveryResponse (envoy-types, Vec<u8> bodies)",
            Box::new(|| {
                use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse as E;
                let (d, r) = timed(|| E::decode(&wire[..]).unwrap_or_default());
                drop(black_box(r));
                d
            }),
        ),
        (
            "prost floor: outer (Bytes bodies) + 10k typed Cluster decodes",
            Box::new(|| {
                let (d, r) = timed(|| {
                    let r = DiscoveryResponse::decode(wire.clone()).unwrap_or_default();
                    for any in &r.resources {
                        black_box(Cluster::decode(&any.value[..]).unwrap_or_default());
                    }
                    r
                });
                drop(black_box(r));
                d
            }),
        ),
        (
            "prost floor: outer (envoy-types) + 10k typed Cluster decodes, kept",
            Box::new(|| {
                use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse as E;
                let (d, r) = timed(|| {
                    let r = E::decode(&wire[..]).unwrap_or_default();
                    r.resources
                        .iter()
                        .map(|any| Cluster::decode(&any.value[..]).unwrap_or_default())
                        .collect::<Vec<_>>()
                });
                drop(black_box(r));
                d
            }),
        ),
        (
            "xds-sansio, opaque, Batched",
            Box::new(|| crate_run(EventShape::Batched, false, &wire)),
        ),
        (
            "xds-sansio, opaque, PerResource (default)",
            Box::new(|| crate_run(EventShape::PerResource, false, &wire)),
        ),
        (
            "xds-sansio, typed validator, Batched",
            Box::new(|| crate_run(EventShape::Batched, true, &wire)),
        ),
        (
            "xds-sansio, typed validator, PerResource",
            Box::new(|| crate_run(EventShape::PerResource, true, &wire)),
        ),
    ];
    if let Some(peer) = xds_client {
        contenders.push((
            "xds-client 0.1.0-alpha.4, loopback gRPC",
            peer.contender(&wire),
        ));
        contenders.push((
            "loopback gRPC floor (tonic client: receive, decode outer, ACK)",
            peer.floor_contender(&wire),
        ));
        contenders.push((
            "xds-sansio, opaque, Batched, loopback gRPC (same server, same client channel)",
            peer.crate_contender(&wire),
        ));
    }
    let results = interleave(iterations, &mut contenders);
    report(
        "client: 10 000-cluster SotW CDS response, bytes to ACK ready (medians, interleaved)",
        &results,
        "xds-sansio, opaque, Batched",
    );
    let get = |label: &str| {
        results
            .iter()
            .find(|(l, ..)| l.starts_with(label))
            .map(|(_, t, ..)| *t)
    };
    if let (Some(typed), Some(floor)) = (
        get("xds-sansio, typed validator, Batched"),
        get("prost floor: outer (Bytes bodies) + 10k"),
    ) {
        println!(
            "goal typed within 1.2x of the typed-decode floor: {:.2}x",
            typed / floor
        );
    }
    if let (Some(ours), Some(theirs)) = (
        get("xds-sansio, opaque, Batched"),
        get("xds-client 0.1.0-alpha.4"),
    ) {
        println!(
            "goal opaque >= 5x faster than xds-client: {:.2}x",
            theirs / ours
        );
    }
    if let (Some(ours), Some(typed), Some(theirs), Some(floor)) = (
        get("xds-sansio, opaque, Batched"),
        get("xds-sansio, typed validator, Batched"),
        get("xds-client 0.1.0-alpha.4"),
        get("loopback gRPC floor"),
    ) {
        println!(
            "xds-client minus the loopback floor: {:.2} ms = {:.2}x xds-sansio opaque in process, {:.2}x typed in process",
            (theirs - floor) * 1e3,
            (theirs - floor) / ours,
            (theirs - floor) / typed
        );
    }
    if let (Some(ours), Some(theirs)) = (
        get("xds-sansio, opaque, Batched, loopback"),
        get("xds-client 0.1.0-alpha.4"),
    ) {
        println!(
            "same loopback harness: xds-client / xds-sansio batched = {:.2}x",
            theirs / ours
        );
    }
}
