//! `poll_response_encoded` is `poll_response` encoded: two twin streams get the same
//! requests, store changes and time; one is drained as messages, the other as encoded
//! responses, and every encoded response must be byte for byte `encode_to_vec()` of its
//! twin's message (same nonce, same order, same state afterwards).

mod server_common;

use std::time::Duration;

use prost::Message;
use server_common::*;
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryResponse};
use xds_sansio::server::{
    EncodedResponse, NotFoundReporting, ResourceEntry, ResourceStore, ServerConfig, ServerStream,
    StreamSet,
};
use xds_sansio::{Instant, Request, Response, Transport, Variant};

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const TYPES: [&str; 4] = [CDS, EDS, LDS, RDS];

/// Drains both twins; checks each pair; returns the message responses.
fn drain_twins(
    msg: &mut ServerStream,
    enc: &mut ServerStream,
    now: Instant,
    store: &ResourceStore,
) -> Vec<Response> {
    let mut out = Vec::new();
    loop {
        let a = msg.poll_response(now, store);
        let b = enc.poll_response_encoded(now, store);
        match (a, b) {
            (None, None) => return out,
            (Some(a), Some(b)) => {
                assert_same(&a, &b);
                out.push(a);
            }
            (a, b) => panic!("twins diverged: message {a:?}, encoded {b:?}"),
        }
    }
}

fn assert_same(message: &Response, encoded: &EncodedResponse) {
    let (bytes, nonce, version, type_url) = match message {
        Response::Sotw(r) => (r.encode_to_vec(), &r.nonce, &r.version_info, &r.type_url),
        Response::Delta(r) => (
            r.encode_to_vec(),
            &r.nonce,
            &r.system_version_info,
            &r.type_url,
        ),
    };
    assert_eq!(encoded.bytes.to_vec(), bytes, "byte for byte");
    assert_eq!(&encoded.nonce, nonce);
    assert_eq!(&encoded.version, version);
    assert_eq!(&encoded.type_url, type_url);
    assert_eq!(encoded.variant, message.variant());
    assert_eq!(&encoded.decode().unwrap(), message);
}

/// One SotW or delta ADS conversation driven by `ops`; panics on a difference.
fn conversation(variant: Variant, ops: &[(u8, u8, u8)]) -> bool {
    let mut store = ResourceStore::new();
    let config = {
        let mut c = ServerConfig::new(variant, Transport::Aggregated);
        // Half the conversations report absent names in resource_errors (field 7).
        c.sotw_not_found_errors = ops.len() % 2 == 0;
        c
    };
    let (mut msg, mut enc) = (ServerStream::new(config.clone()), ServerStream::new(config));
    let mut now = T0;
    let mut last: Vec<Response> = Vec::new();
    let mut subs: Vec<Vec<&str>> = vec![Vec::new(); TYPES.len()];
    for &(op, x, y) in ops {
        let name = NAMES[x as usize % NAMES.len()];
        let ti = y as usize % TYPES.len();
        let t = TYPES[ti];
        let request = match op % 8 {
            0 | 1 => {
                let mut entry = ResourceEntry::new(name, body(name, &(y % 3).to_string()));
                if op % 8 == 1 {
                    entry = entry.with_ttl(Duration::from_secs(u64::from(x % 3) + 1));
                }
                store.set_entry(t, entry).unwrap();
                None
            }
            2 => {
                store.remove(t, name);
                None
            }
            // Subscribe (a name, or wildcard when x is odd for LDS/CDS).
            3 | 4 => {
                let wanted = if x % 2 == 1 && ti != 1 && ti != 3 {
                    "*"
                } else {
                    name
                };
                if !subs[ti].contains(&wanted) {
                    subs[ti].push(wanted);
                }
                Some(subscribe(variant, t, &subs[ti], &last, false))
            }
            // ACK or NACK the latest response of the type.
            5 => Some(subscribe(variant, t, &subs[ti], &last, x % 2 == 1)),
            6 => {
                subs[ti].retain(|n| *n != name);
                Some(subscribe(variant, t, &subs[ti], &last, false))
            }
            _ => {
                now = now.saturating_add(Duration::from_millis(u64::from(x) * 50));
                msg.handle_timeout(now);
                enc.handle_timeout(now);
                None
            }
        };
        if let Some(request) = request {
            msg.handle_request(now, request.clone());
            enc.handle_request(now, request);
            assert_eq!(events(&mut msg), events(&mut enc));
        }
        let out = drain_twins(&mut msg, &mut enc, now, &store);
        if !out.is_empty() {
            last = out;
        }
        assert_eq!(msg.poll_timeout(), enc.poll_timeout());
    }
    true
}

