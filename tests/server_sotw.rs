//! SotW server conversations: the seed's stories and one test per rule.

mod server_common;

use core::time::Duration;
use prost::Message;
use server_common::*;
use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse, Resource};
use xds_sansio::server::{
    ProtocolError, ResourceEntry, ResourceStore, ServerConfig, ServerEvent, ServerStream, StoreOp,
    StreamSet,
};
use xds_sansio::types::RESOURCE_WRAPPER_TYPE_URL;
use xds_sansio::{Instant, Response, Transport, Variant};

fn ads() -> ServerStream {
    ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated))
}

fn eds_store() -> ResourceStore {
    let mut s = ResourceStore::new();
    s.set(EDS, "foo", body("foo", "1")).unwrap();
    s.set(EDS, "bar", body("bar", "1")).unwrap();
    s
}

fn is_acked(e: &[ServerEvent]) -> bool {
    e.iter().any(|e| matches!(e, ServerEvent::Acked { .. }))
}
fn is_nacked(e: &[ServerEvent]) -> bool {
    e.iter().any(|e| matches!(e, ServerEvent::Nacked { .. }))
}
fn is_stale(e: &[ServerEvent]) -> bool {
    e.iter()
        .any(|e| matches!(e, ServerEvent::StaleRequest { .. }))
}

/// Seed "simple ACK": (V=,R={foo,bar},N=) -> (V=X,{foo,bar},N=A) -> (V=X,R={foo,bar},N=A).
#[test]
fn simple_ack() {
    let store = eds_store();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo", "bar"], "")));
    let ev = events(&mut s);
    assert!(matches!(&ev[0], ServerEvent::NodeIdentified(n) if n.id == "envoy"));
    assert!(
        matches!(&ev[1], ServerEvent::Subscribed { names, .. } if names.iter().map(|n| &**n).eq(["bar", "foo"]))
    );
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["bar", "foo"], "sorted by name");
    assert_eq!(r.nonce, "1");
    assert_eq!(r.type_url, EDS);
    s.handle_request(
        T0,
        req(sotw(EDS, &r.version_info, &["foo", "bar"], &r.nonce)),
    );
    let ev = events(&mut s);
    assert_eq!(
        ev,
        [ServerEvent::Acked {
            type_url: EDS.into(),
            nonce: "1".into(),
            version: r.version_info.clone()
        }]
    );
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "nothing resent after ACK"
    );
}

/// Seed "simple NACK" then "ACK after NACK"; the NACKed version is held, never resent.
#[test]
fn nack_holds_until_the_store_changes_then_ack_after_nack() {
    let mut store = eds_store();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo", "bar"], "")));
    let x = one_sotw(drain(&mut s, T0, &store));
    events(&mut s);
    s.handle_request(T0, req(sotw_nack(EDS, "", &["foo", "bar"], &x.nonce)));
    let ev = events(&mut s);
    assert!(
        matches!(&ev[..], [ServerEvent::Nacked { nonce, version, error, .. }]
            if nonce == "1" && *version == x.version_info && error.code == 13)
    );
    assert!(drain(&mut s, T0, &store).is_empty(), "NACKed version held");
    // The client repeats itself: still nothing.
    s.handle_request(T0, req(sotw_nack(EDS, "", &["foo", "bar"], &x.nonce)));
    assert!(drain(&mut s, T0, &store).is_empty());
    // A fix in the store: version Y.
    store.set(EDS, "foo", body("foo", "2")).unwrap();
    let y = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&y), ["foo"], "EDS carries only what changed");
    assert_ne!(y.version_info, x.version_info);
    s.handle_request(
        T0,
        req(sotw(EDS, &y.version_info, &["foo", "bar"], &y.nonce)),
    );
    assert!(is_acked(&events(&mut s)));
}

/// A NACK is read from error_detail only: the old version with the latest nonce is an ACK.
#[test]
fn nack_is_never_inferred_from_the_version() {
    let store = eds_store();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    let x = one_sotw(drain(&mut s, T0, &store));
    events(&mut s);
    s.handle_request(T0, req(sotw(EDS, "an-old-version", &["foo"], &x.nonce)));
    let ev = events(&mut s);
    assert!(is_acked(&ev) && !is_nacked(&ev));
}

