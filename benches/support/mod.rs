//! What the benches share: resource bodies, a wildcard CDS stream and the fan-out stream
//! set (so `server_build` and `server_fanout` measure exactly what their `_steady` twins
//! measure), a client's drain, and a counting allocator for the memory figures.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};

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
    body_filled(name, filler, 7)
}

/// A body: the name (field 1) and `filler` bytes of `fill` (field 2); another `fill` is
/// another body of the same size.
pub fn body_filled(name: &str, filler: usize, fill: u8) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.push(0x12);
    let mut len = filler;
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend(std::iter::repeat_n(fill, filler));
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

/// Decodes (prost), handles and ACKs a SotW response on `c` and drains every event; for a
/// batch, each change is read from the cache (name, body and version borrowed), as an
/// application applying it would.
pub fn ingest_sotw(c: &mut xds_sansio::client::Client, wire: &Bytes) {
    use prost::Message;
    use xds_sansio::pb::discovery::DiscoveryResponse;
    ingest_decoded(
        c,
        DiscoveryResponse::decode(wire.clone()).unwrap_or_default(),
    );
}

/// [`ingest_sotw`] with the crate's own decode of the wire bytes
/// (`xds_sansio::pb::decode_discovery_response`, what the adapter's client runs).
pub fn ingest_sotw_wire(c: &mut xds_sansio::client::Client, wire: &Bytes) {
    let resp = xds_sansio::pb::decode_discovery_response(wire.clone()).unwrap_or_default();
    ingest_decoded(c, resp);
}

fn ingest_decoded(
    c: &mut xds_sansio::client::Client,
    resp: xds_sansio::pb::discovery::DiscoveryResponse,
) {
    use xds_sansio::client::ClientEvent;
    c.handle_response(Instant::ZERO, xds_sansio::Response::Sotw(resp));
    black_box(c.poll_request(Instant::ZERO));
    while let Some(e) = c.poll_event() {
        if let ClientEvent::Changed { type_url, changes } = &e {
            for view in c.changes(type_url, changes) {
                black_box((view.name.len(), view.resource.map(|r| r.body().len())));
            }
        }
        black_box(e);
    }
}

/// Counts live heap bytes; a bench installs it with
/// `#[global_allocator] static ALLOCATOR: support::Counting = support::Counting;`.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The live heap bytes, when [`Counting`] is the global allocator.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}
