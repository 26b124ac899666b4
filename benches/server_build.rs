//! (b) Building a 10 000-cluster SotW CDS response (wildcard, full state) against the prost
//! encode of the same message: building must cost no more than encoding (bodies are shared
//! `Bytes`, never copied; the version digest is kept by the store).

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use prost::Message;
use std::hint::black_box;
use xds_sansio::pb::discovery::DiscoveryRequest;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceStore, ServerConfig, ServerStream};
use xds_sansio::types::CLUSTER;
use xds_sansio::{Instant, Request, Response, Transport, Variant};

const CDS: &str = CLUSTER.type_url;
const CLUSTERS: usize = 10_000;

/// A cluster body: the name (field 1) and `filler` bytes of other fields (field 2).
fn body(name: &str, filler: usize) -> Bytes {
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

fn stream() -> ServerStream {
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
            store.set(CDS, &name, body(&name, filler)).unwrap();
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