/// Seed "requests become stale": (V=X,R={foo},N=A); (V=X,R={foo,bar},N=A);
/// S (V=Y,{foo,bar},N=B); (V=X,R={foo,bar},N=A) [stale]; (V=Y,R={foo,bar},N=B);
/// S (V=Z,...,N=C).
#[test]
fn stale_requests() {
    let mut store = ResourceStore::new();
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    let a = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(T0, req(sotw(EDS, &a.version_info, &["foo"], &a.nonce)));
    assert!(is_acked(&events(&mut s)));
    // A hint update at the same version and nonce: not a second ACK.
    store.set(EDS, "bar", body("bar", "1")).unwrap();
    s.handle_request(
        T0,
        req(sotw(EDS, &a.version_info, &["foo", "bar"], &a.nonce)),
    );
    let ev = events(&mut s);
    assert!(!is_acked(&ev) && !is_stale(&ev));
    let b = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&b), ["bar"]);
    // The same request again arrives after B was sent: stale, neither ACK nor NACK.
    s.handle_request(
        T0,
        req(sotw(EDS, &a.version_info, &["foo", "bar"], &a.nonce)),
    );
    let ev = events(&mut s);
    assert!(is_stale(&ev) && !is_acked(&ev) && !is_nacked(&ev));
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "no response to a stale request"
    );
    s.handle_request(
        T0,
        req(sotw(EDS, &b.version_info, &["foo", "bar"], &b.nonce)),
    );
    assert!(is_acked(&events(&mut s)));
    store.set(EDS, "foo", body("foo", "2")).unwrap();
    let c = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(c.nonce, "3");
}

/// Seed "EDS update race motivates nonces": the hint update at X crosses Y; it must not be
/// read as a NACK of Y, and its new name is still honoured (envoy#10363).
#[test]
fn update_race() {
    let mut store = ResourceStore::new();
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    let x = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(T0, req(sotw(EDS, &x.version_info, &["foo"], &x.nonce)));
    events(&mut s);
    store.set(EDS, "foo", body("foo", "2")).unwrap();
    store.set(EDS, "bar", body("bar", "1")).unwrap();
    let y = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&y), ["foo"]);
    // The client's hint update, sent before it saw Y.
    s.handle_request(
        T0,
        req(sotw(EDS, &x.version_info, &["foo", "bar"], &x.nonce)),
    );
    let ev = events(&mut s);
    assert!(is_stale(&ev) && !is_nacked(&ev));
    assert!(ev
        .iter()
        .any(|e| matches!(e, ServerEvent::Subscribed { names, .. } if names.iter().map(|n| &**n).eq(["bar"]))));
    // A stale request is never answered by itself ("The management server should not send
    // a DiscoveryResponse for any DiscoveryRequest that has a stale nonce").
    assert!(drain(&mut s, T0, &store).is_empty());
    // The ACK of Y is not stale (nothing was sent since Y): it is an ACK, and the response
    // it triggers serves the stale request's new name.
    s.handle_request(
        T0,
        req(sotw(EDS, &y.version_info, &["foo", "bar"], &y.nonce)),
    );
    assert!(is_acked(&events(&mut s)));
    let z = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(
        sotw_names(&z),
        ["bar"],
        "the stale request's new name is honoured"
    );
    s.handle_request(
        T0,
        req(sotw(EDS, &z.version_info, &["foo", "bar"], &z.nonce)),
    );
    assert!(is_acked(&events(&mut s)));
}

/// Seed "CDS response leads to EDS resource hint update": an additional request at the same
/// version with more names gets the new names only.
#[test]
fn hint_update_at_the_same_version() {
    let store = eds_store();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    let x = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(T0, req(sotw(EDS, &x.version_info, &["foo"], &x.nonce)));
    s.handle_request(
        T0,
        req(sotw(EDS, &x.version_info, &["foo", "bar"], &x.nonce)),
    );
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["bar"]);
}

/// Seed: "the server must resend any newly requested resources, even if it previously sent
/// those resources ... and the resources have not changed".
#[test]
fn newly_requested_names_are_resent() {
    let store = eds_store();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo", "bar"], "")));
    let x = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(T0, req(sotw(EDS, &x.version_info, &["bar"], &x.nonce)));
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "unsubscribing sends nothing"
    );
    s.handle_request(
        T0,
        req(sotw(EDS, &x.version_info, &["foo", "bar"], &x.nonce)),
    );
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["foo"], "foo resent although unchanged");
}

