//! Memory of one process at scale, measured with a counting allocator: bytes held per
//! resource by the client's cache (SotW and delta), the server's store and its streams,
//! what a changed body leaves pinned, and what a drained burst keeps. Prints figures;
//! `cargo bench --bench memory` (a few seconds; `XDS_MEMORY_SCALE=100000` for more).

use std::hint::black_box;

use bytes::Bytes;
use prost::Message;
use xds_sansio::client::{Client, ClientConfig};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::server::{ResourceStore, ServerConfig, ServerStream};
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Instant, Request, Response, Transport, Variant};

mod support;

use support::live;

#[global_allocator]
static ALLOCATOR: support::Counting = support::Counting;

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;
/// Bytes of a body, and of a name (`cluster-00000000`-like: 16).
const BODY: usize = 200;

fn name(i: usize) -> String {
    format!("cluster-{i:08}")
}

fn body(i: usize, generation: u8) -> Bytes {
    let mut out = Vec::with_capacity(BODY + 24);
    prost::encoding::string::encode(1, &name(i), &mut out);
    prost::encoding::bytes::encode(2, &vec![generation; BODY - 20], &mut out);
    Bytes::from(out)
}

fn sotw_response(n: usize, generation: u8) -> Bytes {
    Bytes::from(
        DiscoveryResponse {
            version_info: format!("v{generation}"),
            resources: (0..n)
                .map(|i| Any {
                    type_url: CDS.into(),
                    value: body(i, generation),
                })
                .collect(),
            type_url: CDS.into(),
            nonce: format!("n{generation}"),
            ..DiscoveryResponse::default()
        }
        .encode_to_vec(),
    )
}

fn drain(c: &mut Client) {
    while c.poll_request(Instant::ZERO).is_some() {}
    while c.poll_event().is_some() {}
}

fn client(variant: Variant) -> Client {
    let mut c = Client::new(ClientConfig::new(
        variant,
        Transport::Aggregated,
        Node::default(),
    ));
    match variant {
        Variant::Sotw => c.subscribe(CDS, &[]).unwrap_or_default(),
        Variant::Delta => c.subscribe(CDS, &["*"]).unwrap_or_default(),
    }
    c.connected(Instant::ZERO);
    drain(&mut c);
    c
}

/// What the wire of one resource costs the cache at least: its name, version and body.
fn payload(n: usize, version_len: usize) -> isize {
    (n * (BODY + name(0).len() + version_len)) as isize
}

/// Hands `c` the encoded SotW response `make` builds (then drops the buffer): the live
/// bytes it left held, the response's buffer counted from its allocation.
fn held_after(c: &mut Client, make: impl FnOnce() -> Bytes) -> isize {
    let before = live();
    let wire = make();
    c.handle_response(
        Instant::ZERO,
        Response::Sotw(DiscoveryResponse::decode(wire.clone()).unwrap_or_default()),
    );
    drain(c);
    drop(wire);
    live() - before
}

fn sotw_client(n: usize) {
    let mut c = client(Variant::Sotw);
    let held = held_after(&mut c, || sotw_response(n, 1));
    let over = (held - payload(n, 0)) / n as isize;
    println!(
        "client SotW, {n} resources: {held} B held, {} B per resource, {over} B beyond name and body",
        held / n as isize
    );
    // Every body changes: what of the first buffer stays pinned?
    let more = held_after(&mut c, || sotw_response(n, 2));
    println!(
        "client SotW, {n} resources, every body changed: {more} B more held (about 0 would mean the first buffer was released)"
    );
    // A tenth of the bodies change: what does the response leave alive beyond them?
    let more = held_after(&mut c, || sotw_response_changing(n, 2, 3, 10));
    let changed = (n.div_ceil(10) * BODY) as isize;
    println!(
        "client SotW, {n} resources, a tenth of the bodies changed: {more} B more held for {changed} B of changed bodies ({:.2}x)",
        more as f64 / changed as f64
    );
    black_box(c);
}

/// A SotW response of `n` resources at `generation`, in which every `every`-th body is at
/// `changed` instead.
fn sotw_response_changing(n: usize, generation: u8, changed: u8, every: usize) -> Bytes {
    Bytes::from(
        DiscoveryResponse {
            version_info: format!("v{changed}"),
            resources: (0..n)
                .map(|i| Any {
                    type_url: CDS.into(),
                    value: body(i, if i % every == 0 { changed } else { generation }),
                })
                .collect(),
            type_url: CDS.into(),
            nonce: format!("n{changed}"),
            ..DiscoveryResponse::default()
        }
        .encode_to_vec(),
    )
}

