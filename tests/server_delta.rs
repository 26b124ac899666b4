//! Incremental server conversations: the seed's stories and one test per rule.

mod server_common;

use core::time::Duration;
use server_common::*;
use xds_sansio::pb::discovery::DeltaDiscoveryRequest;
use xds_sansio::server::{
    Ignored, NotFoundReporting, ResourceEntry, ResourceStore, ServerConfig, ServerEvent,
    ServerStream,
};
use xds_sansio::{Instant, Response, Transport, Variant};

fn ads() -> ServerStream {
    ServerStream::new(ServerConfig::new(Variant::Delta, Transport::Aggregated))
}

fn ack(t: &str, nonce: &str) -> DeltaDiscoveryRequest {
    let mut r = delta(t, &[], &[], nonce);
    r.node = None;
    r
}

fn store_with(t: &str, names: &[(&str, &str)]) -> ResourceStore {
    let mut s = ResourceStore::new();
    for (n, d) in names {
        s.set(t, n, body(n, d)).unwrap();
    }
    s
}

/// Seed "Incremental session example": first update ACKed, second NACKed (held), then the
/// client spontaneously subscribes to "wc".
#[test]
fn incremental_session_and_spontaneous_subscribe() {
    let mut store = store_with(EDS, &[("foo", "1"), ("bar", "1"), ("wc", "1")]);
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo", "bar"], &[], "")));
    let r1 = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r1), ["bar", "foo"]);
    assert!(r1.resources.iter().all(|r| r.resource.is_some()));
    assert_eq!(
        r1.resources[0].version,
        store.get(EDS, "bar").unwrap().version()
    );
    assert_eq!(r1.nonce, "1");
    events(&mut s);
    s.handle_request(T0, dreq(ack(EDS, "1")));
    assert!(matches!(&events(&mut s)[..], [ServerEvent::Acked { nonce, .. }] if nonce == "1"));
    store.set(EDS, "foo", body("foo", "2")).unwrap();
    let r2 = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r2), ["foo"], "only the change");
    let mut nack = ack(EDS, &r2.nonce);
    nack.error_detail = Some(nack_status());
    s.handle_request(T0, dreq(nack));
    assert!(matches!(&events(&mut s)[..], [ServerEvent::Nacked { .. }]));
    assert!(drain(&mut s, T0, &store).is_empty(), "NACKed version held");
    // Spontaneous request: no nonce.
    let mut spont = delta(EDS, &["wc"], &[], "");
    spont.node = None;
    s.handle_request(T0, dreq(spont));
    let ev = events(&mut s);
    assert!(
        matches!(&ev[..], [ServerEvent::Subscribed { names, .. }] if names.iter().map(|n| &**n).eq(["wc"]))
    );
    let r3 = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r3), ["wc"]);
    assert!(r3.removed_resources.is_empty());
}

/// Seed "Incremental reconnect example": the client tells what it holds; it is not resent,
/// what changed is, and what is gone is removed.
#[test]
fn reconnect_with_initial_resource_versions() {
    let store = store_with(EDS, &[("foo", "1"), ("bar", "2"), ("new", "1")]);
    let foo_v = store.get(EDS, "foo").unwrap().version().to_string();
    let mut s = ads();
    let mut r = delta(EDS, &["new"], &[], "");
    r.initial_resource_versions = [
        ("foo".to_string(), foo_v),
        ("bar".to_string(), "stale-version".to_string()),
        ("gone".to_string(), "v".to_string()),
    ]
    .into_iter()
    .collect();
    s.handle_request(T0, dreq(r));
    let ev = events(&mut s);
    assert!(ev
        .iter()
        .any(|e| matches!(e, ServerEvent::Subscribed { names, .. }
        if names.iter().map(|n| &**n).eq(["bar", "foo", "gone", "new"]))));
    let resp = one_delta(drain(&mut s, T0, &store));
    assert_eq!(
        delta_names(&resp),
        ["bar", "new"],
        "foo is held: not resent"
    );
    assert_eq!(resp.removed_resources, ["gone"]);
    assert_eq!(s.subscribed_names(EDS), ["bar", "foo", "gone", "new"]);
}

