//! Issue 3 figure: handle + ACK a 10k-resource CDS response, against the plain prost decode
//! of the same bytes, in one run.

mod support;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use prost::Message;
use std::hint::black_box;
use xds_sansio::client::{Client, ClientConfig, EventShape};
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::types::CLUSTER;
use xds_sansio::{Instant, Response, Transport, Variant};

const N: usize = 10_000;

/// A Cluster-like body: name in field 1, then ~200 bytes of other fields.
fn cluster(i: usize, generation: u32) -> Bytes {
    let mut out = Vec::new();
    prost::encoding::string::encode(1, &format!("cluster-{i:05}"), &mut out);
    prost::encoding::string::encode(2, &format!("{generation}-{}", "x".repeat(200)), &mut out);
    Bytes::from(out)
}

fn response(generation: u32) -> Bytes {
    let resp = DiscoveryResponse {
        version_info: format!("v{generation}"),
        resources: (0..N)
            .map(|i| Any {
                type_url: CLUSTER.type_url.into(),
                value: cluster(i, generation),
            })
            .collect(),
        type_url: CLUSTER.type_url.into(),
        nonce: format!("n{generation}"),
        ..DiscoveryResponse::default()
    };
    Bytes::from(resp.encode_to_vec())
}

fn client() -> Client {
    client_with(EventShape::PerResource)
}

fn client_with(shape: EventShape) -> Client {
    let mut config = ClientConfig::new(Variant::Sotw, Transport::Aggregated, Node::default());
    config.event_shape = shape;
    let mut c = Client::new(config);
    c.subscribe(CLUSTER.type_url, &[]).unwrap_or_default();
    c.connected(Instant::ZERO);
    while c.poll_request(Instant::ZERO).is_some() {}
    c
}

fn handle(c: &mut Client, wire: &Bytes) {
    let resp = DiscoveryResponse::decode(wire.clone()).unwrap_or_default();
    c.handle_response(Instant::ZERO, Response::Sotw(resp));
    black_box(c.poll_request(Instant::ZERO));
    while let Some(e) = c.poll_event() {
        black_box(e);
    }
}

fn bench(cr: &mut Criterion) {
    let first = response(1);
    let second = response(2);
    let mut g = cr.benchmark_group("sotw_cds_10k");
    g.sample_size(20);
    g.bench_function("prost_decode", |b| {
        b.iter(|| black_box(DiscoveryResponse::decode(first.clone()).unwrap_or_default()))
    });
    // First load: 10k new resources into an empty cache, 10k Upserted events, one ACK.
    g.bench_function("decode_handle_ack_first_load", |b| {
        b.iter_batched(
            client,
            |mut c| {
                handle(&mut c, &first);
                c
            },
            BatchSize::PerIteration,
        )
    });
    // Steady state: the full state re-sent with every body changed.
    g.bench_function("decode_handle_ack_all_changed", |b| {
        b.iter_batched(
            || {
                let mut c = client();
                handle(&mut c, &first);
                c
            },
            |mut c| {
                handle(&mut c, &second);
                c
            },
            BatchSize::PerIteration,
        )
    });
    // Steady state: the full state re-sent unchanged (no events but the ACK).
    g.bench_function("decode_handle_ack_unchanged", |b| {
        b.iter_batched(
            || {
                let mut c = client();
                handle(&mut c, &first);
                c
            },
            |mut c| {
                handle(&mut c, &first);
                c
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    interleaved_ratio(&first, &second);
    floor_ratio(&first);
}

/// The figure of the issue, robust to a shared machine: decode alone and decode + handle +
/// ACK measured alternately, many times, medians compared.
fn interleaved_ratio(first: &Bytes, second: &Bytes) {
    use std::time::Instant as Clock;
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    type Handle = fn(&mut Client, &Bytes);
    let cases: [(&str, EventShape, Handle); 3] = [
        ("", EventShape::PerResource, handle),
        (", batched", EventShape::Batched, handle),
        (
            ", batched + every change read",
            EventShape::Batched,
            support::ingest_sotw,
        ),
    ];
    for (shape_label, shape, run) in cases {
        for (label, load_first) in [
            ("first_load", false),
            ("all_changed", true),
            ("unchanged", true),
        ] {
            let (mut decode, mut full) = (Vec::new(), Vec::new());
            for _ in 0..41 {
                let start = Clock::now();
                black_box(DiscoveryResponse::decode(first.clone()).unwrap_or_default());
                decode.push(start.elapsed().as_secs_f64());
                let mut c = client_with(shape);
                if load_first {
                    run(&mut c, first);
                }
                let wire = if label == "all_changed" {
                    second
                } else {
                    first
                };
                let start = Clock::now();
                run(&mut c, wire);
                full.push(start.elapsed().as_secs_f64());
                drop(c);
            }
            let (d, f) = (median(decode), median(full));
            println!(
                "interleaved {label}{shape_label}: decode {:.0} us, decode+handle+ack {:.0} us, state machine adds {:.2}x decode",
                d * 1e6,
                f * 1e6,
                (f - d) / d
            );
        }
    }
}

/// The least any client with this event API can do per resource, written without the
/// crate: read the name (a slice of the body), insert a record owning name, version and
/// body into a pre-sized map, and queue an event owning name, version and body (three
/// `Bytes`, as `ClientEvent::Upserted` does), then drop the events as the application
/// would. No duplicate check, no subscription filter, no status, no timers, no ACK. The
/// records are returned, so they are dropped outside the timing, as a client keeps them.
type FloorCache =
    hashbrown::HashMap<xds_sansio::client::SharedStr, (xds_sansio::client::SharedStr, Bytes)>;

fn floor(wire: &Bytes, record: bool, event: bool) -> FloorCache {
    use xds_sansio::client::SharedStr;
    let resp = DiscoveryResponse::decode(wire.clone()).unwrap_or_default();
    let version = SharedStr::from(resp.version_info);
    let mut records = FloorCache::with_capacity(resp.resources.len());
    let mut events = Vec::with_capacity(resp.resources.len());
    for any in resp.resources {
        let name = xds_sansio::resource::name_field_1(&any.value).unwrap_or_default();
        let name = SharedStr::from_utf8(name).unwrap_or_default();
        if record {
            records.insert(name.clone(), (version.clone(), any.value.clone()));
        }
        if event {
            events.push((name, version.clone(), any.value));
        }
    }
    for e in events {
        black_box(e);
    }
    records
}

/// Decode alone vs decode + [`floor`], interleaved like the figure of the issue; then the
/// record and the event alone, to show where the floor goes.
fn floor_ratio(first: &Bytes) {
    use std::time::Instant as Clock;
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    for (label, record, event) in [
        ("record + event", true, true),
        ("record only", true, false),
        ("event only", false, true),
        ("name read only", false, false),
    ] {
        let (mut decode, mut full) = (Vec::new(), Vec::new());
        for _ in 0..41 {
            let start = Clock::now();
            black_box(DiscoveryResponse::decode(first.clone()).unwrap_or_default());
            decode.push(start.elapsed().as_secs_f64());
            let start = Clock::now();
            let records = black_box(floor(first, record, event));
            full.push(start.elapsed().as_secs_f64());
            drop(records);
        }
        let (d, f) = (median(decode), median(full));
        println!(
            "interleaved floor, {label}: decode {:.0} us, decode+floor {:.0} us, adds {:.2}x decode",
            d * 1e6,
            f * 1e6,
            (f - d) / d
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
