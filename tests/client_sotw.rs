//! SotW client: each seed sequence diagram as a conversation, then one test per rule.

mod client_support;

use bytes::Bytes;
use client_support::*;
use prost::Message;
use std::time::Duration;
use xds_sansio::client::{
    Client, ClientError, ClientEvent, IgnoreReason, NackPolicy, ResourceState, MAX_ERROR_MESSAGE,
    NACK_CODE, TRUNCATION_MARKER,
};
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::{Response, Transport, Variant};

fn reject_bad() -> Box<dyn xds_sansio::client::Validator> {
    Box::new(|_name: &str, _v: &str, body: &Bytes| {
        if body.windows(3).any(|w| w == b"bad") {
            Err("bad payload".to_string())
        } else {
            Ok(())
        }
    })
}

/// EDS client subscribed to foo and bar, first request drained.
fn eds_foo_bar() -> Client {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["foo", "bar"]).unwrap();
    c.connected(t(0));
    let req = one(&mut c, t(0));
    check(&req, "", &["bar", "foo"], "", false);
    assert_eq!(req.type_url, EDS);
    assert_eq!(req.node, Some(node()));
    c
}

// ---------------------------------------------------------------- seed diagrams

#[test]
fn seed_simple_ack() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1"), ("bar", "1")]));
    check(&one(&mut c, t(1)), "X", &["bar", "foo"], "A", false);
    assert_eq!(
        names_of(&events(&mut c)),
        ["+foo", "+bar", "ack:X/A", "ready"]
    );
    assert_eq!(c.version(EDS), Some("X"));
}

#[test]
fn seed_simple_nack() {
    let mut c = eds_foo_bar();
    c.set_validator(EDS, reject_bad());
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "bad"), ("bar", "1")]));
    let req = one(&mut c, t(1));
    check(&req, "", &["bar", "foo"], "A", true);
    let status = req.error_detail.unwrap();
    assert_eq!(status.code, NACK_CODE);
    assert!(status.message.contains("foo"), "{}", status.message);
    let evs = events(&mut c);
    assert_eq!(
        names_of(&evs),
        ["nack:X/A"],
        "bar is still awaited: not ready"
    );
    assert!(
        c.resource(EDS, "bar").is_none(),
        "RejectAll applies nothing"
    );
    let st = c.status(EDS, "foo").unwrap();
    assert_eq!(st.state, ResourceState::Nacked);
    assert_eq!(st.rejected.unwrap().version, "X");
}

#[test]
fn seed_ack_after_nack() {
    let mut c = eds_foo_bar();
    c.set_validator(EDS, reject_bad());
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "bad"), ("bar", "1")]));
    check(&one(&mut c, t(1)), "", &["bar", "foo"], "A", true);
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[("foo", "1"), ("bar", "1")]));
    check(&one(&mut c, t(2)), "Y", &["bar", "foo"], "B", false);
    assert_eq!(c.status(EDS, "foo").unwrap().state, ResourceState::Acked);
    assert_eq!(c.status(EDS, "foo").unwrap().rejected, None);
}

#[test]
fn seed_cds_response_leads_to_eds_hint_update() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.subscribe(EDS, &["foo"]).unwrap();
    c.connected(t(0));
    let reqs = sotw_reqs(&mut c, t(0));
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].type_url, CDS, "CDS first (make before break)");
    check(&reqs[0], "", &[], "", false);
    check(&reqs[1], "", &["foo"], "", false);
    assert!(
        reqs[1].node.is_none(),
        "node only on the first request of the stream"
    );
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    check(&one(&mut c, t(1)), "X", &["foo"], "A", false);
    c.handle_response(t(2), sotw(CDS, "1", "c1", &[("foo", "c"), ("bar", "c")]));
    let ack = one(&mut c, t(2));
    assert_eq!(ack.type_url, CDS);
    // The application learns about bar and asks EDS for it: at X, latest nonce, no error.
    c.subscribe(EDS, &["bar"]).unwrap();
    check(&one(&mut c, t(3)), "X", &["bar", "foo"], "A", false);
}

#[test]
fn seed_update_race_motivates_nonces() {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["foo"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    check(&one(&mut c, t(1)), "X", &["foo"], "A", false);
    c.subscribe(EDS, &["bar"]).unwrap();
    // The hint update at X carries nonce A: a server that already sent Y (nonce B) knows
    // it is stale and not a rejection of Y.
    check(&one(&mut c, t(2)), "X", &["bar", "foo"], "A", false);
    c.handle_response(t(3), sotw(EDS, "Y", "B", &[("foo", "2"), ("bar", "2")]));
    check(&one(&mut c, t(3)), "Y", &["bar", "foo"], "B", false);
}

#[test]
fn seed_requests_become_stale() {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["foo"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    check(&one(&mut c, t(1)), "X", &["foo"], "A", false);
    c.subscribe(EDS, &["bar"]).unwrap();
    check(&one(&mut c, t(2)), "X", &["bar", "foo"], "A", false);
    c.handle_response(t(3), sotw(EDS, "Y", "B", &[("foo", "1"), ("bar", "1")]));
    check(&one(&mut c, t(3)), "Y", &["bar", "foo"], "B", false);
    c.handle_response(t(4), sotw(EDS, "Z", "C", &[("foo", "2"), ("bar", "2")]));
    check(&one(&mut c, t(4)), "Z", &["bar", "foo"], "C", false);
}

#[test]
fn seed_ads_multiplexing_keeps_types_apart() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    check(&one(&mut c, t(0)), "", &[], "", false);
    c.handle_response(t(1), sotw(CDS, "C1", "n1", &[("foo", "c")]));
    let ack = one(&mut c, t(1));
    assert_eq!(ack.type_url, CDS);
    check(&ack, "C1", &[], "n1", false);
    c.subscribe(EDS, &["foo"]).unwrap();
    let req = one(&mut c, t(2));
    assert_eq!(req.type_url, EDS);
    check(&req, "", &["foo"], "", false); // EDS has its own version and nonce
    c.handle_response(t(3), sotw(EDS, "E1", "n2", &[("foo", "e")]));
    let ack = one(&mut c, t(3));
    check(&ack, "E1", &["foo"], "n2", false);
    assert_eq!(c.version(CDS), Some("C1"));
    assert_eq!(c.version(EDS), Some("E1"));
}

#[test]
fn seed_eds_on_one_stream_and_on_distinct_streams() {
    // One stream: both names in one request.
    let c = eds_foo_bar();
    drop(c);
    // Distinct streams: one client per stream, each with its node on its first request.
    let mut a = Client::new(config(Variant::Sotw, Transport::PerType(EDS.into())));
    let mut b = Client::new(config(Variant::Sotw, Transport::PerType(EDS.into())));
    a.subscribe(EDS, &["foo"]).unwrap();
    b.subscribe(EDS, &["bar"]).unwrap();
    a.connected(t(0));
    b.connected(t(0));
    let ra = one(&mut a, t(0));
    let rb = one(&mut b, t(0));
    check(&ra, "", &["foo"], "", false);
    check(&rb, "", &["bar"], "", false);
    assert!(ra.node.is_some() && rb.node.is_some());
    a.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    b.handle_response(t(1), sotw(EDS, "X", "B", &[("bar", "1")]));
    check(&one(&mut a, t(1)), "X", &["foo"], "A", false);
    check(&one(&mut b, t(1)), "X", &["bar"], "B", false);
    assert_eq!(
        a.subscribe(CDS, &[]),
        Err(ClientError::TypeNotCarried),
        "a per-type stream carries one type"
    );
}

// ---------------------------------------------------------------- requests

#[test]
fn node_on_first_request_only_or_every_request() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    assert!(one(&mut c, t(1)).node.is_none());
    c.disconnected(t(2));
    c.connected(t(2));
    assert!(
        one(&mut c, t(2)).node.is_some(),
        "first request of the new stream"
    );

    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.node_on_every_request = true;
    let mut c = Client::new(cfg);
    c.subscribe(EDS, &["foo"]).unwrap();
    c.connected(t(0));
    assert!(one(&mut c, t(0)).node.is_some());
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    assert!(one(&mut c, t(1)).node.is_some());
}