/// Envoy on reconnect lists every name in resource_names_subscribe *and* its version in
/// initial_resource_versions: names held at the current version are not resent.
#[test]
fn reconnect_subscribing_to_held_names_sends_only_what_changed() {
    let store = store_with(CDS, &[("foo", "1"), ("bar", "2")]);
    let held = |n: &str, d: &str| {
        (
            n.to_string(),
            store.get(CDS, n).map_or(String::new(), |_| {
                xds_sansio::server::body_version(&body(n, d))
            }),
        )
    };
    let mut s = ads();
    let mut r = delta(CDS, &["foo", "bar"], &[], "");
    r.initial_resource_versions = [held("foo", "1"), held("bar", "1")].into_iter().collect();
    s.handle_request(T0, dreq(r));
    let resp = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&resp), ["bar"]);
    assert!(resp.removed_resources.is_empty());
    // A later subscribe of a held name is answered again (it is not the first request).
    s.handle_request(T0, dreq(ack(CDS, &resp.nonce)));
    s.handle_request(T0, dreq(delta(CDS, &["foo"], &[], "")));
    assert_eq!(delta_names(&one_delta(drain(&mut s, T0, &store))), ["foo"]);
}

/// discovery.proto: "the server must respond with all resources listed in
/// resource_names_subscribe, even if it believes the client has the most recent version".
#[test]
fn names_subscribed_again_are_resent() {
    let store = store_with(EDS, &[("foo", "1")]);
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    s.handle_request(T0, dreq(ack(EDS, &r.nonce)));
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r), ["foo"]);
    assert!(r.resources[0].resource.is_some());
    // Unsubscribed, then subscribed again (RemoveThenAdd).
    s.handle_request(T0, dreq(delta(EDS, &[], &["foo"], "")));
    assert!(drain(&mut s, T0, &store).is_empty());
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    assert_eq!(delta_names(&one_delta(drain(&mut s, T0, &store))), ["foo"]);
}

#[test]
fn phantom_unsubscribes_are_ignored() {
    let store = store_with(EDS, &[("foo", "1")]);
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    drain(&mut s, T0, &store);
    events(&mut s);
    s.handle_request(T0, dreq(delta(EDS, &[], &["never-subscribed"], "")));
    assert!(events(&mut s).is_empty());
    assert!(drain(&mut s, T0, &store).is_empty());
    assert_eq!(s.subscribed_names(EDS), ["foo"]);
}

#[test]
fn removal_then_comeback() {
    let mut store = store_with(EDS, &[("foo", "1")]);
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    drain(&mut s, T0, &store);
    store.remove(EDS, "foo");
    let r = one_delta(drain(&mut s, T0, &store));
    assert!(r.resources.is_empty());
    assert_eq!(r.removed_resources, ["foo"]);
    assert!(drain(&mut s, T0, &store).is_empty(), "removal told once");
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r), ["foo"], "springs into existence: pushed");
}