/// A delta client loaded with `n` resources, at one version (`distinct` false: "v1") or at
/// a 16-byte version of its own each (as servers that version a resource by its hash send).
fn delta_client(n: usize, distinct: bool) {
    let mut c = client(Variant::Delta);
    let before = live();
    let resp = DeltaDiscoveryResponse {
        system_version_info: "s1".into(),
        resources: (0..n)
            .map(|i| Resource {
                name: name(i),
                version: if distinct {
                    format!("{i:016x}")
                } else {
                    "v1".into()
                },
                resource: Some(Any {
                    type_url: CDS.into(),
                    value: body(i, 1),
                }),
                ..Resource::default()
            })
            .collect(),
        type_url: CDS.into(),
        nonce: "n1".into(),
        ..DeltaDiscoveryResponse::default()
    };
    let wire = Bytes::from(resp.encode_to_vec());
    c.handle_response(
        Instant::ZERO,
        Response::Delta(DeltaDiscoveryResponse::decode(wire.clone()).unwrap_or_default()),
    );
    drain(&mut c);
    drop(wire);
    drop(resp);
    let held = live() - before;
    if distinct {
        let over = (held - payload(n, 16)) / n as isize;
        println!(
            "client delta, {n} resources each at a version of its own (16 B): {over} B per resource more than name, version and body"
        );
    } else {
        let over = (held - payload(n, 2)) / n as isize;
        println!(
            "client delta, {n} resources: {held} B held, {} B per resource, {over} B beyond name, version and body",
            held / n as isize
        );
    }
    black_box(c);
}

fn store(n: usize) -> ResourceStore {
    let before = live();
    let mut store = ResourceStore::new();
    for i in 0..n {
        store.set(CDS, &name(i), body(i, 1)).unwrap_or_default();
    }
    let held = live() - before;
    // The store keeps the body and the name: that is the payload.
    let over = (held - (n * (BODY + name(0).len())) as isize) / n as isize;
    println!(
        "server store, {n} resources: {held} B held, {over} B per resource beyond name and body"
    );
    store
}

fn streams(store: &ResourceStore, n: usize) {
    let node = Node {
        id: "envoy".into(),
        ..Node::default()
    };
    let sotw_cds = || {
        let mut s = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
        s.handle_request(
            Instant::ZERO,
            Request::Sotw(DiscoveryRequest {
                node: Some(node.clone()),
                type_url: CDS.into(),
                ..DiscoveryRequest::default()
            }),
        );
        while s.poll_response_encoded(Instant::ZERO, store).is_some() {}
        while s.poll_event().is_some() {}
        s
    };
    // The first stream at a revision makes the store keep the shared full state.
    let before = live();
    let first = sotw_cds();
    let with_shared = live() - before;
    let before = live();
    let s = sotw_cds();
    let held = live() - before;
    println!(
        "server stream, SotW wildcard CDS over {n}: {held} B (the first also made the store keep the {} B full state it shares)",
        with_shared - held
    );
    black_box((first, s));
    let mut eds = ResourceStore::new();
    for i in 0..n {
        eds.set(EDS, &name(i), body(i, 1)).unwrap_or_default();
    }
    // The store keeps each body in a buffer of its own; the first response that carries the
    // body as a message (incremental, or SotW not encoded) shares it, which gives it a
    // reference count once. The store's, not the stream's: counted here, apart.
    let before = live();
    let shared: Vec<Bytes> = eds.iter(EDS).map(|r| r.body().clone()).collect();
    drop(shared);
    let sharing = live() - before;
    println!(
        "server store, {n} resources, once a response shared every body: {sharing} B more, {} B per resource",
        sharing / n as isize
    );
    let delta_eds = || {
        let mut s = ServerStream::new(ServerConfig::new(Variant::Delta, Transport::Aggregated));
        s.handle_request(
            Instant::ZERO,
            Request::Delta(DeltaDiscoveryRequest {
                node: Some(node.clone()),
                type_url: EDS.into(),
                resource_names_subscribe: vec!["*".into()],
                ..DeltaDiscoveryRequest::default()
            }),
        );
        while s.poll_response_encoded(Instant::ZERO, &eds).is_some() {}
        while s.poll_event().is_some() {}
        s
    };
    // As for SotW: the first stream makes the store keep the encoded full state that every
    // wildcard stream holding nothing is sent; counted apart.
    let before = live();
    let first = delta_eds();
    let with_shared = live() - before;
    let before = live();
    let s = delta_eds();
    let held = live() - before;
    println!(
        "server store, delta wildcard EDS over {n}: the first stream made the store keep the {} B full state it shares",
        with_shared - held
    );
    println!(
        "server stream, delta wildcard EDS over {n}: {held} B, {} B per resource tracked",
        held / n as isize
    );
    black_box((first, s));
}

fn main() {
    let n: usize = std::env::var("XDS_MEMORY_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    sotw_client(n);
    delta_client(n, false);
    delta_client(n, true);
    let store = store(n);
    streams(&store, n);
}