#[test]
fn legacy_wildcard_then_names_then_explicit_star() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    check(&one(&mut c, t(0)), "", &[], "", false);
    c.subscribe(CDS, &["x"]).unwrap();
    check(&one(&mut c, t(1)), "", &["*", "x"], "", false);
    c.unsubscribe(CDS, &["x"]).unwrap();
    check(&one(&mut c, t(2)), "", &["*"], "", false);
    // On a new stream the lone wildcard is legacy again.
    c.disconnected(t(3));
    c.connected(t(3));
    check(&one(&mut c, t(3)), "", &[], "", false);
}

#[test]
fn legacy_wildcard_is_only_for_lds_and_cds() {
    let mut c = sotw_ads();
    assert_eq!(c.subscribe(EDS, &[]), Err(ClientError::EmptyName));
    assert_eq!(c.subscribe(EDS, &[""]), Err(ClientError::EmptyName));
    assert_eq!(c.subscribe("", &["a"]), Err(ClientError::EmptyTypeUrl));
    c.subscribe(LDS, &[]).unwrap();
}

#[test]
fn explicit_wildcard_with_names_accepts_everything() {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["*", "a"]).unwrap();
    c.connected(t(0));
    check(&one(&mut c, t(0)), "", &["*", "a"], "", false);
    c.handle_response(t(1), sotw(EDS, "1", "n", &[("a", "1"), ("zz", "1")]));
    assert_eq!(c.resource_names(EDS), ["a", "zz"]);
    c.unsubscribe(EDS, &["*"]).unwrap();
    check(&one(&mut c, t(2)), "1", &["a"], "n", false);
    assert_eq!(
        names_of(&events(&mut c)).last().unwrap(),
        "-zz:Unsubscribed"
    );
    assert_eq!(c.resource_names(EDS), ["a"]);
}

#[test]
fn unsubscribe_sends_the_new_full_list_and_drops_the_resource() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1"), ("bar", "1")]));
    one(&mut c, t(1));
    events(&mut c);
    c.unsubscribe(EDS, &["bar", "never"]).unwrap();
    check(&one(&mut c, t(2)), "X", &["foo"], "A", false);
    assert_eq!(names_of(&events(&mut c)), ["-bar:Unsubscribed"]);
    assert!(c.status(EDS, "bar").is_none());
    c.unsubscribe(EDS, &["foo"]).unwrap();
    check(&one(&mut c, t(3)), "X", &[], "A", false);
    // A response for a type whose last name was dropped is still ACKed, resources ignored.
    c.handle_response(t(4), sotw(EDS, "Y", "B", &[("foo", "2")]));
    check(&one(&mut c, t(4)), "Y", &[], "B", false);
    assert!(c.resource(EDS, "foo").is_none());
}

#[test]
fn subscribe_and_unsubscribe_before_sending_sends_nothing() {
    let mut c = eds_foo_bar();
    c.subscribe(EDS, &["baz"]).unwrap();
    c.unsubscribe(EDS, &["baz"]).unwrap();
    assert!(c.poll_request(t(1)).is_none());
}

// ---------------------------------------------------------------- protocol checks

#[test]
fn duplicate_names_are_nacked_without_state_change() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1"), ("foo", "2")]));
    let req = one(&mut c, t(1));
    check(&req, "", &["bar", "foo"], "A", true);
    assert!(req.error_detail.unwrap().message.contains("duplicate"));
    assert!(c.resource(EDS, "foo").is_none());
    let evs = events(&mut c);
    assert!(matches!(&evs[0], ClientEvent::Nacked { rejected, .. } if rejected.is_empty()));
}

#[test]
fn any_type_mismatch_is_nacked() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        sotw_raw(
            EDS,
            "X",
            "A",
            vec![any(EDS, "foo", "1"), any(CDS, "bar", "1")],
        ),
    );
    let req = one(&mut c, t(1));
    check(&req, "", &["bar", "foo"], "A", true);
    assert!(req.error_detail.unwrap().message.contains("type"));
    assert!(c.resource(EDS, "foo").is_none());
}

#[test]
fn unreadable_name_is_nacked() {
    let mut c = eds_foo_bar();
    let broken = xds_sansio::pb::google::protobuf::Any {
        type_url: EDS.into(),
        value: Bytes::from_static(&[0x0a, 9, b'x']),
    };
    c.handle_response(t(1), sotw_raw(EDS, "X", "A", vec![broken]));
    check(&one(&mut c, t(1)), "", &["bar", "foo"], "A", true);
}

