//! (b) Building a 10 000-cluster SotW CDS response (wildcard, full state) against the prost
//! encode of the same message: building must cost no more than encoding (bodies are shared
//! `Bytes`, never copied; the version digest is kept by the store).

mod support;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use prost::Message;
use std::hint::black_box;
use support::{cds_wildcard_stream, cluster_body, CDS};
use xds_sansio::server::{ResourceStore, ServerStream};
use xds_sansio::{Instant, Response};

const CLUSTERS: usize = 10_000;

fn stream() -> ServerStream {
    let mut s = cds_wildcard_stream();
    while s.poll_event().is_some() {}
    s
}

fn build(c: &mut Criterion) {
    // 150 bytes: a minimal EDS cluster; 512 bytes: a cluster with a TLS transport socket,
    // circuit breakers and outlier detection (production clusters are often larger).
    for filler in [150usize, 512] {
        let mut store = ResourceStore::new();
        for i in 0..CLUSTERS {
            let name = format!("cluster-{i:05}");
            store.set(CDS, &name, cluster_body(&name, filler)).unwrap();
        }
        let Some(Response::Sotw(response)) = stream().poll_response(Instant::ZERO, &store) else {
            panic!("no response");
        };
        assert_eq!(response.resources.len(), CLUSTERS);

        let mut group = c.benchmark_group(format!("server_build_10k_cds_{filler}B"));
        // PerIteration: each response is dropped (outside the timing) before the next build,
        // so the allocator reuses memory as it does for the encode's single buffer.
        group.bench_function("build", |b| {
            b.iter_batched(
                stream,
                |mut s| s.poll_response(Instant::ZERO, &store),
                BatchSize::PerIteration,
            )
        });
        // The same response, encoded for the wire straight from the store's frames.
        group.bench_function("build_encoded", |b| {
            b.iter_batched(
                stream,
                |mut s| s.poll_response_encoded(Instant::ZERO, &store),
                BatchSize::PerIteration,
            )
        });
        group.bench_function("prost_encode", |b| {
            b.iter(|| black_box(response.encode_to_vec()))
        });
        group.finish();
    }
}

criterion_group!(benches, build);
criterion_main!(benches);
