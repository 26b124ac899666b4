//! The server rules an independent conformance run found broken, one test each: stale
//! requests are not answered, a new delta wildcard is always answered, a type never
//! published gets no answer, no identical SotW resend, `xdstp://` glob collections.

mod server_common;

use bytes::Bytes;
use server_common::*;
use xds_sansio::server::{
    ResourceEntry, ResourceStore, ServerConfig, ServerEvent, ServerStream, StoreError, StoreOp,
    StreamSet,
};
use xds_sansio::{Response, Transport, Variant};

fn sotw_ads() -> ServerStream {
    ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated))
}

fn delta_ads() -> ServerStream {
    ServerStream::new(ServerConfig::new(Variant::Delta, Transport::Aggregated))
}

fn has_stale(s: &mut ServerStream) -> bool {
    events(s)
        .iter()
        .any(|e| matches!(e, ServerEvent::StaleRequest { .. }))
}

// ------------------------------------------------------------------ stale requests

/// "The management server should not send a DiscoveryResponse for any DiscoveryRequest
/// that has a stale nonce": the stale request's new name waits for the client's ACK, and
/// that ACK is not made stale by a response to the stale request.
#[test]
fn a_stale_request_is_not_answered_and_the_ack_serves_its_names() {
    let mut store = ResourceStore::new();
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    store.set(EDS, "bar", body("bar", "1")).unwrap();
    let mut s = sotw_ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    let x = one_sotw(drain(&mut s, T0, &store));
    store.set(EDS, "foo", body("foo", "2")).unwrap();
    let y = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(
        T0,
        req(sotw(EDS, &x.version_info, &["foo", "bar"], &x.nonce)),
    );
    assert!(has_stale(&mut s));
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "no answer to a stale request"
    );
    assert_eq!(
        s.poll_timeout(),
        None,
        "nothing to do until the client answers Y"
    );
    s.handle_request(
        T0,
        req(sotw(EDS, &y.version_info, &["foo", "bar"], &y.nonce)),
    );
    let acked = events(&mut s)
        .iter()
        .any(|e| matches!(e, ServerEvent::Acked { nonce, .. } if *nonce == y.nonce));
    assert!(acked, "the ACK of Y is an ACK, not stale");
    let z = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&z), ["bar"]);
}

/// A store change while a stale request waits is still pushed (the store, not the stale
/// request, asks for it), and it serves the waiting names too.
#[test]
fn a_store_change_is_pushed_while_a_stale_request_waits() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    store.set(CDS, "b", body("b", "1")).unwrap();
    let mut s = sotw_ads();
    s.handle_request(T0, req(sotw(CDS, "", &["a"], "")));
    let x = one_sotw(drain(&mut s, T0, &store));
    store.set(CDS, "a", body("a", "2")).unwrap();
    let _y = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(T0, req(sotw(CDS, &x.version_info, &["a", "b"], &x.nonce)));
    assert!(drain(&mut s, T0, &store).is_empty());
    store.set(CDS, "a", body("a", "3")).unwrap();
    let z = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&z), ["a", "b"]);
}

// ------------------------------------------------------------------ delta wildcard