#[test]
fn unrequested_resources_are_ignored_unless_wildcard() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1"), ("other", "1")]));
    check(&one(&mut c, t(1)), "X", &["bar", "foo"], "A", false);
    assert_eq!(c.resource_names(EDS), ["foo"]);
    let mut w = sotw_ads();
    w.subscribe(CDS, &[]).unwrap();
    w.connected(t(0));
    one(&mut w, t(0));
    w.handle_response(t(1), sotw(CDS, "1", "a", &[("x", "1"), ("y", "1")]));
    assert_eq!(w.resource_names(CDS), ["x", "y"]);
}

#[test]
fn response_for_never_subscribed_type_is_ignored_without_ack() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(CDS, "1", "a", &[("x", "1")]));
    assert!(c.poll_request(t(1)).is_none());
    let evs = events(&mut c);
    assert!(matches!(
        &evs[..],
        [ClientEvent::Ignored {
            reason: IgnoreReason::NeverSubscribed,
            ..
        }]
    ));
}

#[test]
fn wrong_variant_and_disconnected_responses_are_ignored() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), delta(EDS, "d", &[("foo", "1", "1")], &[]));
    c.disconnected(t(2));
    c.handle_response(t(2), sotw(EDS, "X", "A", &[("foo", "1")]));
    assert_eq!(
        names_of(&events(&mut c)),
        ["ignored:WrongVariant", "ignored:NotConnected"]
    );
    assert!(c.resource(EDS, "foo").is_none());
}

#[test]
fn per_type_stream_ignores_other_types_and_accepts_implicit_type() {
    let mut c = Client::new(config(Variant::Sotw, Transport::PerType(EDS.into())));
    c.subscribe(EDS, &["foo"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(CDS, "1", "a", &[("x", "1")]));
    assert_eq!(names_of(&events(&mut c)), ["ignored:NotCarried"]);
    // The singleton API may leave type_url empty.
    c.handle_response(t(1), sotw_raw("", "X", "A", vec![any(EDS, "foo", "1")]));
    check(&one(&mut c, t(1)), "X", &["foo"], "A", false);
}

// ---------------------------------------------------------------- cache events

#[test]
fn upsert_not_re_emitted_when_body_unchanged() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    events(&mut c);
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[("foo", "1")]));
    assert_eq!(names_of(&events(&mut c)), ["ack:Y/B"]);
    assert_eq!(c.resource(EDS, "foo").unwrap().version(), "Y");
    c.handle_response(t(3), sotw(EDS, "Z", "C", &[("foo", "2")]));
    assert_eq!(names_of(&events(&mut c)), ["+foo", "ack:Z/C"]);
}

#[test]
fn full_state_types_delete_what_is_absent_and_empty_removes_all() {
    let mut c = sotw_ads();
    c.subscribe(LDS, &[]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(
        t(1),
        sotw(LDS, "1", "a", &[("l1", "1"), ("l2", "1"), ("l3", "1")]),
    );
    events(&mut c);
    c.handle_response(t(2), sotw(LDS, "2", "b", &[("l2", "1")]));
    assert_eq!(
        names_of(&events(&mut c)),
        [
            "-l1:AbsentFromResponse",
            "-l3:AbsentFromResponse",
            "ack:2/b"
        ]
    );
    c.handle_response(t(3), sotw(LDS, "3", "c", &[]));
    assert_eq!(
        names_of(&events(&mut c)),
        ["-l2:AbsentFromResponse", "ack:3/c"]
    );
    assert!(c.resource_names(LDS).is_empty());
}

#[test]
fn full_state_absence_of_a_named_resource_means_it_does_not_exist() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &["a", "b"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(CDS, "1", "n1", &[("a", "1"), ("b", "1")]));
    events(&mut c);
    c.handle_response(t(2), sotw(CDS, "2", "n2", &[("a", "1")]));
    assert_eq!(
        names_of(&events(&mut c)),
        ["-b:AbsentFromResponse", "dne:b", "ack:2/n2"]
    );
    assert_eq!(
        c.status(CDS, "b").unwrap().state,
        ResourceState::DoesNotExist
    );
}

#[test]
fn empty_response_for_other_types_changes_nothing() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    events(&mut c);
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[]));
    assert_eq!(names_of(&events(&mut c)), ["ack:Y/B"]);
    assert!(c.resource(EDS, "foo").is_some());
}

#[test]
fn cached_bodies_are_copies_and_events_share_them() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    let resp = DiscoveryResponse {
        version_info: "1".into(),
        resources: vec![
            any(CDS, "a", "payload-a"),
            wrapped(CDS, "b", "7", Some("payload-b"), Some(30)),
        ],
        type_url: CDS.into(),
        nonce: "n".into(),
        ..DiscoveryResponse::default()
    };
    let wire = Bytes::from(resp.encode_to_vec());
    let decoded = DiscoveryResponse::decode(wire.clone()).unwrap();
    c.handle_response(t(1), Response::Sotw(decoded));
    let range = wire.as_ptr_range();
    let mut held = Vec::new();
    for name in ["a", "b"] {
        let cached = c.resource(CDS, name).unwrap();
        assert!(
            !range.contains(&cached.body().as_ptr()),
            "{name}: the cache keeps a copy, not a slice of the response"
        );
        assert!(!cached.body().is_empty());
        held.push(cached.body().as_ptr());
    }
    for ev in events(&mut c) {
        if let ClientEvent::Upserted { body, name, .. } = ev {
            assert!(
                held.contains(&body.as_ptr()),
                "an event shares the cache's copy"
            );
            assert!(
                range.contains(&name.as_bytes().as_ptr()) || name == "b",
                "SotW names are zero-copy"
            );
        }
    }
    assert!(
        wire.is_unique(),
        "nothing keeps the response's buffer alive"
    );
}

/// A record reads its name from the body it holds, a copy: no name or body keeps a
/// response's buffer alive once it is applied, and an unchanged body keeps the copy made
/// when it first came.
#[test]
fn names_live_in_the_copies_of_their_bodies() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    let wire = |version: &str, payload: &str| {
        let resp = DiscoveryResponse {
            version_info: version.into(),
            resources: vec![any(CDS, "a", payload), any(CDS, "b", "same")],
            type_url: CDS.into(),
            nonce: version.into(),
            ..DiscoveryResponse::default()
        };
        Bytes::from(resp.encode_to_vec())
    };
    let (first, second) = (wire("1", "one"), wire("2", "two"));
    c.handle_response(
        t(1),
        Response::Sotw(DiscoveryResponse::decode(first.clone()).unwrap()),
    );
    events(&mut c);
    let body_b = c.resource(CDS, "b").unwrap().body().as_ptr_range();
    c.handle_response(
        t(1),
        Response::Sotw(DiscoveryResponse::decode(second.clone()).unwrap()),
    );
    events(&mut c);
    let names = c.resource_names(CDS);
    let key = |n: &str| {
        names
            .iter()
            .find(|k| k.as_str() == n)
            .unwrap()
            .as_bytes()
            .as_ptr()
    };
    let body_a = c.resource(CDS, "a").unwrap().body().as_ptr_range();
    assert!(
        body_a.contains(&key("a")),
        "a: its name is read from its body"
    );
    assert_eq!(
        c.resource(CDS, "b").unwrap().body().as_ptr_range(),
        body_b,
        "b unchanged: the copy made from the first response"
    );
    assert!(body_b.contains(&key("b")));
    assert!(
        first.is_unique() && second.is_unique(),
        "no response buffer kept"
    );
}

