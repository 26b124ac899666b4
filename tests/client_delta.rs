//! Incremental client: the seed's session and reconnect examples, then one test per rule.

mod client_support;

use bytes::Bytes;
use client_support::*;
use std::collections::BTreeMap;
use std::time::Duration;
use xds_sansio::client::{Client, ClientError, ClientEvent, ResourceState};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource, ResourceError, ResourceName,
};
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::{Response, Transport, Variant};

#[track_caller]
fn check_delta(req: &DeltaDiscoveryRequest, sub: &[&str], unsub: &[&str], nonce: &str, nack: bool) {
    assert_eq!(req.resource_names_subscribe, sub, "subscribe of {req:#?}");
    assert_eq!(
        req.resource_names_unsubscribe, unsub,
        "unsubscribe of {req:#?}"
    );
    assert_eq!(req.response_nonce, nonce, "nonce of {req:#?}");
    assert_eq!(req.error_detail.is_some(), nack, "error_detail of {req:#?}");
}

fn versions(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn reject_bad() -> Box<dyn xds_sansio::client::Validator> {
    Box::new(|_: &str, _: &str, body: &Bytes| {
        if body.windows(3).any(|w| w == b"bad") {
            Err("bad payload".to_string())
        } else {
            Ok(())
        }
    })
}

fn eds_foo_bar() -> Client {
    let mut c = delta_ads();
    c.subscribe(EDS, &["foo", "bar"]).unwrap();
    c.connected(t(0));
    let req = one_delta(&mut c, t(0));
    check_delta(&req, &["bar", "foo"], &[], "", false);
    assert!(req.initial_resource_versions.is_empty());
    assert_eq!(req.node, Some(node()));
    assert_eq!(req.type_url, EDS);
    c
}

#[test]
fn seed_incremental_session_example() {
    let mut c = eds_foo_bar();
    c.set_validator(EDS, reject_bad());
    // First update: ACKed with its nonce only.
    c.handle_response(
        t(1),
        delta(EDS, "A", &[("foo", "1", "f1"), ("bar", "1", "b1")], &[]),
    );
    let ack = one_delta(&mut c, t(1));
    check_delta(&ack, &[], &[], "A", false);
    assert!(ack.node.is_none() && ack.initial_resource_versions.is_empty());
    assert_eq!(
        names_of(&events(&mut c)),
        ["+foo", "+bar", "ack:sys-A/A", "ready"]
    );
    // Second update fails: NACK = that nonce plus error_detail.
    c.handle_response(t(2), delta(EDS, "B", &[("foo", "2", "bad")], &[]));
    check_delta(&one_delta(&mut c, t(2)), &[], &[], "B", true);
    assert_eq!(names_of(&events(&mut c)), ["nack:sys-B/B"]);
    assert_eq!(c.resource(EDS, "foo").unwrap().version(), "1");
    // Spontaneous request for "wc": no nonce.
    c.subscribe(EDS, &["wc"]).unwrap();
    check_delta(&one_delta(&mut c, t(3)), &["wc"], &[], "", false);
    c.handle_response(t(4), delta(EDS, "C", &[("wc", "1", "w")], &[]));
    check_delta(&one_delta(&mut c, t(4)), &[], &[], "C", false);
    assert!(c.resource(EDS, "wc").is_some());
}

#[test]
fn seed_incremental_reconnect_example() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        delta(EDS, "A", &[("foo", "1", "f1"), ("bar", "7", "b1")], &[]),
    );
    one_delta(&mut c, t(1));
    c.disconnected(t(2));
    c.connected(t(3));
    let req = one_delta(&mut c, t(3));
    // Every name of interest, the versions held, no nonce, the node.
    check_delta(&req, &["bar", "foo"], &[], "", false);
    assert_eq!(
        req.initial_resource_versions,
        versions(&[("bar", "7"), ("foo", "1")])
    );
    assert!(req.node.is_some());
    // Nothing new: the server answers with what changed only.
    c.handle_response(t(4), delta(EDS, "B", &[("foo", "2", "f2")], &[]));
    check_delta(&one_delta(&mut c, t(4)), &[], &[], "B", false);
    assert_eq!(c.resource_names(EDS), ["bar", "foo"]);
}

