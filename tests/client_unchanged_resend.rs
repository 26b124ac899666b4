//! A SotW response that brings again, in order, exactly the bodies held takes a fast path
//! (`client/cache/unchanged.rs`): it must leave the client exactly as the full path does.
//! The full path is forced on a twin client by an accept-all validator (a type with a
//! validator never takes the fast path); both get the same responses, and must answer,
//! tell and hold the same.

mod client_support;

use bytes::Bytes;
use client_support::*;
use quickcheck::{Arbitrary, Gen, QuickCheck};
use xds_sansio::client::{Client, EventShape, Validator};
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::{Transport, Variant};

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

#[derive(Clone, Debug)]
struct Step {
    /// Which names the response carries (a bit each).
    present: u8,
    /// Each name's body generation.
    generations: [u8; 6],
    /// 0: name order; 1: reversed; 2: rotated by one.
    order: u8,
    version: u8,
    /// Send the previous response again, byte for byte (only the nonce differs).
    resend: bool,
}

impl Arbitrary for Step {
    fn arbitrary(g: &mut Gen) -> Step {
        let mut generations = [0u8; 6];
        for x in &mut generations {
            *x = u8::arbitrary(g) % 2;
        }
        Step {
            present: u8::arbitrary(g) | if bool::arbitrary(g) { 0x3f } else { 0 },
            generations,
            order: u8::arbitrary(g) % 3,
            version: u8::arbitrary(g) % 3,
            resend: bool::arbitrary(g),
        }
    }
}

struct AcceptAll;

impl Validator for AcceptAll {
    fn validate(&self, _: &str, _: &str, _: &Bytes) -> Result<(), String> {
        Ok(())
    }
}

fn client(shape: EventShape, type_url: &str, full_path: bool) -> Client {
    let mut config = config(Variant::Sotw, Transport::Aggregated);
    config.event_shape = shape;
    let mut c = Client::new(config);
    if full_path {
        c.set_validator(type_url, Box::new(AcceptAll));
    }
    c.subscribe(type_url, &["*"]).unwrap();
    c.connected(t(0));
    while c.poll_request(t(0)).is_some() {}
    c
}

fn resources(step: &Step, type_url: &str) -> Vec<Any> {
    let mut out: Vec<Any> = NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| step.present & (1 << i) != 0)
        .map(|(i, n)| any(type_url, n, &step.generations[i].to_string()))
        .collect();
    match step.order {
        1 => out.reverse(),
        2 if !out.is_empty() => out.rotate_left(1),
        _ => {}
    }
    out
}

/// What a client says and holds after a response.
fn observe(c: &mut Client, type_url: &str) -> String {
    let requests = requests(c, t(1));
    let events = events(c);
    let held: Vec<_> = NAMES
        .iter()
        .map(|n| {
            (
                c.resource(type_url, n)
                    .map(|r| (r.version().to_string(), r.body_bytes())),
                c.status(type_url, n),
            )
        })
        .collect();
    format!(
        "{requests:?}\n{events:?}\n{held:?}\n{:?}",
        c.version(type_url)
    )
}

fn same_conversation(steps: Vec<Step>, batched: bool, full_state: bool) -> bool {
    let shape = if batched {
        EventShape::Batched
    } else {
        EventShape::PerResource
    };
    let type_url = if full_state { CDS } else { EDS };
    let mut fast = client(shape, type_url, false);
    let mut full = client(shape, type_url, true);
    let mut previous: Option<(String, Vec<Any>)> = None;
    for (i, step) in steps.iter().enumerate() {
        let (version, body) = match (&previous, step.resend) {
            (Some(p), true) => p.clone(),
            _ => (format!("v{}", step.version), resources(step, type_url)),
        };
        previous = Some((version.clone(), body.clone()));
        let nonce = format!("n{i}");
        for c in [&mut fast, &mut full] {
            c.handle_response(t(1), sotw_raw(type_url, &version, &nonce, body.clone()));
        }
        let (a, b) = (observe(&mut fast, type_url), observe(&mut full, type_url));
        if a != b {
            eprintln!("step {i}: fast path\n{a}\nfull path\n{b}");
            return false;
        }
    }
    true
}

#[test]
fn an_unchanged_resend_leaves_the_client_as_the_full_path_does() {
    QuickCheck::new().quickcheck(same_conversation as fn(Vec<Step>, bool, bool) -> bool);
}

#[test]
fn an_unchanged_resend_is_acked_and_tells_nothing_else() {
    let mut c = client(EventShape::Batched, CDS, false);
    let body = vec![any(CDS, "a", "1"), any(CDS, "b", "1")];
    c.handle_response(t(1), sotw_raw(CDS, "v1", "n1", body.clone()));
    observe(&mut c, CDS);
    c.handle_response(t(2), sotw_raw(CDS, "v2", "n2", body));
    let events = events(&mut c);
    assert!(
        matches!(&events[..], [xds_sansio::client::ClientEvent::Acked { version, nonce, .. }] if version.as_str() == "v2" && nonce.as_str() == "n2"),
        "{events:?}"
    );
    assert_eq!(c.resource(CDS, "a").map(|r| r.version()), Some("v2"));
    let requests = sotw_reqs(&mut c, t(2));
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].version_info, "v2");
    assert_eq!(requests[0].response_nonce, "n2");
}
