//! `ServerConfig::await_ack`: at most one response per type in flight. The next response
//! of a type waits for the client's answer (ACK or NACK) to the latest one and carries the
//! newest state; other types are not held by it; delta removals still wait for every
//! type's upserts.

mod server_common;

use server_common::*;
use xds_sansio::server::{ResourceStore, ServerConfig, ServerStream};
use xds_sansio::{Transport, Variant};

fn held(variant: Variant) -> ServerStream {
    ServerStream::new({
        let mut c = ServerConfig::new(variant, Transport::Aggregated);
        c.await_ack = true;
        c
    })
}

#[test]
fn sotw_the_next_response_of_a_type_waits_for_the_answer_and_carries_the_newest_state() {
    let mut store = ResourceStore::new();
    store.set(CDS, "c1", body("c1", "1")).unwrap();
    store.set(EDS, "c1", body("c1", "1")).unwrap();
    let mut s = held(Variant::Sotw);
    s.handle_request(T0, req(sotw(CDS, "", &[], "")));
    let first = one_sotw(drain(&mut s, T0, &store));
    store.set(CDS, "c1", body("c1", "2")).unwrap();
    store.set(CDS, "c1", body("c1", "3")).unwrap();
    assert!(drain(&mut s, T0, &store).is_empty(), "held until answered");
    assert_eq!(s.poll_timeout(), None, "no busy work while held");
    // Another type is not held by CDS.
    s.handle_request(T0, req(sotw(EDS, "", &["c1"], "")));
    let eds = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(eds.type_url, EDS);
    // The ACK releases CDS: one response, with the newest body only.
    s.handle_request(T0, req(sotw(CDS, &first.version_info, &[], &first.nonce)));
    let next = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(next.type_url, CDS);
    assert_eq!(next.resources.len(), 1);
    assert_eq!(next.resources[0].value, body("c1", "3"));
    // A NACK releases it too.
    store.set(CDS, "c1", body("c1", "4")).unwrap();
    assert!(drain(&mut s, T0, &store).is_empty());
    s.handle_request(
        T0,
        req(sotw_nack(CDS, &first.version_info, &[], &next.nonce)),
    );
    let after_nack = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(after_nack.resources[0].value, body("c1", "4"));
}

#[test]
fn delta_removals_wait_for_held_upserts_of_another_type() {
    let mut store = ResourceStore::new();
    store.set(CDS, "c1", body("c1", "1")).unwrap();
    store.set(EDS, "e1", body("e1", "1")).unwrap();
    let mut s = held(Variant::Delta);
    s.handle_request(T0, dreq(delta(CDS, &["*"], &[], "")));
    let cds = one_delta(drain(&mut s, T0, &store));
    s.handle_request(T0, dreq(delta(EDS, &["e1"], &[], "")));
    let eds = one_delta(drain(&mut s, T0, &store));
    s.handle_request(T0, dreq(delta(EDS, &[], &[], &eds.nonce)));
    // CDS changes while its response is unanswered; EDS loses e1.
    store.set(CDS, "c2", body("c2", "1")).unwrap();
    store.remove(EDS, "e1");
    assert!(
        drain(&mut s, T0, &store).is_empty(),
        "the EDS removal waits for the held CDS upsert (make before break)"
    );
    s.handle_request(T0, dreq(delta(CDS, &[], &[], &cds.nonce)));
    let out = drain(&mut s, T0, &store);
    assert_eq!(out.len(), 2, "{out:#?}");
    assert_eq!(out[0].type_url(), CDS);
    assert_eq!(out[1].type_url(), EDS);
}