#[test]
fn initial_resource_versions_leave_out_rejected_removed_and_expired() {
    let mut c = eds_foo_bar();
    c.subscribe(EDS, &["baz", "ttl"]).unwrap();
    c.set_validator(EDS, reject_bad());
    one_delta(&mut c, t(0));
    c.handle_response(
        t(1),
        delta(EDS, "A", &[("foo", "1", "f"), ("bar", "1", "b")], &[]),
    );
    c.handle_response(t(1), delta(EDS, "B", &[("baz", "1", "bad")], &[]));
    c.handle_response(t(1), delta(EDS, "C", &[], &["bar"]));
    let mut ttl = res(EDS, "ttl", "3", Some("t"));
    ttl.ttl = Some(prost_types::Duration {
        seconds: 5,
        nanos: 0,
    });
    c.handle_response(t(1), delta_raw(EDS, "D", vec![ttl], &[]));
    c.handle_timeout(t(6));
    c.disconnected(t(7));
    c.connected(t(7));
    let req = one_delta(&mut c, t(7));
    assert_eq!(req.initial_resource_versions, versions(&[("foo", "1")]));
    check_delta(&req, &["bar", "baz", "foo", "ttl"], &[], "", false);
}

#[test]
fn every_response_is_answered_on_its_own_in_order() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), delta(EDS, "A", &[("foo", "1", "f")], &[]));
    c.handle_response(t(1), delta(EDS, "B", &[("bar", "1", "b")], &[]));
    let reqs = delta_reqs(&mut c, t(1));
    assert_eq!(reqs.len(), 2);
    check_delta(&reqs[0], &[], &[], "A", false);
    check_delta(&reqs[1], &[], &[], "B", false);
}

#[test]
fn interest_changes_ride_on_the_next_ack() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), delta(EDS, "A", &[("foo", "1", "f")], &[]));
    c.subscribe(EDS, &["new"]).unwrap();
    c.unsubscribe(EDS, &["bar"]).unwrap();
    check_delta(&one_delta(&mut c, t(1)), &["new"], &["bar"], "A", false);
}

// ---------------------------------------------------------------- merging

#[test]
fn subscribe_then_unsubscribe_before_sending_cancels_out() {
    let mut c = eds_foo_bar();
    c.subscribe(EDS, &["x"]).unwrap();
    c.unsubscribe(EDS, &["x"]).unwrap();
    assert!(c.poll_request(t(1)).is_none());
}

#[test]
fn remove_then_add_still_subscribes() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), delta(EDS, "A", &[("foo", "1", "f")], &[]));
    one_delta(&mut c, t(1));
    events(&mut c);
    c.unsubscribe(EDS, &["foo"]).unwrap();
    assert_eq!(names_of(&events(&mut c)), ["-foo:Unsubscribed"]);
    c.subscribe(EDS, &["foo"]).unwrap();
    // The client dropped foo, so the server must send it again.
    check_delta(&one_delta(&mut c, t(2)), &["foo"], &[], "", false);
    assert!(c.resource(EDS, "foo").is_none());
}

#[test]
fn phantom_unsubscribes_send_nothing() {
    let mut c = eds_foo_bar();
    c.unsubscribe(EDS, &["never"]).unwrap();
    c.unsubscribe(CDS, &["never"]).unwrap();
    assert!(c.poll_request(t(1)).is_none());
}

// ---------------------------------------------------------------- wildcard

#[test]
fn legacy_wildcard_is_both_lists_empty() {
    let mut c = delta_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    check_delta(&one_delta(&mut c, t(0)), &[], &[], "", false);
    c.handle_response(
        t(1),
        delta(CDS, "A", &[("a", "1", "x"), ("b", "1", "y")], &[]),
    );
    one_delta(&mut c, t(1));
    assert_eq!(c.resource_names(CDS), ["a", "b"]);
    // Adding a name sends only that name: the server keeps the legacy wildcard, and
    // subscribing `*` again would make it resend every wildcard resource.
    c.subscribe(CDS, &["extra"]).unwrap();
    check_delta(&one_delta(&mut c, t(2)), &["extra"], &[], "", false);
    // Reconnect: wildcard re-sent.
    c.disconnected(t(3));
    c.connected(t(3));
    let req = one_delta(&mut c, t(3));
    check_delta(&req, &["*", "extra"], &[], "", false);
    assert_eq!(
        req.initial_resource_versions,
        versions(&[("a", "1"), ("b", "1")])
    );
}