// ---------------------------------------------------------------- wrappers and TTL

#[test]
fn wrapped_resources_are_unwrapped_with_their_version_and_ttl() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        sotw_raw(
            EDS,
            "X",
            "A",
            vec![wrapped(EDS, "foo", "v7", Some("1"), Some(10))],
        ),
    );
    check(&one(&mut c, t(1)), "X", &["bar", "foo"], "A", false);
    let r = c.resource(EDS, "foo").unwrap();
    assert_eq!(r.version(), "v7");
    assert_eq!(r.ttl(), Some(Duration::from_secs(10)));
    assert_eq!(*r.body(), body("foo", "1"));
    events(&mut c);
    assert_eq!(
        c.poll_timeout(),
        Some(t(11)),
        "TTL deadline before bar's 15 s timer"
    );
}

#[test]
fn heartbeat_refreshes_ttl_and_expiry_removes_and_sends_nothing() {
    ttl_story(false);
}

/// `sotw_refetch_on_ttl_expiry` (non-standard, envoy#15667): forget the version so the
/// server re-delivers.
#[test]
fn expiry_refetches_by_option() {
    ttl_story(true);
}

fn ttl_story(refetch: bool) {
    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.sotw_refetch_on_ttl_expiry = refetch;
    let mut c = Client::new(cfg);
    c.subscribe(EDS, &["foo", "bar"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(
        t(1),
        sotw_raw(
            EDS,
            "X",
            "A",
            vec![wrapped(EDS, "foo", "v7", Some("1"), Some(10))],
        ),
    );
    one(&mut c, t(1));
    events(&mut c);
    // Heartbeat at t=8: no body, same version -> TTL now ends at 18, no upsert.
    c.handle_response(
        t(8),
        sotw_raw(
            EDS,
            "X2",
            "B",
            vec![wrapped(EDS, "foo", "v7", None, Some(10))],
        ),
    );
    check(&one(&mut c, t(8)), "X2", &["bar", "foo"], "B", false);
    assert_eq!(names_of(&events(&mut c)), ["ack:X2/B"]);
    c.handle_timeout(t(11));
    assert!(
        c.resource(EDS, "foo").is_some(),
        "heartbeat moved the deadline"
    );
    // bar's does-not-exist timer fired at 15.
    c.handle_timeout(t(16));
    assert_eq!(names_of(&events(&mut c)), ["dne:bar", "ready"]);
    assert!(c.poll_request(t(16)).is_none());
    c.handle_timeout(t(18));
    assert_eq!(names_of(&events(&mut c)), ["-foo:Expired"]);
    assert_eq!(c.status(EDS, "foo").unwrap().state, ResourceState::Expired);
    if refetch {
        check(&one(&mut c, t(18)), "", &["bar", "foo"], "B", false);
        assert_eq!(c.version(EDS), Some(""));
    } else {
        // "the version_info received with the most recent successfully processed response"
        assert!(c.poll_request(t(18)).is_none(), "nothing to say");
        assert_eq!(c.version(EDS), Some("X2"));
    }
}

#[test]
fn resource_without_ttl_clears_the_timer() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        sotw_raw(
            EDS,
            "X",
            "A",
            vec![wrapped(EDS, "foo", "1", Some("1"), Some(5))],
        ),
    );
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[("foo", "2")]));
    c.handle_timeout(t(7));
    assert!(c.resource(EDS, "foo").is_some());
    assert_eq!(c.resource(EDS, "foo").unwrap().ttl(), None);
}

#[test]
fn negative_ttl_is_nacked() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        sotw_raw(
            EDS,
            "X",
            "A",
            vec![wrapped(EDS, "foo", "1", Some("1"), Some(-5))],
        ),
    );
    check(&one(&mut c, t(1)), "", &["bar", "foo"], "A", true);
}

// ---------------------------------------------------------------- does-not-exist timer

#[test]
fn dne_timer_starts_when_the_request_is_sent_not_when_subscribed() {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["foo"]).unwrap();
    assert_eq!(c.poll_timeout(), None, "no stream, no timer");
    c.connected(t(100));
    assert_eq!(c.poll_timeout(), Some(t(100)), "a request is queued");
    one(&mut c, t(105));
    assert_eq!(c.poll_timeout(), Some(t(120)));
    c.handle_timeout(t(119));
    assert!(events(&mut c).is_empty());
    c.handle_timeout(t(120));
    assert_eq!(names_of(&events(&mut c)), ["dne:foo", "ready"]);
    assert_eq!(
        c.status(EDS, "foo").unwrap().state,
        ResourceState::DoesNotExist
    );
    // Created later: accepted normally.
    c.handle_response(t(130), sotw(EDS, "X", "A", &[("foo", "1")]));
    assert_eq!(c.status(EDS, "foo").unwrap().state, ResourceState::Acked);
}

#[test]
fn dne_timer_cancelled_by_arrival_and_stopped_on_disconnect() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    one(&mut c, t(1));
    events(&mut c);
    assert_eq!(c.poll_timeout(), Some(t(15)), "bar still timed");
    c.disconnected(t(5));
    events(&mut c);
    assert_eq!(c.poll_timeout(), None, "stopped on disconnect");
    c.handle_timeout(t(30));
    assert!(events(&mut c).is_empty());
    // Next stream: restarted for bar only (foo is cached).
    c.connected(t(40));
    check(&one(&mut c, t(40)), "X", &["bar", "foo"], "", false);
    assert_eq!(c.poll_timeout(), Some(t(55)));
    c.handle_timeout(t(55));
    assert_eq!(names_of(&events(&mut c)), ["dne:bar", "ready"]);
}

