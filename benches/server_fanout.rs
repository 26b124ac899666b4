//! (a) One resource changes; 10 streams subscribe to it. Cost with 10 000 streams against
//! 100 streams: the index makes it follow the affected streams, not the total.
//!
//! Two stores: `same_store` holds 30 000 EDS resources in both cases, so only the number of
//! streams differs (the figure of the issue); `growing_store` gives each stream 3 resources
//! of its own (300 vs 30 000), which adds the store's O(log n) lookups on top.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use xds_sansio::pb::discovery::DiscoveryRequest;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceStore, ServerConfig, StreamSet};
use xds_sansio::types::ENDPOINT;
use xds_sansio::{Instant, Request, Transport, Variant};

const EDS: &str = ENDPOINT.type_url;
const SUBSCRIBERS: usize = 10;

fn body(name: &str, data: u8) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, 64]);
    out.extend(std::iter::repeat_n(data, 64));
    Bytes::from(out)
}

/// `streams` streams over a store of `resources` EDS resources (plus `target`); stream i
/// subscribes to resources 3i, 3i+1, 3i+2 (modulo the store), streams 0..10 to `target` too.
fn setup(streams: usize, resources: usize) -> (ResourceStore, StreamSet) {
    let mut store = ResourceStore::new();
    store.set(EDS, "target", body("target", 0)).unwrap();
    for r in 0..resources {
        let name = format!("r{r}");
        store.set(EDS, &name, body(&name, 1)).unwrap();
    }
    let mut set = StreamSet::new();
    for i in 0..streams {
        let mut names: Vec<String> = (0..3)
            .map(|k| format!("r{}", (i * 3 + k) % resources))
            .collect();
        if i < SUBSCRIBERS {
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

fn fanout(c: &mut Criterion) {
    let mut group = c.benchmark_group("server_fanout");
    let cases = [
        ("same_store", 100usize, 30_000usize),
        ("same_store", 10_000, 30_000),
        ("growing_store", 100, 300),
        ("growing_store", 10_000, 30_000),
    ];
    for (store_kind, streams, resources) in cases {
        let (mut store, mut set) = setup(streams, resources);
        let bodies = [body("target", 2), body("target", 3)];
        let mut flip = 0usize;
        group.bench_with_input(
            BenchmarkId::new(format!("one_change_10_subscribers_{store_kind}"), streams),
            &streams,
            |b, _| {
                b.iter(|| {
                    flip ^= 1;
                    store.set(EDS, "target", bodies[flip].clone()).unwrap();
                    set.sync(&store);
                    let mut sent = 0;
                    while let Some(id) = set.poll_ready() {
                        while let Some(r) = set.poll_response(id, Instant::ZERO, &store) {
                            black_box(&r);
                            sent += 1;
                        }
                    }
                    assert_eq!(sent, SUBSCRIBERS);
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, fanout);
criterion_main!(benches);
