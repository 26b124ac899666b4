//! Resource errors the server publishes instead of bodies (xRFC TP3 `resource_errors`, as
//! gRPC A88 reads them): one test per rule of the `server` module docs, "Resource errors".

mod server_common;

use server_common::*;
use xds_sansio::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse};
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::server::{ResourceStore, ServerConfig, ServerStream, StreamSet, TYPE_WIDE};
use xds_sansio::{Response, Transport, Variant};

const NOT_FOUND: i32 = 5;
const PERMISSION_DENIED: i32 = 7;
const UNAVAILABLE: i32 = 14;

fn status(code: i32, message: &str) -> Status {
    Status {
        code,
        message: message.into(),
        details: vec![],
    }
}

fn stream(variant: Variant) -> ServerStream {
    ServerStream::new(ServerConfig::new(variant, Transport::Aggregated))
}

fn errors(r: &DiscoveryResponse) -> Vec<(String, i32)> {
    r.resource_errors
        .iter()
        .map(|e| {
            (
                e.resource_name.clone().unwrap().name,
                e.error_detail.clone().unwrap().code,
            )
        })
        .collect()
}

fn delta_errors(r: &DeltaDiscoveryResponse) -> Vec<(String, i32)> {
    r.resource_errors
        .iter()
        .map(|e| {
            (
                e.resource_name.clone().unwrap().name,
                e.error_detail.clone().unwrap().code,
            )
        })
        .collect()
}

fn e(name: &str, code: i32) -> (String, i32) {
    (name.to_string(), code)
}

#[test]
fn the_store_keeps_errors_apart_from_bodies() {
    let mut s = ResourceStore::new();
    s.set(EDS, "a", body("a", "1")).unwrap();
    let before = s.type_digest(EDS);
    let r = s.set_error(EDS, "a", status(NOT_FOUND, "gone")).unwrap();
    assert!(s.get(EDS, "a").is_none(), "an error replaces the body");
    assert_eq!(s.error(EDS, "a").unwrap().code, NOT_FOUND);
    assert_ne!(
        s.type_digest(EDS),
        before,
        "the error is part of the digest"
    );
    assert_eq!(
        s.set_error(EDS, "a", status(NOT_FOUND, "gone")).unwrap(),
        r,
        "the same error is a no-op"
    );
    s.set(EDS, "a", body("a", "2")).unwrap();
    assert!(s.error(EDS, "a").is_none(), "a body replaces the error");
    s.set_error(EDS, TYPE_WIDE, status(UNAVAILABLE, "down"))
        .unwrap();
    assert!(s.error(EDS, "a").is_none(), "a held name has no type error");
    assert_eq!(s.error(EDS, "zz").unwrap().code, UNAVAILABLE);
    assert!(s.clear_error(EDS, TYPE_WIDE).is_some());
    assert!(s.clear_error(EDS, TYPE_WIDE).is_none());
    assert!(s.error(EDS, "zz").is_none());
    assert!(s.set_error("", "a", status(5, "")).is_err());
    assert!(s.set_error(EDS, "", status(5, "")).is_err());
    assert!(s.is_served(CDS) || s.set_error(CDS, "c", status(5, "")).is_ok());
    assert!(s.is_served(CDS), "an error publishes its type");
}

#[test]
fn sotw_eds_error_is_said_once_and_replaced_by_a_body() {
    let mut store = ResourceStore::new();
    store.set(EDS, "a", body("a", "1")).unwrap();
    store
        .set_error(EDS, "b", status(PERMISSION_DENIED, "no"))
        .unwrap();
    let mut s = stream(Variant::Sotw);
    s.handle_request(T0, req(sotw(EDS, "", &["a", "b"], "")));
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["a"]);
    assert_eq!(errors(&r), [e("b", PERMISSION_DENIED)]);
    s.handle_request(T0, req(sotw(EDS, &r.version_info, &["a", "b"], &r.nonce)));
    assert!(drain(&mut s, T0, &store).is_empty(), "no identical resend");
    store.set(EDS, "b", body("b", "1")).unwrap();
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["b"]);
    assert!(r.resource_errors.is_empty());
}

#[test]
fn sotw_full_state_lists_the_error_and_versions_it() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    store.set(CDS, "b", body("b", "1")).unwrap();
    let mut s = stream(Variant::Sotw);
    s.handle_request(T0, req(sotw(CDS, "", &["a", "b"], "")));
    let r1 = one_sotw(drain(&mut s, T0, &store));
    s.handle_request(T0, req(sotw(CDS, &r1.version_info, &["a", "b"], &r1.nonce)));
    store
        .set_error(CDS, "b", status(NOT_FOUND, "gone"))
        .unwrap();
    let r2 = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r2), ["a"], "absent from the list");
    assert_eq!(errors(&r2), [e("b", NOT_FOUND)], "and its error listed");
    assert_ne!(r2.version_info, r1.version_info);
    s.handle_request(T0, req(sotw(CDS, &r2.version_info, &["a", "b"], &r2.nonce)));
    store.set(CDS, "a", body("a", "2")).unwrap();
    let r3 = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(
        errors(&r3),
        [e("b", NOT_FOUND)],
        "every full state lists it"
    );
}

