//! Exhaustive bounded model check of client × server × stream, by explicit-state search
//! over `testing::Pair` copies.
//!
//! The universe: CDS and EDS, two names each (`a`, `b`), all subscribed by the client;
//! the store starts at version 1 of each, and the application may, once each and in any
//! order: update CDS `a` to version 2, update EDS `b` to a body the client rejects, fix
//! EDS `b` afterwards, remove EDS `a`, break the stream (and reconnect later). Every
//! interleaving of those with the delivery of every message in flight, either direction
//! first, is explored; states are merged by fingerprint.
//!
//! Checked in every reachable state: the cache never holds a rejected body; every request
//! in flight names a nonce the server sent on the current stream (or none). Checked in
//! every quiescent state (stream up, nothing in flight): the cache equals the store
//! restricted to the subscription (the client keeps the valid resources of a rejected
//! response, gRPC A46), and both sides pass the conformance checker on the conversation
//! that led there. The numbers of states are printed (see the closing note of issue 7).

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::time::Duration;

use xds_sansio::client::{ClientConfig, NackPolicy};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceEntry, ServerConfig};
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Request, Transport, Variant};
use xds_sansio_conformance::check::{check, CheckSide};
use xds_sansio_conformance::script::render::body;
use xds_sansio_conformance::testing::{Pair, PairConfig};
use xds_sansio_conformance::transcript::Entry;

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;

/// The application's moves, each usable once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum App {
    UpdateCdsA,
    BreakEdsB,
    FixEdsB,
    RemoveEdsA,
    Break,
    Reconnect,
}

#[derive(Clone)]
struct State {
    pair: Pair,
    used: BTreeSet<App>,
}

fn bad(body: &[u8]) -> bool {
    body.windows(3).any(|w| w == b"bad")
}

fn initial(variant: Variant, tp3: bool) -> State {
    let transport = Transport::Aggregated;
    let mut client = ClientConfig::new(
        variant,
        transport.clone(),
        Node {
            id: "n".into(),
            ..Default::default()
        },
    );
    client.nack_policy = NackPolicy::KeepValid;
    client.does_not_exist_timeout = None;
    let mut pair = Pair::new(PairConfig {
        client,
        server: {
            let mut c = ServerConfig::new(variant, transport);
            c.sotw_not_found_errors = tp3;
            c
        },
        latency: Duration::ZERO,
    });
    for t in [CDS, EDS] {
        for n in ["a", "b"] {
            pair.store
                .set_entry(t, ResourceEntry::new(n, body(n, "1")))
                .unwrap();
            pair.record_store(t, n);
        }
        pair.client.set_validator(
            t,
            Box::new(|_: &str, _: &str, b: &bytes::Bytes| {
                if bad(b) {
                    Err("bad body".into())
                } else {
                    Ok(())
                }
            }),
        );
        pair.client.subscribe(t, &["a", "b"]).unwrap();
    }
    pair.collect();
    State {
        pair,
        used: BTreeSet::new(),
    }
}

fn app_moves(state: &State) -> Vec<App> {
    let broken = state.pair.server.is_none();
    [
        App::UpdateCdsA,
        App::BreakEdsB,
        App::FixEdsB,
        App::RemoveEdsA,
        App::Break,
        App::Reconnect,
    ]
    .into_iter()
    .filter(|m| !state.used.contains(m))
    .filter(|m| match m {
        App::FixEdsB => state.used.contains(&App::BreakEdsB),
        App::Break => !broken,
        App::Reconnect => broken,
        _ => true,
    })
    .collect()
}

fn apply(state: &mut State, m: App) {
    let pair = &mut state.pair;
    match m {
        App::UpdateCdsA => {
            pair.store
                .set_entry(CDS, ResourceEntry::new("a", body("a", "2")))
                .unwrap();
            pair.record_store(CDS, "a");
        }
        App::BreakEdsB => {
            pair.store
                .set_entry(EDS, ResourceEntry::new("b", body("b", "bad2")))
                .unwrap();
            pair.record_store(EDS, "b");
        }
        App::FixEdsB => {
            pair.store
                .set_entry(EDS, ResourceEntry::new("b", body("b", "3")))
                .unwrap();
            pair.record_store(EDS, "b");
        }
        App::RemoveEdsA => {
            pair.store.remove(EDS, "a");
            pair.record_store(EDS, "a");
        }
        App::Break => pair.break_stream(),
        App::Reconnect => pair.reconnect(),
    }
    state.used.insert(m);
    pair.collect();
}

