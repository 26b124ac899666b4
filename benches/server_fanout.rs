//! (a) One resource changes; 10 streams subscribe to it. Cost with 10 000 streams against
//! 100 streams: the index makes it follow the affected streams, not the total.
//!
//! Two stores: `same_store` holds 30 000 EDS resources in both cases, so only the number of
//! streams differs (the figure of the issue); `growing_store` gives each stream 3 resources
//! of its own (300 vs 30 000), which adds the store's O(log n) lookups on top.

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use support::{eds_body, fanout_setup, EDS};
use xds_sansio::server::{ResourceStore, StreamSet};
use xds_sansio::Instant;

const SUBSCRIBERS: usize = 10;

fn setup(streams: usize, resources: usize) -> (ResourceStore, StreamSet) {
    fanout_setup(streams, resources, SUBSCRIBERS)
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
        let bodies = [eds_body("target", 2), eds_body("target", 3)];
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