/// The first delta wildcard request is answered even when nothing matches, and on a
/// reconnect whose `initial_resource_versions` already match.
#[test]
fn a_new_delta_wildcard_is_always_answered() {
    let mut store = ResourceStore::new();
    store.serve_type(CDS).unwrap();
    let mut s = delta_ads();
    s.handle_request(T0, dreq(delta(CDS, &[], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert!(r.resources.is_empty() && r.removed_resources.is_empty());
    assert!(drain(&mut s, T0, &store).is_empty(), "answered once");

    store
        .set_entry(
            CDS,
            ResourceEntry::new("a", body("a", "1")).with_version("1"),
        )
        .unwrap();
    let mut s = delta_ads();
    let mut first = delta(CDS, &["*"], &[], "");
    first
        .initial_resource_versions
        .insert("a".into(), "1".into());
    s.handle_request(T0, dreq(first));
    let r = one_delta(drain(&mut s, T0, &store));
    assert!(
        r.resources.is_empty() && r.removed_resources.is_empty(),
        "nothing to send, but answered: {r:?}"
    );
}

// ------------------------------------------------------------------ publication

/// Until a type is published, every request for it is held without an answer; its
/// publication (even with zero resources) answers them.
#[test]
fn a_type_never_published_gets_no_answer() {
    for variant in [Variant::Sotw, Variant::Delta] {
        let mut store = ResourceStore::new();
        let mut s = ServerStream::new(ServerConfig::new(variant, Transport::Aggregated));
        match variant {
            Variant::Sotw => {
                s.handle_request(T0, req(sotw(CDS, "v1", &[], "")));
                s.handle_request(T0, req(sotw(EDS, "", &["e"], "")));
            }
            Variant::Delta => {
                s.handle_request(T0, dreq(delta(CDS, &[], &[], "")));
                s.handle_request(T0, dreq(delta(EDS, &["e"], &[], "")));
            }
        }
        assert!(drain(&mut s, T0, &store).is_empty(), "{variant:?}");
        assert_eq!(s.poll_timeout(), None, "{variant:?}: no busy loop");
        assert!(!store.is_served(CDS));
        store.serve_type(CDS).unwrap();
        assert!(store.is_served(CDS));
        let out = drain(&mut s, T0, &store);
        assert_eq!(
            out.len(),
            1,
            "{variant:?}: the empty CDS state, EDS still held"
        );
        assert_eq!(out[0].type_url(), CDS);
        store.set(EDS, "e", body("e", "1")).unwrap();
        let out = drain(&mut s, T0, &store);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].type_url(), EDS);
    }
}

/// The publication wakes the streams of a `StreamSet` that wait for the type.
#[test]
fn publication_wakes_waiting_streams_in_a_set() {
    let mut store = ResourceStore::new();
    let mut set = StreamSet::new();
    let named = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    let wildcard = set.insert(ServerConfig::new(Variant::Delta, Transport::Aggregated));
    set.handle_request(named, T0, req(sotw(CDS, "", &["a"], "")))
        .unwrap();
    set.handle_request(wildcard, T0, dreq(delta(CDS, &["*"], &[], "")))
        .unwrap();
    while let Some(id) = set.poll_ready() {
        assert!(set.poll_response(id, T0, &store).is_none());
    }
    assert_eq!(set.poll_timeout(), None);
    store.serve_type(CDS).unwrap();
    assert_eq!(set.sync(&store), 2);
    let mut answered = Vec::new();
    while let Some(id) = set.poll_ready() {
        while set.poll_response(id, T0, &store).is_some() {
            answered.push(id);
        }
    }
    assert_eq!(answered, [named, wildcard]);
}

/// Several operations are one revision; an invalid one leaves the store untouched.
#[test]
fn a_batch_is_one_revision_and_atomic() {
    let mut store = ResourceStore::new();
    store.set(EDS, "old", body("old", "1")).unwrap();
    let before = store.revision();
    let r = store
        .apply(vec![
            StoreOp::Set {
                type_url: CDS.into(),
                entry: ResourceEntry::new("c", body("c", "1")),
            },
            StoreOp::Remove {
                type_url: EDS.into(),
                name: "old".into(),
            },
            StoreOp::ServeType {
                type_url: LDS.into(),
            },
        ])
        .unwrap();
    assert_eq!(r.0, before.0 + 1);
    let revisions: Vec<u64> = store
        .changes_since(before)
        .unwrap()
        .map(|c| c.revision.0)
        .collect();
    assert_eq!(
        revisions, [r.0; 4],
        "CDS published, c set, old removed, LDS published"
    );
    assert!(store.is_served(LDS) && store.get(EDS, "old").is_none());

    let bad = store.apply(vec![
        StoreOp::Set {
            type_url: CDS.into(),
            entry: ResourceEntry::new("d", body("d", "1")).with_aliases(vec!["x".into()]),
        },
        StoreOp::Set {
            type_url: CDS.into(),
            entry: ResourceEntry::new("e", body("e", "1")).with_aliases(vec!["x".into()]),
        },
    ]);
    assert!(matches!(bad, Err(StoreError::AliasTaken { .. })));
    assert!(
        store.get(CDS, "d").is_none(),
        "nothing of a failed batch applied"
    );
    assert_eq!(store.revision(), r);
    // An alias freed earlier in the same batch may be taken later in it.
    store
        .apply(vec![
            StoreOp::Set {
                type_url: CDS.into(),
                entry: ResourceEntry::new("d", body("d", "1")).with_aliases(vec!["x".into()]),
            },
            StoreOp::Remove {
                type_url: CDS.into(),
                name: "d".into(),
            },
            StoreOp::Set {
                type_url: CDS.into(),
                entry: ResourceEntry::new("e", body("e", "1")).with_aliases(vec!["x".into()]),
            },
        ])
        .unwrap();
    assert_eq!(store.resolve(CDS, "x").map(|r| r.name()), Some("e"));
}

/// A log that dropped part of a revision says so.
#[test]
fn a_log_never_answers_with_part_of_a_revision() {
    let mut store = ResourceStore::with_log_capacity(3);
    let ops = (0..5)
        .map(|i| StoreOp::Set {
            type_url: CDS.into(),
            entry: ResourceEntry::new(format!("c{i}"), Bytes::from(vec![i as u8])),
        })
        .collect();
    store.apply(ops).unwrap();
    assert!(store
        .changes_since(xds_sansio::server::Revision(0))
        .is_err());
}

// ------------------------------------------------------------------ identical resend

/// A SotW response equal to the last one sent is not sent again: names added next to
/// `*`, or `*` dropped while the names cover everything.
#[test]
fn no_identical_sotw_resend() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    store.set(CDS, "b", body("b", "1")).unwrap();
    let mut s = sotw_ads();
    s.handle_request(T0, req(sotw(CDS, "", &["*"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(T0, req(sotw(CDS, &r.version_info, &["*", "a"], &r.nonce)));
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "a joins *: nothing new"
    );
    s.handle_request(T0, req(sotw(CDS, &r.version_info, &["a", "b"], &r.nonce)));
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "* dropped, a and b cover all"
    );
    // Dropping a name and taking it back before the server answered: the client dropped
    // it, so the same list is news to it.
    s.handle_request(T0, req(sotw(CDS, &r.version_info, &["b"], &r.nonce)));
    s.handle_request(T0, req(sotw(CDS, &r.version_info, &["a", "b"], &r.nonce)));
    let again = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(again.version_info, r.version_info);
    assert_eq!(sotw_names(&again), ["a", "b"]);
}

// ------------------------------------------------------------------ xdstp globs

const GLOB: &str = "xdstp://auth/envoy.config.cluster.v3.Cluster/mesh/*";

fn member(id: &str) -> String {
    format!("xdstp://auth/envoy.config.cluster.v3.Cluster/mesh/{id}")
}

/// A glob subscription receives every member, later ones too; a removed member is
/// removed; an empty glob is answered with its name in `removed_resources`.
#[test]
fn delta_glob_collections() {
    let mut store = ResourceStore::new();
    store.serve_type(CDS).unwrap();
    let mut s = delta_ads();
    s.handle_request(T0, dreq(delta(CDS, &[GLOB], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(r.removed_resources, [GLOB], "an empty glob is answered");
    store.set(CDS, &member("a"), body("a", "1")).unwrap();
    store
        .set(
            CDS,
            "xdstp://auth/envoy.config.cluster.v3.Cluster/other/b",
            body("b", "1"),
        )
        .unwrap();
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r), [member("a")]);
    store.remove(CDS, &member("a"));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(r.removed_resources, [member("a")]);
}

/// An exact name and a glob side by side; names are compared canonically (context
/// parameters in any order).
#[test]
fn sotw_glob_next_to_a_name_and_canonical_names() {
    let mut store = ResourceStore::new();
    store
        .set(CDS, &format!("{}?b=2&a=1", member("x")), body("x", "1"))
        .unwrap();
    store.set(CDS, &member("y"), body("y", "1")).unwrap();
    store.set(CDS, "plain", body("plain", "1")).unwrap();
    assert!(store
        .get(CDS, &format!("{}?a=1&b=2", member("x")))
        .is_some());
    let mut s = sotw_ads();
    let glob_with_params = format!("{}?b=2&a=1", GLOB);
    s.handle_request(T0, req(sotw(CDS, "", &[&glob_with_params, "plain"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(
        sotw_names(&r),
        ["plain", "x"],
        "bodies name themselves x and plain"
    );
    assert_eq!(r.resources.len(), 2);
    // y lacks the glob's context parameters: not a member.
    store.remove(CDS, &format!("{}?a=1&b=2", member("x")));
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(
        sotw_names(&r),
        ["plain"],
        "full state without the removed member"
    );
}

/// A glob subscription in a `StreamSet` is woken by a change to a member.
#[test]
fn set_index_wakes_glob_subscribers() {
    let mut store = ResourceStore::new();
    store.serve_type(CDS).unwrap();
    let mut set = StreamSet::new();
    let id = set.insert(ServerConfig::new(Variant::Delta, Transport::Aggregated));
    set.handle_request(id, T0, dreq(delta(CDS, &[GLOB], &[], "")))
        .unwrap();
    while let Some(id) = set.poll_ready() {
        while set.poll_response(id, T0, &store).is_some() {}
    }
    store.set(CDS, &member("a"), body("a", "1")).unwrap();
    assert_eq!(set.sync(&store), 1);
    let r = set.poll_response(id, T0, &store);
    let Some(Response::Delta(r)) = r else {
        panic!("no push: {r:?}")
    };
    assert_eq!(delta_names(&r), [member("a")]);
}

/// A malformed `xdstp://` name is a typed store error.
#[test]
fn malformed_xdstp_names_are_refused_by_the_store() {
    let mut store = ResourceStore::new();
    let e = store.set(CDS, "xdstp://auth", body("x", "1"));
    assert!(
        matches!(e, Err(StoreError::MalformedXdstpName { .. })),
        "{e:?}"
    );
}