#[test]
fn not_found_is_reported_in_removed_resources_by_default() {
    let mut store = ResourceStore::new();
    store.serve_type(EDS).unwrap();
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["missing"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert!(r.resources.is_empty());
    assert_eq!(r.removed_resources, ["missing"]);
    assert!(drain(&mut s, T0, &store).is_empty(), "reported once");
    store.set(EDS, "missing", body("missing", "1")).unwrap();
    assert_eq!(
        delta_names(&one_delta(drain(&mut s, T0, &store))),
        ["missing"]
    );
}

#[test]
fn not_found_as_bodyless_resource_by_option() {
    let mut c = ServerConfig::new(Variant::Delta, Transport::Aggregated);
    c.not_found = NotFoundReporting::BodylessResource;
    let mut store = ResourceStore::new();
    store.serve_type(EDS).unwrap();
    let mut s = ServerStream::new(c);
    s.handle_request(T0, dreq(delta(EDS, &["missing"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert!(r.removed_resources.is_empty());
    assert_eq!(delta_names(&r), ["missing"]);
    assert!(r.resources[0].resource.is_none());
    assert!(r.resources[0].version.is_empty());
}

/// Unsubscribing a name while wildcard: answered with the resource, or its removal.
#[test]
fn unsubscribing_a_name_while_wildcard() {
    let store = store_with(CDS, &[("a", "1")]);
    let mut s = ads();
    s.handle_request(T0, dreq(delta(CDS, &["*", "a", "ghost"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r), ["a"]);
    assert_eq!(r.removed_resources, ["ghost"]);
    s.handle_request(T0, dreq(delta(CDS, &[], &["a", "ghost"], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r), ["a"], "still covered by wildcard: resent");
    assert_eq!(r.removed_resources, ["ghost"], "or its removal");
}

#[test]
fn legacy_and_explicit_wildcard() {
    let mut store = store_with(CDS, &[("a", "1")]);
    let mut s = ads();
    s.handle_request(T0, dreq(delta(CDS, &[], &[], "")));
    assert!(s.is_wildcard(CDS));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r), ["a"]);
    store.set(CDS, "b", body("b", "1")).unwrap();
    assert_eq!(delta_names(&one_delta(drain(&mut s, T0, &store))), ["b"]);
    s.handle_request(T0, dreq(delta(CDS, &["b"], &["*"], "")));
    assert!(!s.is_wildcard(CDS));
    assert_eq!(delta_names(&one_delta(drain(&mut s, T0, &store))), ["b"]);
    store.set(CDS, "a", body("a", "2")).unwrap();
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "a only wildcard-covered"
    );
    // EDS: no legacy wildcard; an empty first request subscribes to nothing.
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &[], &[], "")));
    assert!(!s.is_wildcard(EDS));
}

/// envoy#10363: a stale nonce is neither ACK nor NACK, but its subscriptions apply.
#[test]
fn stale_nonce_subscription_is_honoured() {
    let mut store = store_with(EDS, &[("foo", "1"), ("bar", "1")]);
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    let r1 = one_delta(drain(&mut s, T0, &store));
    store.set(EDS, "foo", body("foo", "2")).unwrap();
    let _r2 = one_delta(drain(&mut s, T0, &store));
    events(&mut s);
    let mut stale = delta(EDS, &["bar"], &[], &r1.nonce);
    stale.error_detail = Some(nack_status());
    s.handle_request(T0, dreq(stale));
    let ev = events(&mut s);
    assert!(ev
        .iter()
        .any(|e| matches!(e, ServerEvent::StaleRequest { nonce, .. } if nonce == "1")));
    assert!(!ev.iter().any(|e| matches!(e, ServerEvent::Nacked { .. })));
    assert_eq!(delta_names(&one_delta(drain(&mut s, T0, &store))), ["bar"]);
}

#[test]
fn late_initial_resource_versions_are_ignored() {
    let store = ResourceStore::new();
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["a"], &[], "")));
    drain(&mut s, T0, &store);
    events(&mut s);
    let mut r = delta(EDS, &[], &[], "");
    r.initial_resource_versions = [("x".to_string(), "1".to_string())].into_iter().collect();
    s.handle_request(T0, dreq(r));
    assert_eq!(
        events(&mut s),
        [ServerEvent::Ignored {
            type_url: EDS.into(),
            what: Ignored::LateInitialResourceVersions
        }]
    );
    assert_eq!(s.subscribed_names(EDS), ["a"]);
}

#[test]
fn ttl_heartbeat_is_bodyless_same_version() {
    let mut store = ResourceStore::new();
    store
        .set_entry(
            EDS,
            ResourceEntry::new("foo", body("foo", "1")).with_ttl(Duration::from_secs(30)),
        )
        .unwrap();
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(r.resources[0].ttl.unwrap().seconds, 30);
    let t = s.poll_timeout().unwrap();
    assert_eq!(t, Instant::from_secs(15));
    s.handle_timeout(t);
    let hb = one_delta(drain(&mut s, t, &store));
    assert_eq!(delta_names(&hb), ["foo"]);
    assert!(hb.resources[0].resource.is_none());
    assert_eq!(hb.resources[0].version, r.resources[0].version);
    assert_eq!(hb.resources[0].ttl.unwrap().seconds, 30);
    assert_eq!(s.poll_timeout(), Some(Instant::from_secs(30)));
    // TTL dropped in the store: the update is sent, and heartbeats stop.
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    let up = one_delta(drain(&mut s, Instant::from_secs(20), &store));
    assert!(up.resources[0].ttl.is_none());
    assert_eq!(s.poll_timeout(), None);
}