#[test]
fn dne_timer_can_be_disabled() {
    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.does_not_exist_timeout = None;
    let mut c = Client::new(cfg);
    c.subscribe(EDS, &["foo"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn poll_timeout_is_now_while_output_is_queued() {
    let mut c = eds_foo_bar();
    c.handle_response(t(3), sotw(EDS, "X", "A", &[("foo", "1")]));
    assert_eq!(c.poll_timeout(), Some(t(3)));
    one(&mut c, t(3));
    assert_eq!(c.poll_timeout(), Some(t(3)), "events still queued");
    events(&mut c);
    assert_eq!(c.poll_timeout(), Some(t(15)));
}

// ---------------------------------------------------------------- reconnect

#[test]
fn reconnect_sends_last_accepted_version_without_nonce_and_keeps_cache() {
    let mut c = eds_foo_bar();
    c.set_validator(EDS, reject_bad());
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1"), ("bar", "1")]));
    one(&mut c, t(1));
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[("foo", "bad")]));
    check(&one(&mut c, t(2)), "X", &["bar", "foo"], "B", true);
    c.handle_response(t(3), sotw(EDS, "Z", "C", &[("foo", "bad")]));
    c.disconnected(t(4)); // the NACK of C is never sent on the next stream
    c.connected(t(5));
    let req = one(&mut c, t(5));
    check(&req, "X", &["bar", "foo"], "", false);
    assert!(req.node.is_some());
    assert_eq!(c.resource_names(EDS), ["bar", "foo"]);
    // The next request on this stream uses only this stream's nonces.
    c.subscribe(EDS, &["baz"]).unwrap();
    check(&one(&mut c, t(6)), "X", &["bar", "baz", "foo"], "", false);
}

// ---------------------------------------------------------------- readiness and status

#[test]
fn ready_once_every_initial_name_is_resolved() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    assert!(!names_of(&events(&mut c)).contains(&"ready".to_string()));
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[("bar", "1")]));
    assert_eq!(names_of(&events(&mut c)), ["+bar", "ack:Y/B", "ready"]);
    check(&one(&mut c, t(2)), "Y", &["bar", "foo"], "B", false);
    c.subscribe(EDS, &["late"]).unwrap();
    c.handle_timeout(t(100));
    one(&mut c, t(100));
    c.handle_timeout(t(200));
    assert_eq!(names_of(&events(&mut c)), ["dne:late"], "Ready fires once");
}

#[test]
fn wildcard_is_ready_after_the_first_response() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(CDS, "1", "a", &[]));
    assert_eq!(names_of(&events(&mut c)), ["ack:1/a", "ready"]);
}

#[test]
fn a_wildcard_added_to_a_ready_type_is_ready_again_after_the_next_response() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &["a"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(CDS, "1", "n1", &[("a", "1")]));
    assert_eq!(names_of(&events(&mut c)), ["+a", "ack:1/n1", "ready"]);
    one(&mut c, t(1));
    // The wildcard joins: the client holds the full state only after the next response.
    c.subscribe(CDS, &[]).unwrap();
    one(&mut c, t(2));
    assert!(!names_of(&events(&mut c)).contains(&"ready".to_string()));
    c.handle_response(t(3), sotw(CDS, "2", "n2", &[("a", "1"), ("b", "1")]));
    assert_eq!(names_of(&events(&mut c)), ["+b", "ack:2/n2", "ready"]);
    // A name added later does not fire it again.
    one(&mut c, t(3));
    c.subscribe(CDS, &["c"]).unwrap();
    c.handle_response(
        t(4),
        sotw(CDS, "3", "n3", &[("a", "1"), ("b", "1"), ("c", "1")]),
    );
    assert_eq!(names_of(&events(&mut c)), ["+c", "ack:3/n3"]);
}

#[test]
fn dump_is_sorted_and_matches_status() {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["b", "a"]).unwrap();
    c.subscribe(CDS, &["z"]).unwrap();
    c.connected(t(0));
    sotw_reqs(&mut c, t(0));
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("a", "1")]));
    let dump = c.dump();
    let rows: Vec<(String, String, ResourceState)> = dump
        .iter()
        .map(|e| (e.type_url.to_string(), e.name.to_string(), e.status.state))
        .collect();
    assert_eq!(
        rows,
        [
            (CDS.to_string(), "z".to_string(), ResourceState::Requested),
            (EDS.to_string(), "a".to_string(), ResourceState::Acked),
            (EDS.to_string(), "b".to_string(), ResourceState::Requested),
        ]
    );
    for e in &dump {
        assert_eq!(c.status(&e.type_url, &e.name).as_ref(), Some(&e.status));
    }
    assert_eq!(dump[1].status.version.as_deref(), Some("X"));
}

// ---------------------------------------------------------------- limits and NACK text

#[test]
fn limits_nack_without_state_change() {
    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.limits.max_resources_per_response = 2;
    cfg.limits.max_name_len = 8;
    cfg.limits.max_names_per_type = 3;
    let mut c = Client::new(cfg);
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(
        t(1),
        sotw(CDS, "1", "a", &[("x", "1"), ("y", "1"), ("z", "1")]),
    );
    let req = one(&mut c, t(1));
    check(&req, "", &[], "a", true);
    assert!(req.error_detail.unwrap().message.contains("limit"));
    c.handle_response(t(2), sotw(CDS, "2", "b", &[("very-long-name", "1")]));
    check(&one(&mut c, t(2)), "", &[], "b", true);
    assert!(c.resource_names(CDS).is_empty());
    assert_eq!(
        c.subscribe(EDS, &["123456789"]),
        Err(ClientError::LimitExceeded)
    );
    assert_eq!(
        c.subscribe(EDS, &["a", "b", "c", "d"]),
        Err(ClientError::LimitExceeded)
    );
    c.subscribe(EDS, &["a", "b", "c"]).unwrap();
}

#[test]
fn nack_message_is_capped_with_a_marker() {
    let mut c = eds_foo_bar();
    c.set_validator(
        EDS,
        Box::new(|_: &str, _: &str, _: &Bytes| Err("e".repeat(10_000))),
    );
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    let msg = one(&mut c, t(1)).error_detail.unwrap().message;
    assert!(msg.ends_with(TRUNCATION_MARKER));
    assert_eq!(msg.len(), MAX_ERROR_MESSAGE + TRUNCATION_MARKER.len());
}

// ---------------------------------------------------------------- validation