/// Seed: "The client will silently ignore any supplied resources that were not explicitly
/// requested". What the wildcard brought was requested: narrowing `*` to names resends
/// nothing unchanged, and a change to a resource no longer subscribed sends nothing; a
/// change to a subscribed one still goes out (on a `StreamSet` too, whose index marks).
#[test]
fn narrowed_wildcard_resends_nothing_and_ignores_what_it_dropped() {
    let mut store = eds_store();
    let mut set = StreamSet::new();
    let id = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    set.handle_request(id, T0, req(sotw(EDS, "", &["*"], "")))
        .unwrap();
    let x = match set.poll_response(id, T0, &store) {
        Some(Response::Sotw(r)) => r,
        other => panic!("wildcard answered: {other:?}"),
    };
    assert_eq!(sotw_names(&x), ["bar", "foo"]);
    set.handle_request(id, T0, req(sotw(EDS, &x.version_info, &["foo"], &x.nonce)))
        .unwrap();
    assert!(
        set.poll_response(id, T0, &store).is_none(),
        "foo is held unchanged: narrowing resends nothing"
    );
    store.set(EDS, "bar", body("bar", "2")).unwrap();
    set.sync(&store);
    assert!(
        set.poll_response(id, T0, &store).is_none(),
        "bar is no longer subscribed"
    );
    store.set(EDS, "foo", body("foo", "2")).unwrap();
    set.sync(&store);
    match set.poll_response(id, T0, &store) {
        Some(Response::Sotw(r)) => assert_eq!(sotw_names(&r), ["foo"]),
        other => panic!("a subscribed change goes out: {other:?}"),
    }
}

/// Seed, wildcard: the first LDS/CDS request with no names gets every resource, even when
/// there is none; later names are ignored (with `sticky_legacy_wildcard`, the seed's rule);
/// removals are told by absence.
#[test]
fn wildcard_cds() {
    let mut store = ResourceStore::new();
    store.serve_type(CDS).unwrap();
    let mut config = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
    config.sticky_legacy_wildcard = true;
    let mut s = ServerStream::new(config);
    s.handle_request(T0, req(sotw(CDS, "", &[], "")));
    let ev = events(&mut s);
    assert!(ev
        .iter()
        .any(|e| matches!(e, ServerEvent::Subscribed { names, .. } if names.iter().map(|n| &**n).eq(["*"]))));
    assert!(s.is_wildcard(CDS));
    let empty = one_sotw(drain(&mut s, T0, &store));
    assert!(
        empty.resources.is_empty(),
        "first wildcard request answered even when empty"
    );
    s.handle_request(T0, req(sotw(CDS, &empty.version_info, &[], &empty.nonce)));
    store.set(CDS, "a", body("a", "1")).unwrap();
    store.set(CDS, "b", body("b", "1")).unwrap();
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["a", "b"]);
    // Names in later requests are ignored: still wildcard.
    s.handle_request(T0, req(sotw(CDS, &r.version_info, &["a"], &r.nonce)));
    assert!(s.is_wildcard(CDS));
    store.set(CDS, "b", body("b", "2")).unwrap();
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["a", "b"], "CDS is full state");
    store.remove(CDS, "a");
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["b"], "deletion told by absence");
    store.remove(CDS, "b");
    let r = one_sotw(drain(&mut s, T0, &store));
    assert!(
        r.resources.is_empty(),
        "an empty full state deletes everything"
    );
}

/// Newest text (the default): names without `*` end a legacy wildcard; with `*` it goes on.
#[test]
fn legacy_wildcard_ends_when_names_come_without_star() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    store.set(CDS, "b", body("b", "1")).unwrap();
    let mut s = ads();
    s.handle_request(T0, req(sotw(CDS, "", &[], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["a", "b"]);
    s.handle_request(T0, req(sotw(CDS, &r.version_info, &["*", "a"], &r.nonce)));
    assert!(s.is_wildcard(CDS), "`*` with names keeps the wildcard");
    // `a` joins the wildcard that already brought it: the full state is unchanged, and a
    // response equal to the last one is not sent again.
    assert!(drain(&mut s, T0, &store).is_empty(), "no identical resend");
    s.handle_request(T0, req(sotw(CDS, &r.version_info, &["a"], &r.nonce)));
    assert!(!s.is_wildcard(CDS), "names without `*` end it");
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["a"], "full state of the names now");
}