#[test]
fn explicit_wildcard_subscribe_and_leave() {
    let mut c = delta_ads();
    c.subscribe(EDS, &["*"]).unwrap();
    c.connected(t(0));
    check_delta(&one_delta(&mut c, t(0)), &["*"], &[], "", false);
    c.handle_response(t(1), delta(EDS, "A", &[("a", "1", "x")], &[]));
    one_delta(&mut c, t(1));
    events(&mut c);
    c.unsubscribe(EDS, &["*"]).unwrap();
    check_delta(&one_delta(&mut c, t(2)), &[], &["*"], "", false);
    assert_eq!(names_of(&events(&mut c)), ["-a:Unsubscribed"]);
}

#[test]
fn unrequested_resources_are_ignored() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        delta(EDS, "A", &[("foo", "1", "f"), ("other", "1", "o")], &[]),
    );
    check_delta(&one_delta(&mut c, t(1)), &[], &[], "A", false);
    assert_eq!(c.resource_names(EDS), ["foo"]);
}

// ---------------------------------------------------------------- aliases

#[test]
fn alias_subscribe_and_unsubscribe() {
    let mut c = delta_ads();
    c.subscribe(EDS, &["alias-x"]).unwrap();
    c.connected(t(0));
    check_delta(&one_delta(&mut c, t(0)), &["alias-x"], &[], "", false);
    let mut r = res(EDS, "real", "1", Some("body"));
    r.aliases = vec!["alias-x".into()];
    c.handle_response(t(1), delta_raw(EDS, "A", vec![r], &[]));
    one_delta(&mut c, t(1));
    let evs = events(&mut c);
    assert!(matches!(
        &evs[0],
        ClientEvent::Upserted { name, aliases, .. } if name == "real" && aliases == &["alias-x"]
    ));
    assert_eq!(names_of(&evs)[1..], ["ack:sys-A/A", "ready"]);
    assert_eq!(c.resource(EDS, "alias-x").unwrap().version(), "1");
    assert_eq!(
        c.status(EDS, "alias-x").unwrap().state,
        ResourceState::Acked
    );
    events(&mut c);
    c.unsubscribe(EDS, &["alias-x"]).unwrap();
    check_delta(&one_delta(&mut c, t(2)), &[], &["alias-x"], "", false);
    assert_eq!(names_of(&events(&mut c)), ["-real:Unsubscribed"]);
    assert!(c.resource(EDS, "real").is_none());
    assert_eq!(
        c.poll_timeout(),
        None,
        "alias placeholder's timer was cancelled"
    );
}

// ---------------------------------------------------------------- removal and does-not-exist

#[test]
fn removed_resources_remove_and_mark_subscribed_names_dne() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        delta(EDS, "A", &[("foo", "1", "f"), ("bar", "1", "b")], &[]),
    );
    one_delta(&mut c, t(1));
    events(&mut c);
    c.handle_response(t(2), delta(EDS, "B", &[], &["foo", "never-held"]));
    check_delta(&one_delta(&mut c, t(2)), &[], &[], "B", false);
    assert_eq!(
        names_of(&events(&mut c)),
        ["-foo:ServerRemoved", "dne:foo", "ack:sys-B/B"]
    );
    assert_eq!(
        c.status(EDS, "foo").unwrap().state,
        ResourceState::DoesNotExist
    );
    assert!(c.status(EDS, "never-held").is_none());
}

#[test]
fn removed_resource_names_and_not_found_errors_remove_too() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        delta(EDS, "A", &[("foo", "1", "f"), ("bar", "1", "b")], &[]),
    );
    one_delta(&mut c, t(1));
    events(&mut c);
    c.handle_response(
        t(2),
        Response::Delta(DeltaDiscoveryResponse {
            type_url: EDS.into(),
            nonce: "B".into(),
            removed_resource_names: vec![ResourceName {
                name: "foo".into(),
                ..ResourceName::default()
            }],
            resource_errors: vec![ResourceError {
                resource_name: Some(ResourceName {
                    name: "bar".into(),
                    ..ResourceName::default()
                }),
                error_detail: Some(Status {
                    code: 5,
                    ..Status::default()
                }),
            }],
            ..DeltaDiscoveryResponse::default()
        }),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        [
            "-foo:ServerRemoved",
            "dne:foo",
            "-bar:ServerRemoved",
            "dne:bar",
            "ack:/B"
        ]
    );
}