/// A request for `t` with `names`, answering the latest response of that type in `last`.
fn subscribe(variant: Variant, t: &str, names: &[&str], last: &[Response], nack: bool) -> Request {
    let latest = last.iter().rev().find(|r| r.type_url() == t);
    match variant {
        Variant::Sotw => {
            let (version, nonce) = match latest {
                Some(Response::Sotw(r)) => (r.version_info.clone(), r.nonce.clone()),
                _ => (String::new(), String::new()),
            };
            let mut r = if nack {
                sotw_nack(t, "", names, &nonce)
            } else {
                sotw(t, &version, names, &nonce)
            };
            r.resource_names.sort();
            Request::Sotw(r)
        }
        Variant::Delta => {
            let nonce = match latest {
                Some(Response::Delta(r)) => r.nonce.clone(),
                _ => String::new(),
            };
            let mut r = delta(t, names, &[], &nonce);
            if nack {
                r.error_detail = Some(nack_status());
            }
            Request::Delta(r)
        }
    }
}

#[test]
fn sotw_encoded_equals_the_message_encoded() {
    quickcheck::QuickCheck::new()
        .quickcheck((|ops| conversation(Variant::Sotw, &ops)) as fn(Vec<(u8, u8, u8)>) -> bool);
}

#[test]
fn delta_encoded_equals_the_message_encoded() {
    quickcheck::QuickCheck::new()
        .quickcheck((|ops| conversation(Variant::Delta, &ops)) as fn(Vec<(u8, u8, u8)>) -> bool);
}

/// The 10 000-cluster wildcard response of the bench: encoded equals prost's encode.
#[test]
fn wildcard_cds_of_ten_thousand_clusters() {
    let mut store = ResourceStore::new();
    for i in 0..10_000 {
        let name = format!("cluster-{i:05}");
        store.set(CDS, &name, body(&name, "0123456789")).unwrap();
    }
    let config = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
    let (mut msg, mut enc) = (ServerStream::new(config.clone()), ServerStream::new(config));
    let first = Request::Sotw(sotw(CDS, "", &[], ""));
    msg.handle_request(T0, first.clone());
    enc.handle_request(T0, first);
    let out = drain_twins(&mut msg, &mut enc, T0, &store);
    let Some(Response::Sotw(r)) = out.first() else {
        panic!("no response");
    };
    assert_eq!(r.resources.len(), 10_000);
    // The store holds each body once: a slice of its frame.
    let stored = store.get(CDS, "cluster-00042").unwrap().body();
    assert_eq!(r.resources[42].value.as_ptr(), stored.as_ptr());
}

/// The stream set's encoded poll follows the same rules.
#[test]
fn stream_set_encoded_equals_the_message_encoded() {
    let mut store = ResourceStore::new();
    for n in NAMES {
        store.set(EDS, n, body(n, "1")).unwrap();
    }
    let config = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
    let (mut msg, mut enc) = (StreamSet::new(), StreamSet::new());
    let (a, b) = (msg.insert(config.clone()), enc.insert(config));
    let request = Request::Sotw(sotw(EDS, "", &["a", "c"], ""));
    msg.handle_request(a, T0, request.clone()).unwrap();
    enc.handle_request(b, T0, request).unwrap();
    for round in 0..3 {
        let mut sent = 0;
        while let Some(m) = msg.poll_response(a, T0, &store) {
            let e = enc.poll_response_encoded(b, T0, &store).unwrap();
            assert_same(&m, &e);
            sent += 1;
        }
        assert!(enc.poll_response_encoded(b, T0, &store).is_none());
        assert_eq!(sent, usize::from(round < 2), "round {round}");
        store.set(EDS, "c", body("c", "2")).unwrap();
        if round == 1 {
            store.set(EDS, "b", body("b", "unsubscribed")).unwrap();
        }
    }
}

/// The encoded wildcard CDS response of a new stream on `store`.
fn wildcard_cds(store: &ResourceStore) -> EncodedResponse {
    let mut stream = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    stream.handle_request(T0, Request::Sotw(sotw(CDS, "", &[], "")));
    stream.poll_response_encoded(T0, store).expect("a response")
}

fn middle(encoded: &EncodedResponse) -> bytes::Bytes {
    let chunks: Vec<_> = encoded.bytes.chunks().cloned().collect();
    assert_eq!(chunks.len(), 3, "head, shared frames, tail");
    chunks[1].clone()
}