/// Named LDS/CDS: full state of the subscribed names; EDS: changes only.
#[test]
fn full_state_only_for_lds_and_cds() {
    let mut store = ResourceStore::new();
    for n in ["a", "b", "c"] {
        store.set(CDS, n, body(n, "1")).unwrap();
        store.set(EDS, n, body(n, "1")).unwrap();
    }
    let mut s = ads();
    s.handle_request(T0, req(sotw(CDS, "", &["a", "b"], "")));
    s.handle_request(T0, req(sotw(EDS, "", &["a", "b"], "")));
    assert_eq!(drain(&mut s, T0, &store).len(), 2);
    store.set(CDS, "b", body("b", "2")).unwrap();
    store.set(EDS, "b", body("b", "2")).unwrap();
    store.set(CDS, "c", body("c", "2")).unwrap();
    let out = drain(&mut s, T0, &store);
    let names: Vec<_> = out
        .iter()
        .map(|r| match r {
            Response::Sotw(r) => (r.type_url.clone(), sotw_names(r)),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        names,
        [
            (CDS.to_string(), vec!["a".to_string(), "b".to_string()]),
            (EDS.to_string(), vec!["b".to_string()])
        ]
    );
}

/// Seed: "if one of those resources springs into existence later, the server must send an
/// update"; also after a removal, with the very same body.
#[test]
fn resource_springing_into_existence_later_is_pushed() {
    let mut store = ResourceStore::new();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    assert!(drain(&mut s, T0, &store).is_empty(), "nothing to send yet");
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["foo"]);
    store.remove(EDS, "foo");
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "EDS cannot say removal"
    );
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["foo"], "same body, pushed again");
}

/// Seed "When to send an update": nothing is resent when nothing changed.
#[test]
fn nothing_resent_when_nothing_changed() {
    let mut store = eds_store();
    store.set(CDS, "a", body("a", "1")).unwrap();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    s.handle_request(T0, req(sotw(CDS, "", &[], "")));
    assert_eq!(drain(&mut s, T0, &store).len(), 2);
    store.set(EDS, "foo", body("foo", "1")).unwrap(); // same body
    store.set(EDS, "other", body("other", "1")).unwrap(); // not subscribed
    assert!(drain(&mut s, T0, &store).is_empty());
    // Added and removed between two polls: the client's state is the same.
    store.set(CDS, "tmp", body("tmp", "1")).unwrap();
    store.remove(CDS, "tmp");
    assert!(drain(&mut s, T0, &store).is_empty());
}

#[test]
fn node_is_required_first_and_identical_after() {
    let store = ResourceStore::new();
    let mut s = ads();
    let mut r = sotw(EDS, "", &["foo"], "");
    r.node = None;
    s.handle_request(T0, req(r));
    assert_eq!(
        events(&mut s),
        [ServerEvent::ProtocolError(ProtocolError::NodeMissing)]
    );
    assert!(s.is_closed());
    // The stream says why it closed, after its event was taken.
    assert_eq!(s.closed_by(), Some(&ProtocolError::NodeMissing));
    assert!(drain(&mut s, T0, &store).is_empty());
    assert_eq!(ProtocolError::NodeMissing.grpc_code(), 3);

    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    let mut r = sotw(EDS, "", &["foo", "bar"], "");
    r.node = None; // omitted later: fine
    s.handle_request(T0, req(r));
    assert!(!s.is_closed());
    let mut r = sotw(EDS, "", &["foo"], "");
    r.node.as_mut().unwrap().id = "someone-else".into();
    s.handle_request(T0, req(r));
    assert!(s.is_closed());
    assert!(events(&mut s).contains(&ServerEvent::ProtocolError(ProtocolError::NodeChanged)));
    // Requests after closing are ignored.
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    assert!(events(&mut s).is_empty());
}

#[test]
fn node_may_be_optional_by_config() {
    let mut c = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
    c.require_node = false;
    let mut s = ServerStream::new(c);
    let mut r = sotw(EDS, "", &["foo"], "");
    r.node = None;
    s.handle_request(T0, req(r));
    assert!(!s.is_closed());
    assert!(s.node().is_none());
}

#[test]
fn type_url_required_on_ads_and_checked_per_type() {
    let mut s = ads();
    s.handle_request(T0, req(sotw("", "", &["foo"], "")));
    assert!(s.is_closed());
    assert!(events(&mut s).contains(&ServerEvent::ProtocolError(ProtocolError::TypeUrlMissing)));

    let store = eds_store();
    let per_type = || {
        ServerStream::new(ServerConfig::new(
            Variant::Sotw,
            Transport::PerType(EDS.into()),
        ))
    };
    let mut s = per_type();
    s.handle_request(T0, req(sotw("", "", &["foo"], "")));
    assert!(!s.is_closed(), "implicit on a single-type stream");
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(r.type_url, EDS);
    let mut s = per_type();
    s.handle_request(T0, req(sotw(CDS, "", &[], "")));
    assert!(s.is_closed());
    assert!(matches!(
        events(&mut s).last(),
        Some(ServerEvent::ProtocolError(
            ProtocolError::WrongTypeUrl { .. }
        ))
    ));
}

