//! The client rules an independent conformance run found broken, at the API: the defects
//! are values an application matches, misuse is a typed error, the control plane is in
//! the dump. (Each rule also has its scenario under `scenarios/client/`.)

mod client_support;

use client_support::*;
use xds_sansio::client::{At, ClientError, ClientEvent, ResponseDefect};
use xds_sansio::name::NameParseError;
use xds_sansio::pb::envoy::config::core::v3::ControlPlane;
use xds_sansio::Response;

fn defect_of(events: &[ClientEvent]) -> Option<ResponseDefect> {
    events.iter().find_map(|e| match e {
        ClientEvent::Nacked { defect, .. } => defect.clone(),
        _ => None,
    })
}

#[test]
fn delta_duplicates_across_resources_and_removals_are_a_defect() {
    let mut c = delta_ads();
    c.subscribe(CDS, &["a", "b"]).unwrap();
    c.connected(t(0));
    one_delta(&mut c, t(0));
    c.handle_response(t(1), delta(CDS, "A", &[("a", "1", "x")], &["a"]));
    let evs = events(&mut c);
    assert_eq!(
        defect_of(&evs),
        Some(ResponseDefect::DuplicateName("a".into()))
    );
    assert!(c.resource(CDS, "a").is_none(), "nothing applied");
    let nack = one_delta(&mut c, t(1));
    assert_eq!(
        nack.error_detail.unwrap().message,
        "duplicate resource name \"a\""
    );
    c.handle_response(t(2), delta(CDS, "B", &[], &["b", "b"]));
    assert_eq!(
        defect_of(&events(&mut c)),
        Some(ResponseDefect::DuplicateName("b".into()))
    );
}

#[test]
fn a_type_mismatch_names_the_resource() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &["a"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(t(1), sotw_raw(CDS, "1", "A", vec![any(EDS, "a", "x")]));
    match defect_of(&events(&mut c)) {
        Some(ResponseDefect::TypeMismatch {
            at, found, wrapped, ..
        }) => {
            assert_eq!(at, At::Index(0));
            assert_eq!(found, EDS);
            assert!(!wrapped);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bodyless_wrapper_at_another_version_is_a_defect() {
    let mut c = sotw_ads();
    c.subscribe(EDS, &["a"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    c.handle_response(
        t(1),
        sotw_raw(
            EDS,
            "1",
            "A",
            vec![wrapped(EDS, "a", "1", Some("x"), Some(10))],
        ),
    );
    one(&mut c, t(1));
    events(&mut c);
    c.handle_response(
        t(2),
        sotw_raw(EDS, "2", "B", vec![wrapped(EDS, "a", "2", None, Some(10))]),
    );
    assert_eq!(
        defect_of(&events(&mut c)),
        Some(ResponseDefect::BodylessAtOtherVersion {
            name: "a".into(),
            version: "2".into()
        })
    );
    check(&one(&mut c, t(2)), "1", &["a"], "B", true);
    assert_eq!(c.resource(EDS, "a").unwrap().version(), "1");
}

#[test]
fn xdstp_names_are_canonical_and_malformed_ones_refused() {
    let mut c = sotw_ads();
    assert!(matches!(
        c.subscribe(CDS, &["xdstp://auth"]),
        Err(ClientError::MalformedXdstpName(
            NameParseError::MissingResourceType
        ))
    ));
    let name = "xdstp://a/envoy.config.cluster.v3.Cluster/x?b=2&a=1";
    let canonical = "xdstp://a/envoy.config.cluster.v3.Cluster/x?a=1&b=2";
    c.subscribe(CDS, &[name]).unwrap();
    c.connected(t(0));
    check(&one(&mut c, t(0)), "", &[canonical], "", false);
    c.handle_response(t(1), sotw(CDS, "1", "A", &[(name, "x")]));
    assert!(c.resource(CDS, name).is_some(), "looked up in any form");
    assert_eq!(c.resource_names(CDS), [canonical]);
    c.unsubscribe(CDS, &[name]).unwrap();
    assert!(c.resource_names(CDS).is_empty());
}

#[test]
fn the_control_plane_is_in_the_dump() {
    let mut c = sotw_ads();
    c.subscribe(CDS, &["a"]).unwrap();
    c.connected(t(0));
    one(&mut c, t(0));
    let Response::Sotw(mut r) = sotw(CDS, "1", "A", &[("a", "x")]) else {
        unreachable!()
    };
    r.control_plane = Some(ControlPlane {
        identifier: "cp-1".into(),
    });
    c.handle_response(t(1), Response::Sotw(r));
    assert_eq!(c.control_plane(CDS), Some("cp-1"));
    let dump = c.dump();
    assert_eq!(dump.len(), 1);
    assert_eq!(dump[0].control_plane.as_deref(), Some("cp-1"));
}
