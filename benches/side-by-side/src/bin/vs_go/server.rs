//! Server: a wildcard CDS request to the wire bytes of the 10 000-cluster response, on a
//! new ADS stream. "fresh": the store loaded (untimed) just before, the request the first
//! it serves; "update": one cluster changed (untimed) in a store already used, the
//! request the first at that revision; "hot": a further stream at the same revision.
//! "contiguous": the output made one buffer inside the span (`to_bytes`), as the Go side's
//! `proto.Marshal` output is; otherwise the span ends at our chunked `EncodedBytes`.

use crate::bodies::{base, changed, name};
use crate::common::{interleave, timed, Contender, CDS};
use bytes::Bytes;
use prost::Message;
use std::cell::RefCell;
use std::time::Duration;
use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceStore, ServerConfig, ServerStream};
use xds_sansio::{Instant, Request, Transport, Variant};

pub fn store(bodies: &[Bytes]) -> ResourceStore {
    let mut store = ResourceStore::new();
    for (i, b) in bodies.iter().enumerate() {
        store.set(CDS, &name(i), b.clone()).unwrap();
    }
    store
}

fn request() -> Request {
    Request::Sotw(DiscoveryRequest {
        node: Some(Node {
            id: "envoy-0".into(),
            ..Node::default()
        }),
        type_url: CDS.into(),
        ..DiscoveryRequest::default()
    })
}

/// One wildcard request on a new stream, timed to the wire bytes.
fn span(store: &ResourceStore, contiguous: bool) -> (Duration, Bytes) {
    let mut stream = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    let request = request();
    let (d, (chunks, whole)) = timed(|| {
        stream.handle_request(Instant::ZERO, request);
        let bytes = stream
            .poll_response_encoded(Instant::ZERO, store)
            .expect("a response")
            .bytes;
        let whole = contiguous.then(|| bytes.to_bytes());
        (bytes, whole)
    });
    drop(stream);
    (d, whole.unwrap_or_else(|| chunks.to_bytes()))
}

/// Decodes `wire` and checks it carries exactly `bodies` (any order).
fn check(label: &str, wire: &[u8], bodies: &[Bytes]) {
    let resp = DiscoveryResponse::decode(wire).expect(label);
    let mut got: Vec<&[u8]> = resp.resources.iter().map(|a| &a.value[..]).collect();
    got.sort_unstable();
    let mut want: Vec<&[u8]> = bodies.iter().map(|b| &b[..]).collect();
    want.sort_unstable();
    assert!(got == want, "{label}: not the same bodies");
    assert!(resp.resources.iter().all(|a| a.type_url == CDS), "{label}");
}

pub fn run(iterations: usize) {
    let bodies = base();
    let hot = store(&bodies);
    let update = RefCell::new((store(&bodies), 0usize));
    check("fresh", &span(&store(&bodies), false).1, &bodies);
    check("hot", &span(&hot, true).1, &bodies);
    let updated = |contiguous: bool| {
        let mut u = update.borrow_mut();
        u.1 += 1;
        let k = u.1;
        u.0.set(CDS, &name(0), changed(k)).unwrap();
        span(&u.0, contiguous).0
    };
    let fresh = |contiguous: bool| {
        let s = store(&bodies);
        let d = span(&s, contiguous).0;
        drop(s);
        d
    };
    let mut contenders: Vec<Contender<'_>> = vec![
        ("ours, fresh", Box::new(|| fresh(false))),
        ("ours, fresh, contiguous", Box::new(|| fresh(true))),
        ("ours, update", Box::new(|| updated(false))),
        ("ours, update, contiguous", Box::new(|| updated(true))),
        ("ours, hot", Box::new(|| span(&hot, false).0)),
        ("ours, hot, contiguous", Box::new(|| span(&hot, true).0)),
    ];
    crate::out::results("server", &interleave(iterations, &mut contenders));
}