#[test]
fn wrong_variant_closes_the_stream() {
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    assert!(s.is_closed());
}

/// Seed "Eventual consistency considerations": CDS, EDS, LDS, RDS.
#[test]
fn ads_make_before_break_order() {
    let mut store = ResourceStore::new();
    store.set(LDS, "l", body("l", "1")).unwrap();
    store.set(RDS, "r", body("r", "1")).unwrap();
    store.set(CDS, "c", body("c", "1")).unwrap();
    store.set(EDS, "c", body("c", "1")).unwrap();
    store
        .set("type.googleapis.com/acme.Widget", "w", body("w", "1"))
        .unwrap();
    let mut s = ads();
    s.handle_request(
        T0,
        req(sotw("type.googleapis.com/acme.Widget", "", &["w"], "")),
    );
    s.handle_request(T0, req(sotw(RDS, "", &["r"], "")));
    s.handle_request(T0, req(sotw(LDS, "", &[], "")));
    s.handle_request(T0, req(sotw(EDS, "", &["c"], "")));
    s.handle_request(T0, req(sotw(CDS, "", &[], "")));
    let order: Vec<_> = drain(&mut s, T0, &store)
        .iter()
        .map(|r| r.type_url().to_string())
        .collect();
    assert_eq!(
        order,
        [CDS, EDS, LDS, RDS, "type.googleapis.com/acme.Widget"]
    );
    let types: Vec<_> = s.type_urls().collect();
    assert_eq!(
        types,
        [CDS, EDS, LDS, RDS, "type.googleapis.com/acme.Widget"]
    );
}

#[test]
fn ttl_heartbeats_are_bodyless_with_the_same_version() {
    let mut store = ResourceStore::new();
    store
        .set_entry(
            EDS,
            ResourceEntry::new("foo", body("foo", "1")).with_ttl(Duration::from_secs(10)),
        )
        .unwrap();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(r.resources[0].type_url, RESOURCE_WRAPPER_TYPE_URL);
    let wrapped = Resource::decode(r.resources[0].value.clone()).unwrap();
    assert_eq!(wrapped.ttl.unwrap().seconds, 10);
    assert_eq!(wrapped.resource.unwrap().value, body("foo", "1"));
    assert_eq!(s.poll_timeout(), Some(Instant::from_secs(5)));
    s.handle_timeout(Instant::from_secs(4));
    assert!(drain(&mut s, Instant::from_secs(4), &store).is_empty());
    s.handle_timeout(Instant::from_secs(5));
    let hb = one_sotw(drain(&mut s, Instant::from_secs(5), &store));
    let hb_res = Resource::decode(hb.resources[0].value.clone()).unwrap();
    assert!(hb_res.resource.is_none(), "heartbeat has no body");
    assert_eq!(hb_res.version, wrapped.version);
    assert_eq!(hb.version_info, r.version_info);
    assert_eq!(s.poll_timeout(), Some(Instant::from_secs(10)));
}

#[test]
fn ttl_heartbeat_in_full_state_keeps_the_other_resources() {
    let mut store = ResourceStore::new();
    store.set(CDS, "plain", body("plain", "1")).unwrap();
    store
        .set_entry(
            CDS,
            ResourceEntry::new("ttl", body("ttl", "1")).with_ttl(Duration::from_secs(4)),
        )
        .unwrap();
    let mut s = ads();
    s.handle_request(T0, req(sotw(CDS, "", &[], "")));
    let first = one_sotw(drain(&mut s, T0, &store));
    let t = s.poll_timeout().unwrap();
    assert_eq!(t, Instant::from_secs(2));
    s.handle_timeout(t);
    let hb = one_sotw(drain(&mut s, t, &store));
    assert_eq!(sotw_names(&hb), ["plain", "ttl"]);
    assert_eq!(hb.version_info, first.version_info);
    assert_eq!(hb.resources[0].value, body("plain", "1"));
    let w = Resource::decode(hb.resources[1].value.clone()).unwrap();
    assert!(w.resource.is_none());
}