#[test]
fn keep_valid_policy_applies_the_valid_resources_and_still_nacks() {
    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.nack_policy = NackPolicy::KeepValid;
    let mut c = Client::new(cfg);
    c.subscribe(EDS, &["foo", "bar"]).unwrap();
    c.set_validator(EDS, reject_bad());
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1"), ("bar", "1")]));
    one(&mut c, t(1));
    events(&mut c);
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[("foo", "bad"), ("bar", "2")]));
    check(&one(&mut c, t(2)), "X", &["bar", "foo"], "B", true);
    assert_eq!(names_of(&events(&mut c)), ["+bar", "nack:Y/B"]);
    assert_eq!(*c.resource(EDS, "bar").unwrap().body(), body("bar", "2"));
    assert_eq!(
        *c.resource(EDS, "foo").unwrap().body(),
        body("foo", "1"),
        "previous value kept"
    );
    let st = c.status(EDS, "foo").unwrap();
    assert_eq!(st.state, ResourceState::Nacked);
    assert_eq!(st.version.as_deref(), Some("X"));
    assert_eq!(c.version(EDS), Some("X"));
}

#[test]
fn deferred_verdict_holds_requests_of_that_type_only() {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["foo"]).unwrap();
    c.subscribe(CDS, &["c"]).unwrap();
    c.set_deferred_validation(EDS, true);
    c.connected(t(0));
    sotw_reqs(&mut c, t(0));
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    let evs = events(&mut c);
    let ClientEvent::ValidationNeeded {
        ticket, resources, ..
    } = &evs[0]
    else {
        panic!("{evs:?}")
    };
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].name, "foo");
    assert!(
        c.poll_request(t(1)).is_none(),
        "no EDS request while the verdict is pending"
    );
    c.subscribe(EDS, &["bar"]).unwrap();
    assert!(c.poll_request(t(1)).is_none());
    // Other types flow.
    c.handle_response(t(1), sotw(CDS, "1", "c1", &[("c", "1")]));
    assert_eq!(one(&mut c, t(1)).type_url, CDS);
    // A second EDS response waits behind the verdict.
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[("foo", "2")]));
    c.verdict(*ticket, &[("foo", "nope")]).unwrap();
    let evs = events(&mut c);
    assert!(names_of(&evs).contains(&"nack:X/A".to_string()));
    let ClientEvent::ValidationNeeded { ticket: t2, .. } = evs.last().unwrap() else {
        panic!("{evs:?}")
    };
    check(&one(&mut c, t(2)), "", &["bar", "foo"], "A", true);
    c.verdict(*t2, &[]).unwrap();
    check(&one(&mut c, t(3)), "Y", &["bar", "foo"], "B", false);
    assert_eq!(c.verdict(*t2, &[]), Err(ClientError::UnknownTicket));
}

#[test]
fn a_broken_stream_voids_the_ticket() {
    let mut c = eds_foo_bar();
    c.set_deferred_validation(EDS, true);
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    let ClientEvent::ValidationNeeded { ticket, .. } = events(&mut c).remove(0) else {
        panic!()
    };
    c.disconnected(t(2));
    assert_eq!(c.verdict(ticket, &[]), Err(ClientError::UnknownTicket));
    assert!(c.resource(EDS, "foo").is_none());
    c.connected(t(3));
    check(&one(&mut c, t(3)), "", &["bar", "foo"], "", false);
}

#[test]
fn only_the_latest_response_is_answered_in_sotw() {
    // An answer to an older response would carry a stale nonce: only the latest goes out.
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1")]));
    c.handle_response(t(1), sotw(EDS, "Y", "B", &[("bar", "1")]));
    check(&one(&mut c, t(1)), "Y", &["bar", "foo"], "B", false);
}

#[test]
fn a_response_before_the_first_request_is_answered_by_it() {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["foo"]).unwrap();
    c.connected(t(0));
    c.handle_response(t(0), sotw(EDS, "X", "A", &[("foo", "1")]));
    check(&one(&mut c, t(0)), "X", &["foo"], "A", false);
}

#[test]
fn full_state_counts_heartbeats_and_kept_rejections_as_present() {
    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.nack_policy = NackPolicy::KeepValid;
    let mut c = Client::new(cfg);
    c.subscribe(CDS, &[]).unwrap();
    c.set_validator(CDS, reject_bad());
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(
        t(1),
        sotw_raw(
            CDS,
            "1",
            "a",
            vec![
                wrapped(CDS, "hb", "7", Some("1"), Some(100)),
                any(CDS, "kept", "1"),
                any(CDS, "gone", "1"),
                any(CDS, "same", "1"),
            ],
        ),
    );
    events(&mut c);
    c.handle_response(
        t(2),
        sotw_raw(
            CDS,
            "2",
            "b",
            vec![
                wrapped(CDS, "hb", "7", None, Some(100)),
                any(CDS, "kept", "bad"),
                any(CDS, "same", "1"),
            ],
        ),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["-gone:AbsentFromResponse", "nack:2/b"]
    );
    assert_eq!(c.resource_names(CDS), ["hb", "kept", "same"]);
    c.handle_response(t(3), sotw(CDS, "3", "c", &[("kept", "2")]));
    assert_eq!(
        names_of(&events(&mut c)),
        [
            "+kept",
            "-hb:AbsentFromResponse",
            "-same:AbsentFromResponse",
            "ack:3/c"
        ]
    );
}

#[test]
fn unsubscribing_while_a_verdict_is_pending_is_honoured() {
    let mut c = eds_foo_bar();
    c.set_deferred_validation(EDS, true);
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1"), ("bar", "1")]));
    let ClientEvent::ValidationNeeded { ticket, .. } = events(&mut c).remove(0) else {
        panic!()
    };
    c.unsubscribe(EDS, &["bar"]).unwrap();
    c.verdict(ticket, &[]).unwrap();
    assert_eq!(c.resource_names(EDS), ["foo"]);
    check(&one(&mut c, t(2)), "X", &["foo"], "A", false);
}

#[test]
fn interest_change_after_a_nack_carries_no_error() {
    let mut c = eds_foo_bar();
    c.set_validator(EDS, reject_bad());
    c.handle_response(t(1), sotw(EDS, "X", "A", &[("foo", "1"), ("bar", "1")]));
    one(&mut c, t(1));
    c.handle_response(t(2), sotw(EDS, "Y", "B", &[("foo", "bad")]));
    check(&one(&mut c, t(2)), "X", &["bar", "foo"], "B", true);
    c.subscribe(EDS, &["baz"]).unwrap();
    check(&one(&mut c, t(3)), "X", &["bar", "baz", "foo"], "B", false);
}