#[test]
fn bodyless_resource_means_does_not_exist_unless_held_at_that_version() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), delta(EDS, "A", &[("foo", "1", "f")], &[]));
    one_delta(&mut c, t(1));
    events(&mut c);
    // bar: not held -> does not exist, right away (no timer wait).
    // foo: held at 1 -> heartbeat, nothing changes.
    c.handle_response(
        t(2),
        delta_raw(
            EDS,
            "B",
            vec![res(EDS, "bar", "", None), res(EDS, "foo", "1", None)],
            &[],
        ),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["dne:bar", "ack:sys-B/B", "ready"]
    );
    assert!(c.resource(EDS, "foo").is_some());
    // foo body-less at another version: it no longer exists.
    c.handle_response(
        t(3),
        delta_raw(EDS, "C", vec![res(EDS, "foo", "2", None)], &[]),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["-foo:ServerRemoved", "dne:foo", "ack:sys-C/C"]
    );
}

#[test]
fn dne_timer_still_runs_as_a_safety_net() {
    let mut c = eds_foo_bar();
    assert_eq!(c.poll_timeout(), Some(t(15)));
    c.handle_timeout(t(15));
    assert_eq!(names_of(&events(&mut c)), ["dne:bar", "dne:foo", "ready"]);
}

#[test]
fn resource_name_field_is_accepted() {
    let mut c = eds_foo_bar();
    let mut r = res(EDS, "", "1", Some("f"));
    r.resource_name = Some(ResourceName {
        name: "foo".into(),
        ..ResourceName::default()
    });
    c.handle_response(t(1), delta_raw(EDS, "A", vec![r], &[]));
    check_delta(&one_delta(&mut c, t(1)), &[], &[], "A", false);
    assert!(c.resource(EDS, "foo").is_some());
}

#[test]
fn duplicate_names_type_mismatch_and_nameless_are_nacked() {
    let mut c = eds_foo_bar();
    c.handle_response(
        t(1),
        delta(EDS, "A", &[("foo", "1", "f"), ("foo", "2", "g")], &[]),
    );
    check_delta(&one_delta(&mut c, t(1)), &[], &[], "A", true);
    let mut r = res(EDS, "foo", "1", Some("f"));
    r.resource.as_mut().unwrap().type_url = CDS.into();
    c.handle_response(t(2), delta_raw(EDS, "B", vec![r], &[]));
    check_delta(&one_delta(&mut c, t(2)), &[], &[], "B", true);
    c.handle_response(
        t(3),
        delta_raw(EDS, "C", vec![res(EDS, "", "1", Some("x"))], &[]),
    );
    check_delta(&one_delta(&mut c, t(3)), &[], &[], "C", true);
    assert!(c.resource_names(EDS).is_empty());
}

#[test]
fn system_version_info_is_kept_for_status_only() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), delta(EDS, "A", &[("foo", "1", "f")], &[]));
    assert_eq!(c.version(EDS), Some("sys-A"));
    assert_eq!(c.resource(EDS, "foo").unwrap().version(), "1");
}

// ---------------------------------------------------------------- TTL

#[test]
fn ttl_heartbeat_refreshes_and_expiry_removes_then_reconnect_omits_it() {
    let mut c = eds_foo_bar();
    let mut r = res(EDS, "foo", "1", Some("f"));
    r.ttl = Some(prost_types::Duration {
        seconds: 10,
        nanos: 0,
    });
    c.handle_response(t(1), delta_raw(EDS, "A", vec![r], &[]));
    one_delta(&mut c, t(1));
    events(&mut c);
    assert_eq!(
        c.resource(EDS, "foo").unwrap().ttl(),
        Some(Duration::from_secs(10))
    );
    // Heartbeat at 9: body-less, same version, new TTL.
    let mut hb = res(EDS, "foo", "1", None);
    hb.ttl = Some(prost_types::Duration {
        seconds: 10,
        nanos: 0,
    });
    c.handle_response(t(9), delta_raw(EDS, "B", vec![hb], &[]));
    one_delta(&mut c, t(9));
    assert_eq!(
        names_of(&events(&mut c)),
        ["ack:sys-B/B"],
        "no upsert, no DNE"
    );
    c.handle_timeout(t(15));
    assert_eq!(names_of(&events(&mut c)), ["dne:bar", "ready"]);
    assert!(c.resource(EDS, "foo").is_some(), "refreshed until 19");
    c.handle_timeout(t(19));
    assert_eq!(names_of(&events(&mut c)), ["-foo:Expired"]);
    assert_eq!(c.status(EDS, "foo").unwrap().state, ResourceState::Expired);
    // Ask again (the server must answer every subscribed name).
    check_delta(&one_delta(&mut c, t(19)), &["foo"], &[], "", false);
    c.disconnected(t(20));
    c.connected(t(20));
    let req = one_delta(&mut c, t(20));
    assert!(req.initial_resource_versions.is_empty());
    check_delta(&req, &["bar", "foo"], &[], "", false);
}