/// Versions are stable across replicas: same content, same version, whatever the order
/// it was set in; a reconnecting client holding it is not sent it again.
#[test]
fn versions_are_stable_across_replicas_and_reconnects() {
    let mut a = ResourceStore::new();
    a.set(CDS, "x", body("x", "1")).unwrap();
    a.set(CDS, "y", body("y", "1")).unwrap();
    let mut b = ResourceStore::new();
    b.set(CDS, "y", body("y", "0")).unwrap();
    b.set(CDS, "y", body("y", "1")).unwrap();
    b.set(CDS, "x", body("x", "1")).unwrap();
    let mut s1 = ads();
    s1.handle_request(T0, req(sotw(CDS, "", &[], "")));
    let r1 = one_sotw(drain(&mut s1, T0, &a));
    let mut s2 = ads();
    s2.handle_request(T0, req(sotw(CDS, "", &[], "")));
    let r2 = one_sotw(drain(&mut s2, T0, &b));
    assert_eq!(r1.encode_to_vec(), r2.encode_to_vec(), "byte for byte");
    // Reconnect to replica b holding r1's version: nothing to send.
    let mut s3 = ads();
    s3.handle_request(T0, req(sotw(CDS, &r1.version_info, &[], "")));
    assert!(drain(&mut s3, T0, &b).is_empty());
    // Holding an older version: sent.
    let mut s4 = ads();
    s4.handle_request(T0, req(sotw(CDS, "old", &[], "")));
    assert_eq!(
        one_sotw(drain(&mut s4, T0, &b)).version_info,
        r1.version_info
    );
}

#[test]
fn responses_share_the_stored_bodies() {
    let store = eds_store();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    let stored = store.get(EDS, "foo").unwrap().body();
    assert_eq!(r.resources[0].value.as_ptr(), stored.as_ptr(), "no copy");
}

#[test]
fn explicit_wildcard_can_be_left() {
    let mut store = ResourceStore::new();
    store.set(EDS, "a", body("a", "1")).unwrap();
    store.set(EDS, "b", body("b", "1")).unwrap();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["*"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["a", "b"]);
    s.handle_request(T0, req(sotw(EDS, &r.version_info, &["a"], &r.nonce)));
    let ev = events(&mut s);
    assert!(ev
        .iter()
        .any(|e| matches!(e, ServerEvent::Unsubscribed { names, .. } if names.iter().map(|n| &**n).eq(["*"]))));
    assert!(!s.is_wildcard(EDS));
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "a became a named subscription: the wildcard brought it, the client holds it"
    );
    store.set(EDS, "b", body("b", "2")).unwrap();
    assert!(drain(&mut s, T0, &store).is_empty());
}

#[test]
fn error_detail_without_a_response_is_ignored_not_a_nack() {
    let store = eds_store();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    events(&mut s);
    s.handle_request(T0, req(sotw_nack(EDS, "", &["foo"], "")));
    let ev = events(&mut s);
    assert!(!is_nacked(&ev));
    assert!(matches!(&ev[..], [ServerEvent::Ignored { .. }]));
    assert_eq!(drain(&mut s, T0, &store).len(), 1);
}

/// DESIGN "Time": while output waits for `poll_response`, `poll_timeout` is the last `now`.
#[test]
fn poll_timeout_is_now_while_a_request_waits() {
    let store = eds_store();
    let mut s = ads();
    assert_eq!(s.poll_timeout(), None);
    let t = Instant::from_secs(7);
    s.handle_request(t, req(sotw(EDS, "", &["foo"], "")));
    assert_eq!(s.poll_timeout(), Some(t));
    assert_eq!(drain(&mut s, t, &store).len(), 1);
    assert_eq!(s.poll_timeout(), None);
}