#[test]
fn sotw_versions_agree_between_replicas() {
    let build = |order: bool| {
        let mut store = ResourceStore::new();
        if order {
            store.set(CDS, "a", body("a", "1")).unwrap();
            store.set_error(CDS, "b", status(NOT_FOUND, "x")).unwrap();
        } else {
            store.set_error(CDS, "b", status(NOT_FOUND, "x")).unwrap();
            store.set(CDS, "a", body("a", "1")).unwrap();
        }
        let mut s = stream(Variant::Sotw);
        s.handle_request(T0, req(sotw(CDS, "", &[], "")));
        one_sotw(drain(&mut s, T0, &store)).version_info
    };
    assert_eq!(build(true), build(false));
}

#[test]
fn type_error_reaches_named_subscribers_and_wildcards_once() {
    let mut store = ResourceStore::new();
    store.set(EDS, "a", body("a", "1")).unwrap();
    store
        .set_error(EDS, TYPE_WIDE, status(UNAVAILABLE, "down"))
        .unwrap();
    let mut named = stream(Variant::Sotw);
    named.handle_request(T0, req(sotw(EDS, "", &["a", "b"], "")));
    let r = one_sotw(drain(&mut named, T0, &store));
    assert_eq!(errors(&r), [e("b", UNAVAILABLE)]);
    let mut wild = stream(Variant::Delta);
    wild.handle_request(T0, dreq(delta(EDS, &["*"], &[], "")));
    let r = one_delta(drain(&mut wild, T0, &store));
    assert_eq!(delta_names(&r), ["a"]);
    assert_eq!(delta_errors(&r), [e("*", UNAVAILABLE)]);
}

#[test]
fn delta_error_replaces_a_held_body_without_a_removal() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    let mut s = stream(Variant::Delta);
    s.handle_request(T0, dreq(delta(CDS, &["a", "b"], &[], "")));
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(r.removed_resources, ["b"], "b does not exist yet");
    s.handle_request(T0, dreq(delta(CDS, &[], &[], &r.nonce)));
    store
        .set_error(CDS, "a", status(PERMISSION_DENIED, "no"))
        .unwrap();
    store
        .set_error(CDS, "b", status(NOT_FOUND, "gone"))
        .unwrap();
    let r = one_delta(drain(&mut s, T0, &store));
    assert!(r.resources.is_empty() && r.removed_resources.is_empty());
    assert_eq!(
        delta_errors(&r),
        [e("a", PERMISSION_DENIED), e("b", NOT_FOUND)]
    );
    s.handle_request(T0, dreq(delta(CDS, &[], &[], &r.nonce)));
    store
        .set_error(CDS, "b", status(NOT_FOUND, "gone"))
        .unwrap();
    assert!(drain(&mut s, T0, &store).is_empty(), "said once");
    store.clear_error(CDS, "b").unwrap();
    let r = one_delta(drain(&mut s, T0, &store));
    assert_eq!(r.removed_resources, ["b"], "cleared: b does not exist");
}

#[test]
fn stream_set_routes_errors_by_name_and_type() {
    let mut store = ResourceStore::new();
    store.serve_type(EDS).unwrap();
    let mut set = StreamSet::new();
    let a = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    let b = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    set.handle_request(a, T0, req(sotw(EDS, "", &["x"], "")))
        .unwrap();
    set.handle_request(b, T0, req(sotw(EDS, "", &["y"], "")))
        .unwrap();
    let drain_all = |set: &mut StreamSet, store: &ResourceStore| {
        let mut out = Vec::new();
        while let Some(id) = set.poll_ready() {
            while let Some(r) = set.poll_response(id, T0, store) {
                out.push((id, r));
            }
        }
        out
    };
    let first = drain_all(&mut set, &store);
    for (id, r) in &first {
        let Response::Sotw(r) = r else { panic!() };
        let names: &[&str] = if *id == a { &["x"] } else { &["y"] };
        set.handle_request(*id, T0, req(sotw(EDS, &r.version_info, names, &r.nonce)))
            .unwrap();
    }
    drain_all(&mut set, &store);
    store
        .set_error(EDS, "x", status(NOT_FOUND, "gone"))
        .unwrap();
    set.sync(&store);
    let out = drain_all(&mut set, &store);
    assert_eq!(out.len(), 1, "only the stream of x: {out:?}");
    assert_eq!(out[0].0, a);
    store
        .set_error(EDS, TYPE_WIDE, status(UNAVAILABLE, "down"))
        .unwrap();
    set.sync(&store);
    let out = drain_all(&mut set, &store);
    assert_eq!(
        out.len(),
        1,
        "y hears the type's error, x keeps its own: {out:?}"
    );
    assert_eq!(out[0].0, b);
}