/// Seed "Eventual consistency": upserts CDS, EDS, LDS, RDS; removals after, reversed.
#[test]
fn ads_make_before_break_with_removals_last() {
    let mut store = ResourceStore::new();
    store.set(CDS, "old", body("old", "1")).unwrap();
    store.set(RDS, "r", body("r", "1")).unwrap();
    store.serve_type(EDS).unwrap();
    let mut s = ads();
    s.handle_request(T0, dreq(delta(RDS, &["r"], &[], "")));
    s.handle_request(T0, dreq(delta(CDS, &[], &[], "")));
    s.handle_request(T0, dreq(delta(EDS, &["old", "new"], &[], "")));
    let first: Vec<_> = drain(&mut s, T0, &store)
        .into_iter()
        .map(|r| r.type_url().to_string())
        .collect();
    assert_eq!(first, [CDS, EDS, RDS], "EDS reports not-found for both");
    // Make before break: new cluster, route repointed, old cluster removed.
    store.set(CDS, "new", body("new", "1")).unwrap();
    store.set(EDS, "new", body("new", "1")).unwrap();
    store.set(RDS, "r", body("r", "2")).unwrap();
    store.remove(CDS, "old");
    let out = drain(&mut s, T0, &store);
    let summary: Vec<_> = out
        .iter()
        .map(|r| match r {
            Response::Delta(d) => (
                d.type_url.clone(),
                delta_names(d).join(","),
                d.removed_resources.join(","),
            ),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        summary,
        [
            (CDS.to_string(), "new".to_string(), String::new()),
            (EDS.to_string(), "new".to_string(), String::new()),
            (RDS.to_string(), "r".to_string(), String::new()),
            (CDS.to_string(), String::new(), "old".to_string()),
        ]
    );
    let nonces: Vec<_> = out.iter().map(|r| r.nonce().to_string()).collect();
    assert_eq!(nonces, ["4", "5", "6", "7"], "deterministic, unique nonces");
}

/// The seed's "Resource names": subscribe by alias; the response names the resource.
#[test]
fn subscribe_by_alias() {
    let mut store = ResourceStore::new();
    store
        .set_entry(
            "type.googleapis.com/envoy.config.route.v3.VirtualHost",
            ResourceEntry::new("vh", body("vh", "1")).with_aliases(vec!["route/host".into()]),
        )
        .unwrap();
    let t = "type.googleapis.com/envoy.config.route.v3.VirtualHost";
    let mut s = ads();
    s.handle_request(T0, dreq(delta(t, &["route/host"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r), ["vh"]);
    assert_eq!(r.resources[0].aliases, ["route/host"]);
    store
        .set_entry(
            t,
            ResourceEntry::new("vh", body("vh", "2")).with_aliases(vec!["route/host".into()]),
        )
        .unwrap();
    assert_eq!(delta_names(&one_delta(drain(&mut s, T0, &store))), ["vh"]);
}

#[test]
fn delta_responses_share_the_stored_bodies() {
    let store = store_with(EDS, &[("foo", "1")]);
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(
        r.resources[0].resource.as_ref().unwrap().value.as_ptr(),
        store.get(EDS, "foo").unwrap().body().as_ptr()
    );
}

/// A subscription to a type the store has not published is held, and the hold is
/// reported once (ServerEvent::Held), on the encoded path too; publication ends it.
#[test]
fn a_hold_on_an_unpublished_type_is_reported_once() {
    let mut store = ResourceStore::new();
    let mut s = ads();
    s.handle_request(T0, dreq(delta(EDS, &["foo"], &[], "")));
    events(&mut s);
    assert!(drain(&mut s, T0, &store).is_empty(), "held");
    let held = events(&mut s);
    assert!(
        matches!(&held[..], [ServerEvent::Held { type_url }] if type_url.as_str() == EDS),
        "{held:?}"
    );
    assert!(s.poll_response_encoded(T0, &store).is_none());
    assert!(drain(&mut s, T0, &store).is_empty());
    assert!(events(&mut s).is_empty(), "once per stream and type");
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&r), ["foo"]);
    assert!(events(&mut s).is_empty());
}