/// LDS/CDS: a newly subscribed name that does not exist leaves the full state as it was, so
/// nothing is sent (a response equal to the last one tells the client nothing; its
/// does-not-exist timer, or `sotw_not_found_errors`, tells it); once it exists it is sent.
/// EDS: nothing to say until it exists.
#[test]
fn new_full_state_names_missing_send_nothing_new() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    store.serve_type(EDS).unwrap();
    let mut s = ads();
    s.handle_request(T0, req(sotw(CDS, "", &["a"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(
        T0,
        req(sotw(CDS, &r.version_info, &["a", "missing"], &r.nonce)),
    );
    assert!(drain(&mut s, T0, &store).is_empty(), "no identical resend");
    store.set(CDS, "missing", body("missing", "1")).unwrap();
    let r2 = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r2), ["a", "missing"]);
    s.handle_request(T0, req(sotw(EDS, "", &["missing"], "")));
    assert!(drain(&mut s, T0, &store).is_empty());
}

// ---------------------------------------------------------------- resource_errors (xRFC TP3)

fn ads_reporting_not_found() -> ServerStream {
    ServerStream::new({
        let mut c = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
        c.sotw_not_found_errors = true;
        c
    })
}

fn not_found_names(r: &xds_sansio::pb::discovery::DiscoveryResponse) -> Vec<String> {
    r.resource_errors
        .iter()
        .map(|e| {
            assert_eq!(e.error_detail.as_ref().unwrap().code, 5, "NOT_FOUND");
            e.resource_name.as_ref().unwrap().name.clone()
        })
        .collect()
}

#[test]
fn absent_names_are_reported_not_found_when_asked_for() {
    let mut store = eds_store();
    let mut s = ads_reporting_not_found();
    s.handle_request(T0, req(sotw(EDS, "", &["foo", "nope"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["foo"]);
    assert_eq!(not_found_names(&r), ["nope"]);
    // Said once: the ACK brings nothing more.
    s.handle_request(
        T0,
        req(sotw(EDS, &r.version_info, &["foo", "nope"], &r.nonce)),
    );
    assert!(drain(&mut s, T0, &store).is_empty());
    // A name alone that does not exist still gets an answer (only the error).
    s.handle_request(
        T0,
        req(sotw(
            EDS,
            &r.version_info,
            &["foo", "nope", "nada"],
            &r.nonce,
        )),
    );
    let r2 = one_sotw(drain(&mut s, T0, &store));
    assert!(r2.resources.is_empty());
    assert_eq!(not_found_names(&r2), ["nada"]);
    // Created later: pushed as usual.
    store.set(EDS, "nope", body("nope", "1")).unwrap();
    let r3 = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r3), ["nope"]);
    assert!(r3.resource_errors.is_empty());
    // Removed again: EDS cannot say it by absence, so it says NOT_FOUND.
    store.remove(EDS, "nope");
    let r4 = one_sotw(drain(&mut s, T0, &store));
    assert!(r4.resources.is_empty());
    assert_eq!(not_found_names(&r4), ["nope"]);
}

#[test]
fn full_state_types_report_absent_new_names_too() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    let mut s = ads_reporting_not_found();
    s.handle_request(T0, req(sotw(CDS, "", &["a", "b"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["a"]);
    assert_eq!(not_found_names(&r), ["b"]);
    // The encoded twin carries the same field 7.
    let mut twin = ads_reporting_not_found();
    twin.handle_request(T0, req(sotw(CDS, "", &["a", "b"], "")));
    let encoded = twin.poll_response_encoded(T0, &store).unwrap();
    assert_eq!(encoded.bytes, r.encode_to_vec());
}

#[test]
fn not_found_errors_are_off_by_default() {
    let store = eds_store();
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["nope"], "")));
    assert!(drain(&mut s, T0, &store).is_empty());
}

#[test]
fn a_client_learns_does_not_exist_without_its_timer() {
    use xds_sansio::client::{ClientConfig, ClientEvent};
    use xds_sansio_conformance::testing::{Pair, PairConfig};
    let mut pair = Pair::new(PairConfig {
        client: ClientConfig::new(Variant::Sotw, Transport::Aggregated, node()),
        server: {
            let mut c = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
            c.sotw_not_found_errors = true;
            c
        },
        latency: Duration::from_millis(10),
    });
    pair.store.serve_type(EDS).unwrap();
    pair.client.subscribe(EDS, &["ghost"]).unwrap();
    pair.drive().unwrap();
    let events = pair.take_client_events();
    let (at, _) = events
        .iter()
        .find(|(_, e)| matches!(e, ClientEvent::DoesNotExist { name, .. } if name.as_str() == "ghost"))
        .expect("does-not-exist");
    assert!(
        at.as_nanos() <= Duration::from_millis(20).as_nanos() as u64,
        "one round trip, not 15 s: {at:?}"
    );
}

/// A full replacement of many clusters in one revision is one full-state response with
/// every new body (a full-state type lists only a few changed names to decide a build is
/// due), on a stream alone and through a `StreamSet`; changes it does not cover send
/// nothing, and nothing is resent after the ACK.
#[test]
fn many_changed_clusters_are_one_full_state_response() {
    let names: Vec<String> = (0..100).map(|i| format!("c{i:03}")).collect();
    let replace = |store: &mut ResourceStore, names: &[String], data: &str| {
        let ops = names
            .iter()
            .map(|n| StoreOp::Set {
                type_url: CDS.into(),
                entry: ResourceEntry::new(n.as_str(), body(n, data)),
            })
            .collect();
        store.apply(ops).unwrap();
    };
    for (wildcard, via_set) in [(true, false), (false, false), (true, true), (false, true)] {
        let label = format!("wildcard={wildcard} via_set={via_set}");
        let mut store = ResourceStore::new();
        replace(&mut store, &names, "1");
        let others: Vec<String> = (0..50).map(|i| format!("other{i}")).collect();
        replace(&mut store, &others, "1");
        let subscribed: Vec<&str> = if wildcard {
            Vec::new()
        } else {
            names.iter().map(String::as_str).collect()
        };
        let mut set = StreamSet::new();
        let id = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
        let mut alone = ads();
        let mut exchange = |request: Option<DiscoveryRequest>, store: &ResourceStore| {
            if via_set {
                if let Some(r) = request {
                    set.handle_request(id, T0, req(r)).unwrap();
                }
                set.sync(store);
                std::iter::from_fn(|| set.poll_response(id, T0, store)).collect::<Vec<_>>()
            } else {
                if let Some(r) = request {
                    alone.handle_request(T0, req(r));
                }
                drain(&mut alone, T0, store)
            }
        };
        let first = one_sotw(exchange(Some(sotw(CDS, "", &subscribed, "")), &store));
        let ack = |r: &DiscoveryResponse| sotw(CDS, &r.version_info, &subscribed, &r.nonce);
        assert!(exchange(Some(ack(&first)), &store).is_empty(), "{label}");
        replace(&mut store, &names, "2");
        let second = one_sotw(exchange(None, &store));
        let expected = if wildcard { 150 } else { 100 };
        assert_eq!(second.resources.len(), expected, "{label}");
        let renewed = second
            .resources
            .iter()
            .filter(|a| a.value.ends_with(b"2"))
            .count();
        assert_eq!(renewed, 100, "{label}: every replaced body is new");
        assert!(exchange(Some(ack(&second)), &store).is_empty(), "{label}");
        if !wildcard {
            replace(&mut store, &others, "2");
            assert!(exchange(None, &store).is_empty(), "{label}: not covered");
        }
    }
}

#[test]
fn a_stream_lists_its_subscriptions_for_an_index_to_drop() {
    let mut s = ads();
    s.handle_request(T0, req(sotw(EDS, "", &["foo", "bar"], "")));
    s.handle_request(T0, req(sotw(CDS, "", &["*"], "")));
    let mut got = s.subscriptions();
    got.sort();
    let want: Vec<(String, String)> = [(CDS, "*"), (EDS, "bar"), (EDS, "foo")]
        .iter()
        .map(|(t, n)| (t.to_string(), n.to_string()))
        .collect();
    assert_eq!(got, want);
}

/// The per-node status a management server shows: ACKed, then in flight, then NACKed with
/// the error, then ACKed again (the NACK cleared), each with its time.
#[test]
fn the_stream_says_what_the_client_applied() {
    let t = Instant::from_secs;
    let mut store = eds_store();
    let mut s = ads();
    assert!(s.applied().is_empty());
    s.handle_request(t(1), req(sotw(EDS, "", &["foo", "bar"], "")));
    let x = one_sotw(drain(&mut s, t(1), &store));
    let a = &s.applied()[0];
    assert_eq!(a.type_url, EDS);
    assert_eq!(a.acked, None);
    let flight = a.in_flight.as_ref().unwrap();
    assert_eq!((flight.nonce.as_str(), flight.since), ("1", t(1)));
    s.handle_request(
        t(2),
        req(sotw(EDS, &x.version_info, &["foo", "bar"], &x.nonce)),
    );
    let a = &s.applied()[0];
    assert_eq!(a.acked, Some((x.version_info.clone(), t(2))));
    assert_eq!((a.nacked.as_ref(), a.in_flight.as_ref()), (None, None));
    store.set(EDS, "foo", body("foo", "2")).unwrap();
    let y = one_sotw(drain(&mut s, t(3), &store));
    s.handle_request(
        t(4),
        req(sotw_nack(EDS, &x.version_info, &["foo", "bar"], &y.nonce)),
    );
    let a = &s.applied()[0];
    assert_eq!(
        a.acked,
        Some((x.version_info.clone(), t(2))),
        "the last ACK stays"
    );
    let nack = a.nacked.as_ref().unwrap();
    assert_eq!(
        (nack.version.as_str(), nack.at),
        (y.version_info.as_str(), t(4))
    );
    assert_eq!(nack.error.code, 13);
    assert_eq!(a.in_flight, None);
    store.set(EDS, "foo", body("foo", "3")).unwrap();
    let z = one_sotw(drain(&mut s, t(5), &store));
    s.handle_request(
        t(6),
        req(sotw(EDS, &z.version_info, &["foo", "bar"], &z.nonce)),
    );
    let a = &s.applied()[0];
    assert_eq!(a.acked, Some((z.version_info.clone(), t(6))));
    assert_eq!(a.nacked, None, "an ACK clears the NACK");
}