/// A wildcard full state is encoded once per revision and shared: every stream's response
/// carries the same frames buffer (not a copy), and a change makes a new one.
#[test]
fn a_wildcard_full_state_is_shared_between_streams_until_it_changes() {
    let mut store = ResourceStore::new();
    for i in 0..100 {
        let name = format!("c{i:03}");
        store.set(CDS, &name, body(&name, "v1")).unwrap();
    }
    let (a, b) = (wildcard_cds(&store), wildcard_cds(&store));
    assert_eq!(
        middle(&a).as_ptr(),
        middle(&b).as_ptr(),
        "one buffer, shared"
    );
    assert_eq!(a, b);
    let decoded = DiscoveryResponse::decode(a.bytes.clone()).unwrap();
    assert_eq!(decoded.resources.len(), 100);

    store.set(CDS, "c007", body("c007", "v2")).unwrap();
    let c = wildcard_cds(&store);
    assert_ne!(
        middle(&a).as_ptr(),
        middle(&c).as_ptr(),
        "rebuilt after a change"
    );
    let decoded = DiscoveryResponse::decode(c.bytes.clone()).unwrap();
    assert_eq!(
        decoded.resources[7].value,
        store.get(CDS, "c007").unwrap().body()
    );
    assert_ne!(decoded.version_info, a.version);
}

/// A TTL gives each stream its own timers and heartbeats: not shared, one chunk; named
/// subscriptions are never shared either.
#[test]
fn ttl_types_and_named_subscriptions_are_built_per_stream() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    store
        .set_entry(
            CDS,
            ResourceEntry::new("b", body("b", "1")).with_ttl(Duration::from_secs(5)),
        )
        .unwrap();
    assert_eq!(wildcard_cds(&store).bytes.chunks().count(), 1);
    store.remove(CDS, "b");
    assert_eq!(wildcard_cds(&store).bytes.chunks().count(), 3);
    // A TTL given, then taken away by a set without one: shared again.
    let with_ttl = ResourceEntry::new("b", body("b", "2")).with_ttl(Duration::from_secs(5));
    store.set_entry(CDS, with_ttl).unwrap();
    assert_eq!(wildcard_cds(&store).bytes.chunks().count(), 1);
    store.set(CDS, "b", body("b", "3")).unwrap();
    assert_eq!(wildcard_cds(&store).bytes.chunks().count(), 3);

    let mut named = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    named.handle_request(T0, Request::Sotw(sotw(CDS, "", &["a"], "")));
    let r = named.poll_response_encoded(T0, &store).unwrap();
    assert_eq!(r.bytes.chunks().count(), 1);
}

/// Twin delta streams, one drained as messages and one encoded, on a first request of
/// `request`'s shape for `CDS`; returns the encoded responses.
fn delta_twins(
    store: &ResourceStore,
    config: ServerConfig,
    request: DeltaDiscoveryRequest,
) -> Vec<EncodedResponse> {
    let (mut msg, mut enc) = (ServerStream::new(config.clone()), ServerStream::new(config));
    msg.handle_request(T0, Request::Delta(request.clone()));
    enc.handle_request(T0, Request::Delta(request));
    let mut out = Vec::new();
    while let Some(m) = msg.poll_response(T0, store) {
        let e = enc
            .poll_response_encoded(T0, store)
            .expect("twin's response");
        assert_same(&m, &e);
        out.push(e);
    }
    assert!(enc.poll_response_encoded(T0, store).is_none());
    assert_eq!(msg.poll_timeout(), enc.poll_timeout());
    out
}

fn delta_config() -> ServerConfig {
    ServerConfig::new(Variant::Delta, Transport::Aggregated)
}

/// A delta wildcard stream that holds nothing is sent every resource: that full state is
/// encoded once per revision and shared like SotW's, equal to the message form byte for
/// byte (aliases included), and rebuilt after a change.
#[test]
fn a_delta_wildcard_full_state_is_shared_between_streams_until_it_changes() {
    let mut store = ResourceStore::new();
    for i in 0..50 {
        let name = format!("c{i:03}");
        store.set(CDS, &name, body(&name, "v1")).unwrap();
    }
    store
        .set_entry(
            CDS,
            ResourceEntry::new("c049", body("c049", "v1")).with_aliases(vec!["alias-49".into()]),
        )
        .unwrap();
    let wildcard = || delta(CDS, &["*"], &[], "");
    let a = delta_twins(&store, delta_config(), wildcard());
    let b = delta_twins(&store, delta_config(), wildcard());
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_eq!(
        middle(&a[0]).as_ptr(),
        middle(&b[0]).as_ptr(),
        "one buffer, shared"
    );
    let Response::Delta(decoded) = a[0].decode().unwrap() else {
        panic!("a delta response");
    };
    assert_eq!(decoded.resources.len(), 50);
    assert_eq!(decoded.resources[49].aliases, ["alias-49"]);

    store.set(CDS, "c007", body("c007", "v2")).unwrap();
    let c = delta_twins(&store, delta_config(), wildcard());
    assert_ne!(
        middle(&a[0]).as_ptr(),
        middle(&c[0]).as_ptr(),
        "rebuilt after a change"
    );
    assert_ne!(c[0].version, a[0].version);
}