#[test]
fn client_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Client>();
    assert_send::<ClientEvent>();
}

#[test]
fn rejecting_every_resource_of_a_large_response_stays_linear() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.set_validator(
        CDS,
        Box::new(|_: &str, _: &str, _: &Bytes| Err("no".into())),
    );
    c.connected(t(0));
    one(&mut c, t(0));
    let names: Vec<String> = (0..20_000).map(|i| format!("c{i}")).collect();
    let res: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "x")).collect();
    let start = std::time::Instant::now();
    c.handle_response(t(1), sotw(CDS, "1", "a", &res));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "quadratic rejection handling"
    );
    let req = one(&mut c, t(1));
    assert!(req.error_detail.unwrap().message.len() <= MAX_ERROR_MESSAGE + TRUNCATION_MARKER.len());
    assert_eq!(
        c.status(CDS, "c19999").unwrap().state,
        ResourceState::Nacked
    );
    c.unsubscribe(CDS, &["*"]).unwrap();
    assert!(
        c.dump().is_empty(),
        "statuses kept only by the wildcard leave with it"
    );
}

// ---------------------------------------------------------------- resource_errors (xRFC TP3)

/// A SotW response carrying `resource_errors` as `(name, code, message)`.
fn with_errors(response: Response, errors: &[(&str, i32, &str)]) -> Response {
    let Response::Sotw(mut r) = response else {
        unreachable!()
    };
    r.resource_errors = errors
        .iter()
        .map(|(name, code, message)| resource_error(name, *code, message))
        .collect();
    Response::Sotw(r)
}

const NOT_FOUND: i32 = 5;
const PERMISSION_DENIED: i32 = 7;
const UNAVAILABLE: i32 = 14;

#[test]
fn resource_error_not_found_means_does_not_exist_at_once() {
    let mut c = eds_foo_bar();
    assert_eq!(c.poll_timeout(), Some(t(15)), "both names timed");
    c.handle_response(
        t(1),
        with_errors(
            sotw(EDS, "1", "A", &[("foo", "1")]),
            &[("bar", NOT_FOUND, "gone")],
        ),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["+foo", "dne:bar", "ack:1/A", "ready"],
        "no 15 s wait"
    );
    assert_eq!(c.poll_timeout(), Some(t(1)), "only the ACK is due");
    check(&one(&mut c, t(1)), "1", &["bar", "foo"], "A", false);
    assert_eq!(c.poll_timeout(), None, "the timer of bar was cancelled");
    assert_eq!(
        c.status(EDS, "bar").unwrap().state,
        ResourceState::DoesNotExist
    );
}

#[test]
fn resource_error_not_found_removes_a_held_resource() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), sotw(EDS, "1", "A", &[("foo", "1"), ("bar", "1")]));
    one(&mut c, t(1));
    events(&mut c);
    c.handle_response(
        t(2),
        with_errors(sotw(EDS, "2", "B", &[]), &[("foo", NOT_FOUND, "")]),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["-foo:ServerRemoved", "dne:foo", "ack:2/B"]
    );
    assert!(c.resource(EDS, "bar").is_some());
}

#[test]
fn transient_resource_error_keeps_what_is_held_and_is_remembered() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &["a", "b"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(CDS, "1", "n1", &[("a", "1"), ("b", "1")]));
    one(&mut c, t(1));
    events(&mut c);
    // b is absent from this full-state response, but the server says why: transient.
    c.handle_response(
        t(2),
        with_errors(
            sotw(CDS, "2", "n2", &[("a", "1")]),
            &[("b", UNAVAILABLE, "backend down")],
        ),
    );
    assert_eq!(names_of(&events(&mut c)), ["error:b:14", "ack:2/n2"]);
    assert!(c.resource(CDS, "b").is_some(), "TP3: MUST keep using it");
    let status = c.status(CDS, "b").unwrap();
    assert_eq!(status.state, ResourceState::ReceivedError);
    assert_eq!(status.version.as_deref(), Some("1"));
    let error = status.server_error.unwrap();
    assert_eq!((error.code, error.message.as_str()), (14, "backend down"));
    // Remembered: the next full-state response still without b keeps it too.
    c.handle_response(t(3), sotw(CDS, "3", "n3", &[("a", "1")]));
    assert_eq!(names_of(&events(&mut c)), ["ack:3/n3"]);
    assert!(c.resource(CDS, "b").is_some());
    // Until the resource comes back: the error is cleared.
    c.handle_response(t(4), sotw(CDS, "4", "n4", &[("a", "1"), ("b", "2")]));
    assert_eq!(names_of(&events(&mut c)), ["+b", "ack:4/n4"]);
    let status = c.status(CDS, "b").unwrap();
    assert_eq!(status.state, ResourceState::Acked);
    assert_eq!(status.server_error, None);
}

#[test]
fn resource_error_for_a_name_not_yet_received_ends_its_wait() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        with_errors(
            sotw(EDS, "1", "A", &[("foo", "1")]),
            &[
                ("bar", PERMISSION_DENIED, "not yours"),
                ("unwanted", UNAVAILABLE, ""),
            ],
        ),
    );
    let evs = events(&mut c);
    assert_eq!(names_of(&evs), ["+foo", "error:bar:7", "ack:1/A", "ready"]);
    assert!(evs.iter().any(|e| matches!(
        e,
        ClientEvent::ResourceError { message, .. } if message == "not yours"
    )));
    assert_eq!(c.status(EDS, "unwanted"), None, "not subscribed: ignored");
    one(&mut c, t(1));
    assert_eq!(c.poll_timeout(), None, "bar's timer cancelled");
    c.handle_timeout(t(60));
    assert!(events(&mut c).is_empty(), "no does-not-exist later");
}

#[test]
fn resource_error_for_the_wildcard_is_reported_for_the_type() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(
        t(1),
        with_errors(sotw(CDS, "1", "n1", &[]), &[("", UNAVAILABLE, "partial")]),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["error::14", "ack:1/n1", "ready"]
    );
    // NOT_FOUND for the collection is not a removal of everything.
    c.handle_response(t(2), sotw(CDS, "2", "n2", &[("a", "1")]));
    events(&mut c);
    c.handle_response(
        t(3),
        with_errors(sotw(CDS, "2", "n3", &[("a", "1")]), &[("*", NOT_FOUND, "")]),
    );
    assert_eq!(names_of(&events(&mut c)), ["error:*:5", "ack:2/n3"]);
    assert!(c.resource(CDS, "a").is_some());
}

