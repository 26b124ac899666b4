//! Memory: live heap bytes (a counting global allocator) around each structure, the same
//! workloads as the Go side. A stream here is xds-sansio's per-stream state in a
//! `StreamSet` (the Sans-IO state machine: subscription, sent state, nonce, node, queued
//! events); the tonic adapter's per-stream task is not counted, as the Go side counts no
//! gRPC transport state.

use crate::bodies::{base, name, N};
use crate::common::CDS;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceStore, ServerConfig, ServerStream, StreamSet};
use xds_sansio::{Instant, Request, Transport, Variant};

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

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

const STREAMS: usize = 10_000;

fn node() -> Option<Node> {
    Some(Node {
        id: "envoy-0".into(),
        ..Node::default()
    })
}

/// Drains every ready stream's responses and feeds each its ACK.
fn answer_and_ack(
    set: &mut StreamSet,
    store: &ResourceStore,
    variant: Variant,
    names: &dyn Fn(usize) -> Vec<String>,
) {
    let mut acks = Vec::new();
    while let Some(id) = set.poll_ready() {
        while let Some(r) = set.poll_response_encoded(id, Instant::ZERO, store) {
            acks.push((id, r.nonce, r.version));
        }
        while set.poll_event(id).is_some() {}
    }
    assert_eq!(acks.len(), STREAMS);
    for (k, (id, nonce, version)) in acks.into_iter().enumerate() {
        let request = match variant {
            Variant::Sotw => Request::Sotw(DiscoveryRequest {
                type_url: CDS.into(),
                version_info: version,
                response_nonce: nonce,
                resource_names: names(k),
                ..DiscoveryRequest::default()
            }),
            Variant::Delta => Request::Delta(DeltaDiscoveryRequest {
                type_url: CDS.into(),
                response_nonce: nonce,
                ..DeltaDiscoveryRequest::default()
            }),
        };
        set.handle_request(id, Instant::ZERO, request).unwrap();
        while set.poll_event(id).is_some() {}
    }
}

/// Live bytes per stream of `STREAMS` SotW ADS streams, stream s subscribed to cluster s,
/// answered and ACKed.
fn sotw_streams(store: &ResourceStore) -> f64 {
    let before = live();
    let mut set = StreamSet::new();
    for s in 0..STREAMS {
        let id = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
        let request = Request::Sotw(DiscoveryRequest {
            node: node(),
            type_url: CDS.into(),
            resource_names: vec![name(s)],
            ..DiscoveryRequest::default()
        });
        set.handle_request(id, Instant::ZERO, request).unwrap();
    }
    answer_and_ack(&mut set, store, Variant::Sotw, &|s| vec![name(s)]);
    let held = live() - before;
    black_box(&set);
    held as f64 / STREAMS as f64
}

/// Live bytes per stream of `STREAMS` delta ADS streams, stream s subscribed to `k`
/// clusters (s, s+1, ... modulo 10 000), answered and ACKed.
fn delta_streams(store: &ResourceStore, k: usize) -> f64 {
    let before = live();
    let mut set = StreamSet::new();
    for s in 0..STREAMS {
        let id = set.insert(ServerConfig::new(Variant::Delta, Transport::Aggregated));
        let request = Request::Delta(DeltaDiscoveryRequest {
            node: node(),
            type_url: CDS.into(),
            resource_names_subscribe: (0..k).map(|j| name((s + j) % N)).collect(),
            ..DeltaDiscoveryRequest::default()
        });
        set.handle_request(id, Instant::ZERO, request).unwrap();
    }
    answer_and_ack(&mut set, store, Variant::Delta, &|_| Vec::new());
    let held = live() - before;
    black_box(&set);
    held as f64 / STREAMS as f64
}

pub fn run() {
    let store = crate::server::store(&base());
    let per = sotw_streams(&store);
    crate::out::memory(
        "memory.stream",
        "ours",
        per,
        "SotW ADS stream, one cluster by name",
    );
    let one = delta_streams(&store, 1);
    let many = delta_streams(&store, 21);
    crate::out::memory(
        "memory.tracked",
        "ours",
        (many - one) / 20.0,
        &format!("delta stream: {one:.0} B at 1 resource, {many:.0} B at 21"),
    );
    drop(store);
    // Stored: the bodies count (the store keeps them), made inside the window.
    let before = live();
    let store = crate::server::store(&base());
    let held = live() - before;
    let mut stream = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    stream.handle_request(
        Instant::ZERO,
        Request::Sotw(DiscoveryRequest {
            node: node(),
            type_url: CDS.into(),
            ..DiscoveryRequest::default()
        }),
    );
    drop(stream.poll_response_encoded(Instant::ZERO, &store));
    drop(stream);
    let after = live() - before;
    crate::out::memory(
        "memory.stored",
        "ours",
        held as f64 / N as f64,
        &format!(
            "after a wildcard response (the shared full state kept): {:.0} B",
            after as f64 / N as f64
        ),
    );
    black_box(store);
}