/// What a delta full state may not share: a type with a TTL (heartbeats are per stream),
/// a client that states what it holds, a stream that does not step in with the store, and
/// a response that also reports a subscribed name as absent (its entry sits among the
/// resources). Each is built for the stream, one chunk, and still equals the message form.
#[test]
fn delta_full_states_not_shared() {
    let mut store = ResourceStore::new();
    for n in NAMES {
        store.set(CDS, n, body(n, "1")).unwrap();
    }
    let one_chunk = |out: &[EncodedResponse]| out.iter().all(|e| e.bytes.chunks().count() == 1);
    // Shared, as a check that the cases below differ by one thing each.
    assert!(!one_chunk(&delta_twins(
        &store,
        delta_config(),
        delta(CDS, &["*"], &[], "")
    )));

    let mut resuming = delta(CDS, &["*"], &[], "");
    resuming
        .initial_resource_versions
        .insert("a".into(), "stale".into());
    assert!(one_chunk(&delta_twins(&store, delta_config(), resuming)));

    let mut apart = delta_config();
    apart.delta_in_step = false;
    assert!(one_chunk(&delta_twins(
        &store,
        apart,
        delta(CDS, &["*"], &[], "")
    )));

    let mut bodyless = delta_config();
    bodyless.not_found = NotFoundReporting::BodylessResource;
    let out = delta_twins(&store, bodyless, delta(CDS, &["*", "absent"], &[], ""));
    assert!(one_chunk(&out));

    let ttl = ResourceEntry::new("e", body("e", "1")).with_ttl(Duration::from_secs(5));
    store.set_entry(CDS, ttl).unwrap();
    assert!(one_chunk(&delta_twins(
        &store,
        delta_config(),
        delta(CDS, &["*"], &[], "")
    )));
}

/// `EncodedBytes` reads as one sequence of bytes across its chunks.
#[test]
fn encoded_bytes_is_a_buf_across_its_chunks() {
    use bytes::Buf;
    let mut store = ResourceStore::new();
    for i in 0..10 {
        let name = format!("c{i}");
        store.set(CDS, &name, body(&name, "x")).unwrap();
    }
    let encoded = wildcard_cds(&store).bytes;
    let flat = encoded.to_vec();
    assert_eq!(encoded.len(), flat.len());
    assert_eq!(encoded, flat);
    assert_eq!(encoded.to_bytes(), flat.as_slice());

    let mut slices = [std::io::IoSlice::new(&[]); 4];
    assert_eq!(encoded.chunks_vectored(&mut slices), 3);

    // Read it back in uneven steps that cross every boundary.
    for step in [1, 7, 64, 1000] {
        let mut buf = encoded.clone();
        let mut read = Vec::new();
        while buf.has_remaining() {
            let n = step.min(buf.remaining());
            read.extend_from_slice(&buf.copy_to_bytes(n));
        }
        assert_eq!(read, flat, "step {step}");
    }
    let mut buf = encoded.clone();
    let head = buf.chunk().len();
    buf.advance(head + 3);
    assert_eq!(buf.remaining(), flat.len() - head - 3);
    assert_eq!(buf.chunk()[0], flat[head + 3]);
}

/// The store stays shareable between threads with its shared full state inside, and
/// streams reading it at once from several threads all get the one buffer, built once.
#[test]
fn threads_reading_one_store_share_one_full_state() {
    fn shareable<T: Send + Sync>() {}
    shareable::<ResourceStore>();
    shareable::<EncodedResponse>();

    let mut store = ResourceStore::new();
    for i in 0..1000 {
        let name = format!("c{i:04}");
        store.set(CDS, &name, body(&name, "v1")).unwrap();
    }
    let store = std::sync::Arc::new(std::sync::RwLock::new(store));
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (store, barrier) = (store.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let guard = store.read().unwrap();
                middle(&wildcard_cds(&guard)).as_ptr() as usize
            })
        })
        .collect();
    let pointers: std::collections::BTreeSet<usize> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(pointers.len(), 1, "one buffer for every thread");
}