/// Every request in flight names a nonce the server sent on the current stream.
fn nonces_ok(pair: &Pair) -> Result<(), String> {
    let stream = pair.stream();
    let sent: HashSet<(String, String)> = pair
        .server_view()
        .iter()
        .filter_map(|e| match e {
            Entry::Response {
                stream: s,
                response,
                ..
            } if *s == stream => Some((
                response.type_url().to_string(),
                response.nonce().to_string(),
            )),
            _ => None,
        })
        .collect();
    for e in pair.client_view().iter().rev().take(pair.in_flight()) {
        if let Entry::Request {
            stream: s, request, ..
        } = e
        {
            let nonce = match request {
                Request::Sotw(r) => &r.response_nonce,
                Request::Delta(r) => &r.response_nonce,
            };
            if *s == stream
                && !nonce.is_empty()
                && !sent.contains(&(request.type_url().to_string(), nonce.clone()))
            {
                return Err(format!(
                    "request names nonce {nonce:?}, never sent on stream {stream}"
                ));
            }
        }
    }
    Ok(())
}

/// `tp3`: the server reports SotW removals in `resource_errors`, so even SotW EDS (which
/// cannot say a removal otherwise) must drop what the store removed.
fn converged(pair: &Pair, variant: Variant, tp3: bool) -> Result<(), String> {
    for t in [CDS, EDS] {
        for n in ["a", "b"] {
            let stored = pair.store.get(t, n).map(|r| r.body().clone());
            let cached = pair.client.resource(t, n).map(|r| r.body_bytes());
            match (&stored, &cached) {
                (Some(s), c) if !bad(s) && c.as_ref() != Some(s) => {
                    return Err(format!("{t} {n}: cache differs from the store"))
                }
                (None, Some(_)) if tp3 || !(variant == Variant::Sotw && t == EDS) => {
                    return Err(format!("{t} {n}: removed but cached"))
                }
                _ => {}
            }
        }
    }
    for (side, view) in [
        (CheckSide::Client, pair.client_view()),
        (CheckSide::Server, pair.server_view()),
    ] {
        let violations = check(view, side);
        if !violations.is_empty() {
            return Err(format!("{side:?}: {violations:?}"));
        }
    }
    Ok(())
}

struct Outcome {
    states: usize,
    quiescent: usize,
    transitions: usize,
}

fn explore(variant: Variant, tp3: bool) -> Outcome {
    let start = initial(variant, tp3);
    let mut seen = HashSet::new();
    seen.insert((start.pair.fingerprint(), start.used.clone()));
    let mut queue = VecDeque::from([start]);
    let mut outcome = Outcome {
        states: 0,
        quiescent: 0,
        transitions: 0,
    };
    while let Some(state) = queue.pop_front() {
        outcome.states += 1;
        assert!(
            outcome.states < 3_000_000,
            "state space larger than the bound"
        );
        let fail = |what: String| {
            panic!(
                "{variant:?}: {what}\n--- how we got here ---\n{}",
                state.pair.notation()
            )
        };
        if let Some(c) = ["a", "b"]
            .iter()
            .find_map(|n| state.pair.client.resource(EDS, n).filter(|r| bad(r.body())))
        {
            let _ = c;
            fail("the cache holds a rejected body".into());
        }
        if let Err(e) = nonces_ok(&state.pair) {
            fail(e);
        }
        let quiescent = state.pair.server.is_some() && state.pair.in_flight() == 0;
        if quiescent {
            outcome.quiescent += 1;
            if let Err(e) = converged(&state.pair, variant, tp3) {
                fail(e);
            }
        }
        let mut successors = Vec::new();
        let mut to_server = state.clone();
        if to_server.pair.deliver_to_server() {
            successors.push(to_server);
        }
        let mut to_client = state.clone();
        if to_client.pair.deliver_to_client() {
            successors.push(to_client);
        }
        for m in app_moves(&state) {
            let mut next = state.clone();
            apply(&mut next, m);
            successors.push(next);
        }
        for next in successors {
            outcome.transitions += 1;
            if seen.insert((next.pair.fingerprint(), next.used.clone())) {
                queue.push_back(next);
            }
        }
    }
    outcome
}

#[test]
fn sotw_every_reachable_state_is_safe_and_every_quiescent_one_converged() {
    let o = explore(Variant::Sotw, false);
    eprintln!(
        "model check SotW ADS: {} states, {} quiescent, {} transitions",
        o.states, o.quiescent, o.transitions
    );
    assert!(o.states > 1000);
}

#[test]
fn delta_every_reachable_state_is_safe_and_every_quiescent_one_converged() {
    let o = explore(Variant::Delta, false);
    eprintln!(
        "model check delta ADS: {} states, {} quiescent, {} transitions",
        o.states, o.quiescent, o.transitions
    );
    assert!(o.states > 1000);
}

#[test]
fn sotw_with_not_found_errors_converges_on_removals_too() {
    let o = explore(Variant::Sotw, true);
    eprintln!(
        "model check SotW ADS, resource_errors NOT_FOUND on: {} states, {} quiescent, {} transitions",
        o.states, o.quiescent, o.transitions
    );
    assert!(o.states > 1000);
}
