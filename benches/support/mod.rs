//! What the server benches share: resource bodies, a wildcard CDS stream and the fan-out
//! stream set, so `server_build` and `server_fanout` measure exactly what their `_steady`
//! twins measure.
#![allow(dead_code)]

use bytes::Bytes;
use xds_sansio::pb::discovery::DiscoveryRequest;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceStore, ServerConfig, ServerStream, StreamSet};
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Instant, Request, Transport, Variant};

pub const CDS: &str = CLUSTER.type_url;
pub const EDS: &str = ENDPOINT.type_url;

/// A cluster body: the name (field 1) and `filler` bytes of other fields (field 2).
pub fn cluster_body(name: &str, filler: usize) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.push(0x12);
    let mut len = filler;
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend(std::iter::repeat_n(7u8, filler));
    Bytes::from(out)
}

/// A SotW ADS stream that has received a wildcard CDS request (its events left queued).
pub fn cds_wildcard_stream() -> ServerStream {
    let mut s = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    s.handle_request(
        Instant::ZERO,
        Request::Sotw(DiscoveryRequest {
            node: Some(Node {
                id: "envoy".into(),
                ..Node::default()
            }),
            type_url: CDS.into(),
            ..DiscoveryRequest::default()
        }),
    );
    s
}

/// An endpoint body: the name (field 1) and 64 bytes of `data` (field 2).
pub fn eds_body(name: &str, data: u8) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, 64]);
    out.extend(std::iter::repeat_n(data, 64));
    Bytes::from(out)
}

/// `streams` streams over a store of `resources` EDS resources (plus `target`); stream i
/// subscribes to resources 3i, 3i+1, 3i+2 (modulo the store), streams 0..`subscribers` to
/// `target` too. Every first response is drained.
pub fn fanout_setup(
    streams: usize,
    resources: usize,
    subscribers: usize,
) -> (ResourceStore, StreamSet) {
    let mut store = ResourceStore::new();
    store.set(EDS, "target", eds_body("target", 0)).unwrap();
    for r in 0..resources {
        let name = format!("r{r}");
        store.set(EDS, &name, eds_body(&name, 1)).unwrap();
    }
    let mut set = StreamSet::new();
    for i in 0..streams {
        let mut names: Vec<String> = (0..3)
            .map(|k| format!("r{}", (i * 3 + k) % resources))
            .collect();
        if i < subscribers {
            names.push("target".into());
        }
        let id = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
        let request = DiscoveryRequest {
            node: Some(Node {
                id: format!("node-{i}"),
                ..Node::default()
            }),
            resource_names: names,
            type_url: EDS.into(),
            ..DiscoveryRequest::default()
        };
        set.handle_request(id, Instant::ZERO, Request::Sotw(request))
            .unwrap();
    }
    while let Some(id) = set.poll_ready() {
        while set.poll_response(id, Instant::ZERO, &store).is_some() {}
        while set.poll_event(id).is_some() {}
    }
    (store, set)
}
