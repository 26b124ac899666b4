//! Issue 4 figure: a one-resource incremental update with 1k and with 1M resources cached,
//! in one run (decode + handle + ACK + events).

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use prost::Message;
use std::hint::black_box;
use xds_sansio::client::{Client, ClientConfig};
use xds_sansio::pb::discovery::{DeltaDiscoveryResponse, Resource};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::types::CLUSTER;
use xds_sansio::{Instant, Response, Transport, Variant};

fn resource(i: usize, generation: u32) -> Resource {
    let name = format!("cluster-{i:07}");
    let mut body = Vec::new();
    prost::encoding::string::encode(1, &name, &mut body);
    prost::encoding::string::encode(2, &format!("{generation}-{}", "x".repeat(64)), &mut body);
    Resource {
        name,
        version: format!("{generation}"),
        resource: Some(Any {
            type_url: CLUSTER.type_url.into(),
            value: body.into(),
        }),
        ..Resource::default()
    }
}

fn response(resources: Vec<Resource>, nonce: &str) -> Bytes {
    Bytes::from(
        DeltaDiscoveryResponse {
            resources,
            type_url: CLUSTER.type_url.into(),
            nonce: nonce.into(),
            ..DeltaDiscoveryResponse::default()
        }
        .encode_to_vec(),
    )
}

fn handle(c: &mut Client, wire: &Bytes) {
    let resp = DeltaDiscoveryResponse::decode(wire.clone()).unwrap_or_default();
    c.handle_response(Instant::ZERO, Response::Delta(resp));
    black_box(c.poll_request(Instant::ZERO));
    while let Some(e) = c.poll_event() {
        black_box(e);
    }
}

/// A client holding `n` clusters (loaded 10k per response).
fn loaded(n: usize) -> Client {
    let mut c = Client::new(ClientConfig::new(
        Variant::Delta,
        Transport::Aggregated,
        Node::default(),
    ));
    c.subscribe(CLUSTER.type_url, &["*"]).unwrap_or_default();
    c.connected(Instant::ZERO);
    while c.poll_request(Instant::ZERO).is_some() {}
    let mut start = 0;
    while start < n {
        let end = (start + 10_000).min(n);
        let wire = response((start..end).map(|i| resource(i, 0)).collect(), "load");
        handle(&mut c, &wire);
        start = end;
    }
    assert_eq!(c.resource_names(CLUSTER.type_url).len(), n);
    c
}

fn bench(cr: &mut Criterion) {
    let updates = [
        response(vec![resource(42, 1)], "a"),
        response(vec![resource(42, 2)], "b"),
    ];
    let mut g = cr.benchmark_group("delta_one_update");
    for n in [1_000usize, 1_000_000] {
        let mut c = loaded(n);
        let mut k = 0usize;
        g.bench_function(format!("cached_{n}"), |b| {
            b.iter(|| {
                k += 1;
                handle(&mut c, &updates[k % 2]);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