#[test]
fn resource_without_ttl_clears_it() {
    let mut c = eds_foo_bar();
    let mut r = res(EDS, "foo", "1", Some("f"));
    r.ttl = Some(prost_types::Duration {
        seconds: 3,
        nanos: 0,
    });
    c.handle_response(t(1), delta_raw(EDS, "A", vec![r], &[]));
    c.handle_response(t(2), delta(EDS, "B", &[("foo", "2", "g")], &[]));
    c.handle_timeout(t(5));
    assert!(c.resource(EDS, "foo").is_some());
}

// ---------------------------------------------------------------- validation, misc

#[test]
fn deferred_validation_works_the_same_in_delta() {
    let mut c = eds_foo_bar();
    c.set_deferred_validation(EDS, true);
    c.handle_response(
        t(1),
        delta(EDS, "A", &[("foo", "1", "f"), ("bar", "1", "b")], &[]),
    );
    let ClientEvent::ValidationNeeded {
        ticket, resources, ..
    } = events(&mut c).remove(0)
    else {
        panic!()
    };
    assert_eq!(resources.len(), 2);
    assert!(c.poll_request(t(1)).is_none());
    c.subscribe(EDS, &["later"]).unwrap();
    assert!(c.poll_request(t(1)).is_none());
    c.verdict(ticket, &[("bar", "no")]).unwrap();
    let nack = one_delta(&mut c, t(2));
    check_delta(&nack, &["later"], &[], "A", true);
    assert!(c.resource(EDS, "foo").is_none(), "reject-all");
}

#[test]
fn node_on_first_message_of_the_stream_only() {
    let mut c = delta_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.subscribe(EDS, &["a"]).unwrap();
    c.connected(t(0));
    let reqs = delta_reqs(&mut c, t(0));
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].type_url, CDS);
    assert!(reqs[0].node.is_some());
    assert!(reqs[1].node.is_none());
}

#[test]
fn per_type_delta_stream() {
    let mut c = Client::new(config(Variant::Delta, Transport::PerType(EDS.into())));
    assert_eq!(c.subscribe(CDS, &["a"]), Err(ClientError::TypeNotCarried));
    c.subscribe(EDS, &["a"]).unwrap();
    c.connected(t(0));
    check_delta(&one_delta(&mut c, t(0)), &["a"], &[], "", false);
    c.handle_response(t(1), delta(EDS, "A", &[("a", "1", "x")], &[]));
    check_delta(&one_delta(&mut c, t(1)), &[], &[], "A", false);
}

#[test]
fn cached_bodies_are_copied_out_of_the_delta_buffer() {
    use prost::Message;
    let mut c = eds_foo_bar();
    let resp = DeltaDiscoveryResponse {
        resources: vec![res(EDS, "foo", "1", Some("payload"))],
        type_url: EDS.into(),
        nonce: "A".into(),
        ..DeltaDiscoveryResponse::default()
    };
    let wire = Bytes::from(resp.encode_to_vec());
    c.handle_response(
        t(1),
        Response::Delta(DeltaDiscoveryResponse::decode(wire.clone()).unwrap()),
    );
    let body = c.resource(EDS, "foo").unwrap().body();
    assert!(body.ends_with(b"payload"));
    assert!(!wire.as_ptr_range().contains(&body.as_ptr()), "a copy");
    // Neither the cache nor its events keep the response's buffer alive.
    assert!(wire.is_unique());
    let _ = Resource::default();
}