#[test]
fn resource_errors_over_the_limit_are_a_nack() {
    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.limits.max_resources_per_response = 2;
    let mut c = Client::new(cfg);
    c.subscribe(EDS, &["foo"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(
        t(1),
        with_errors(
            sotw(EDS, "1", "A", &[]),
            &[("a", 14, ""), ("b", 14, ""), ("c", 14, "")],
        ),
    );
    let req = one(&mut c, t(1));
    assert!(req
        .error_detail
        .unwrap()
        .message
        .contains("resource errors"));
    assert_eq!(
        c.status(EDS, "foo").unwrap().state,
        ResourceState::Requested
    );
}

// ---------------------------------------------------------------- data errors (gRPC A88)

/// `foo` and `bar` held at version 1, under `data_errors`.
fn eds_held(data_errors: xds_sansio::client::DataErrors) -> Client {
    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.data_errors = data_errors;
    let mut c = Client::new(cfg);
    c.subscribe(EDS, &["foo", "bar"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw(EDS, "1", "A", &[("foo", "1"), ("bar", "1")]));
    events(&mut c);
    one(&mut c, t(1));
    c
}

/// A88 step 2 and 3: without `fail_on_data_errors` NOT_FOUND and PERMISSION_DENIED are
/// recorded (RECEIVED_ERROR) and the body stays.
#[test]
fn a88_keep_cached_data_errors_keep_the_body() {
    let mut c = eds_held(xds_sansio::client::DataErrors::KeepCached);
    c.handle_response(
        t(2),
        with_errors(
            sotw(EDS, "2", "B", &[]),
            &[("foo", NOT_FOUND, "gone"), ("bar", PERMISSION_DENIED, "no")],
        ),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["error:foo:5", "error:bar:7", "ack:2/B"]
    );
    for name in ["foo", "bar"] {
        let status = c.status(EDS, name).unwrap();
        assert_eq!(status.state, ResourceState::ReceivedError);
        assert!(c.resource(EDS, name).is_some(), "{name} still held");
    }
    assert_eq!(c.status(EDS, "foo").unwrap().server_error.unwrap().code, 5);
}

/// A88 step 3 with the feature: NOT_FOUND and PERMISSION_DENIED drop the body; a
/// transient code keeps it.
#[test]
fn a88_fail_on_data_errors_drops_only_on_data_errors() {
    let mut c = eds_held(xds_sansio::client::DataErrors::FailOnDataErrors);
    c.handle_response(
        t(2),
        with_errors(
            sotw(EDS, "2", "B", &[]),
            &[
                ("foo", PERMISSION_DENIED, "no"),
                ("bar", UNAVAILABLE, "later"),
            ],
        ),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        [
            "-foo:ServerRemoved",
            "error:foo:7",
            "error:bar:14",
            "ack:2/B"
        ]
    );
    assert!(c.resource(EDS, "foo").is_none());
    assert!(c.resource(EDS, "bar").is_some());
    assert_eq!(
        c.status(EDS, "foo").unwrap().state,
        ResourceState::ReceivedError
    );
}

/// A88, "Handling Data Errors": with the feature a NACK drops what is held of the
/// rejected resource; the NACK itself still carries the previous good version.
#[test]
fn a88_fail_on_data_errors_nack_drops_the_rejected_resource() {
    let mut c = eds_held(xds_sansio::client::DataErrors::FailOnDataErrors);
    c.set_validator(EDS, reject_bad());
    c.handle_response(t(2), sotw(EDS, "2", "B", &[("foo", "bad"), ("bar", "1")]));
    let evs = names_of(&events(&mut c));
    assert!(evs.contains(&"-foo:ServerRemoved".to_string()), "{evs:?}");
    check(&one(&mut c, t(2)), "1", &["bar", "foo"], "B", true);
    assert!(c.resource(EDS, "foo").is_none());
    assert!(c.resource(EDS, "bar").is_some());
    assert_eq!(c.status(EDS, "foo").unwrap().state, ResourceState::Nacked);
}

/// A88 ignores A53's option: under KeepCached a full-state deletion is kept even with it
/// off (status DoesNotExist), under FailOnDataErrors it drops even with it on.
#[test]
fn a88_deletion_follows_fail_on_data_errors_not_a53() {
    use xds_sansio::client::DataErrors;
    for (mode, a53, kept) in [
        (DataErrors::KeepCached, false, true),
        (DataErrors::FailOnDataErrors, true, false),
        (DataErrors::Legacy, false, false),
        (DataErrors::Legacy, true, true),
    ] {
        let mut cfg = config(Variant::Sotw, Transport::Aggregated);
        cfg.data_errors = mode;
        cfg.ignore_resource_deletion = a53;
        let mut c = Client::new(cfg);
        c.subscribe(CDS, &["a", "b"]).unwrap();
        c.connected(t(0));
        one(&mut c, t(0));
        c.handle_response(t(1), sotw(CDS, "1", "A", &[("a", "1"), ("b", "1")]));
        one(&mut c, t(1));
        events(&mut c);
        c.handle_response(t(2), sotw(CDS, "2", "B", &[("a", "1")]));
        one(&mut c, t(2));
        assert_eq!(c.resource(CDS, "b").is_some(), kept, "{mode:?} a53={a53}");
        if mode == DataErrors::KeepCached {
            assert_eq!(
                c.status(CDS, "b").unwrap().state,
                ResourceState::DoesNotExist
            );
        }
    }
}

/// A88 step 1 and 2 for a name never held: the timer stops, the status records the error,
/// no does-not-exist follows.
#[test]
fn a88_error_for_a_name_not_held_stops_its_timer() {
    let mut cfg = config(Variant::Sotw, Transport::Aggregated);
    cfg.data_errors = xds_sansio::client::DataErrors::KeepCached;
    let mut c = Client::new(cfg);
    c.subscribe(EDS, &["foo", "bar"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(
        t(1),
        with_errors(
            sotw(EDS, "1", "A", &[("foo", "1")]),
            &[("bar", NOT_FOUND, "gone")],
        ),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["+foo", "error:bar:5", "ack:1/A", "ready"]
    );
    one(&mut c, t(1));
    assert_eq!(c.poll_timeout(), None, "no timer left");
    assert_eq!(
        c.status(EDS, "bar").unwrap().state,
        ResourceState::ReceivedError
    );
}