#[test]
fn incremental_ads_keeps_types_walled_off() {
    let mut c = delta_ads();
    c.subscribe(CDS, &["*"]).unwrap();
    c.subscribe(EDS, &["foo"]).unwrap();
    c.set_validator(EDS, reject_bad());
    c.connected(t(0));
    assert_eq!(delta_reqs(&mut c, t(0)).len(), 2);
    c.handle_response(t(1), delta(CDS, "c1", &[("foo", "1", "c")], &[]));
    c.handle_response(t(1), delta(EDS, "e1", &[("foo", "1", "bad")], &[]));
    c.handle_response(t(1), delta(CDS, "c2", &[("bar", "1", "c")], &[]));
    let reqs = delta_reqs(&mut c, t(1));
    let seen: Vec<(&str, &str, bool)> = reqs
        .iter()
        .map(|r| {
            (
                r.type_url.as_str(),
                r.response_nonce.as_str(),
                r.error_detail.is_some(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [(CDS, "c1", false), (EDS, "e1", true), (CDS, "c2", false)]
    );
    assert_eq!(c.resource_names(CDS), ["bar", "foo"]);
    assert!(c.resource_names(EDS).is_empty());
}

#[test]
fn other_resource_errors_keep_the_resource_and_are_reported() {
    let mut c = eds_foo_bar();
    c.handle_response(t(1), delta(EDS, "A", &[("foo", "1", "f")], &[]));
    one_delta(&mut c, t(1));
    events(&mut c);
    c.handle_response(
        t(2),
        Response::Delta(DeltaDiscoveryResponse {
            type_url: EDS.into(),
            nonce: "B".into(),
            resource_errors: ["foo", "bar"]
                .iter()
                .map(|n| resource_error(n, 14, "control plane overloaded"))
                .collect(),
            ..DeltaDiscoveryResponse::default()
        }),
    );
    assert_eq!(
        names_of(&events(&mut c)),
        ["error:foo:14", "error:bar:14", "ack:/B", "ready"]
    );
    assert!(
        c.resource(EDS, "foo").is_some(),
        "xRFC TP3: transient, kept"
    );
    assert_eq!(
        c.status(EDS, "bar").unwrap().state,
        ResourceState::ReceivedError
    );
    one_delta(&mut c, t(2));
    assert_eq!(
        c.poll_timeout(),
        None,
        "bar's does-not-exist timer cancelled"
    );
}

#[test]
fn an_expired_wildcard_only_resource_is_asked_for_by_name_until_the_wildcard_goes() {
    let mut c = delta_ads();
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    check_delta(&one_delta(&mut c, t(0)), &[], &[], "", false);
    let mut r = res(CDS, "w", "1", Some("w"));
    r.ttl = Some(prost_types::Duration {
        seconds: 10,
        nanos: 0,
    });
    c.handle_response(t(1), delta_raw(CDS, "A", vec![r], &[]));
    one_delta(&mut c, t(1));
    events(&mut c);
    c.handle_timeout(t(11));
    assert_eq!(names_of(&events(&mut c)), ["-w:Expired"]);
    // w is asked for by name (the server keeps the legacy wildcard).
    check_delta(&one_delta(&mut c, t(11)), &["w"], &[], "", false);
    c.handle_response(t(12), delta(CDS, "B", &[("w", "1", "w")], &[]));
    assert_eq!(names_of(&events(&mut c)), ["+w", "ack:sys-B/B"]);
    one_delta(&mut c, t(12));
    // The application's interest did not change: dropping the wildcard drops w too.
    c.unsubscribe(CDS, &["*"]).unwrap();
    check_delta(&one_delta(&mut c, t(13)), &[], &["*", "w"], "", false);
}

#[test]
fn a_wildcard_added_to_a_ready_type_is_ready_again_after_the_next_response() {
    let mut c = delta_ads();
    c.subscribe(CDS, &["a"]).unwrap();
    c.connected(t(0));
    one_delta(&mut c, t(0));
    c.handle_response(t(1), delta(CDS, "A", &[("a", "1", "p")], &[]));
    let evs = names_of(&events(&mut c));
    assert_eq!(
        (evs.first(), evs.last()),
        (Some(&"+a".into()), Some(&"ready".into()))
    );
    one_delta(&mut c, t(1));
    // The wildcard joins: the client holds the full state only after the next response.
    c.subscribe(CDS, &[]).unwrap();
    one_delta(&mut c, t(2));
    assert!(!names_of(&events(&mut c)).contains(&"ready".to_string()));
    c.handle_response(t(3), delta(CDS, "B", &[("b", "1", "p")], &[]));
    let evs = names_of(&events(&mut c));
    assert_eq!(
        (evs.first(), evs.last()),
        (Some(&"+b".into()), Some(&"ready".into()))
    );
    assert_eq!(evs.iter().filter(|e| *e == "ready").count(), 1, "{evs:?}");
    // A name added later does not fire it again.
    one_delta(&mut c, t(3));
    c.subscribe(CDS, &["c"]).unwrap();
    one_delta(&mut c, t(4));
    c.handle_response(t(5), delta(CDS, "C", &[("c", "1", "p")], &[]));
    assert!(!names_of(&events(&mut c)).contains(&"ready".to_string()));
}
