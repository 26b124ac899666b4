//! Model-based properties over generated operation sequences (subscribe, unsubscribe,
//! store set and remove, rejected bodies, time passing, stream breaks, partial delivery),
//! for SotW and delta, ADS and per-type, driven through the simulated pair. A failure
//! prints the shrunk operation sequence and its transcript in the scenario notation.
//!
//! `QUICKCHECK_TESTS` sets the number of cases (scripts/test.sh: 10 000).

use std::collections::BTreeMap;
use std::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use xds_sansio::client::{ClientConfig, ClientEvent, NackPolicy};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceEntry, ServerConfig};
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Instant, Transport, Variant};
use xds_sansio_conformance::check::{check, CheckSide};
use xds_sansio_conformance::script::render::{body, ScenarioBody};
use xds_sansio_conformance::testing::{Pair, PairConfig};

const TYPES: [&str; 2] = [CLUSTER.type_url, ENDPOINT.type_url];
const NAMES: [&str; 3] = ["a", "b", "c"];
const LATENCY: Duration = Duration::from_millis(10);

#[derive(Clone, Debug)]
enum Op {
    Subscribe(usize, usize),
    Unsubscribe(usize, usize),
    /// A new body; `true`: one the client rejects.
    Set(usize, usize, bool),
    Remove(usize, usize),
    Wait(u64),
    /// The stream breaks and comes back after a pause.
    Break(u64),
    /// Deliver a few messages only, leaving others in flight.
    Step(u8),
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let t = usize::arbitrary(g) % TYPES.len();
        let n = usize::arbitrary(g) % NAMES.len();
        match u8::arbitrary(g) % 16 {
            0..=3 => Op::Subscribe(t, n),
            4 => Op::Unsubscribe(t, n),
            5..=8 => Op::Set(t, n, u8::arbitrary(g) % 4 == 0),
            9 => Op::Remove(t, n),
            10..=11 => Op::Wait(u64::arbitrary(g) % 20),
            12 => Op::Break(u64::arbitrary(g) % 30),
            _ => Op::Step(u8::arbitrary(g) % 4),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Op>> {
        match *self {
            Op::Wait(s) if s > 0 => Box::new([Op::Wait(s / 2)].into_iter()),
            Op::Break(s) if s > 0 => Box::new([Op::Break(s / 2)].into_iter()),
            Op::Set(t, n, true) => Box::new([Op::Set(t, n, false)].into_iter()),
            _ => Box::new(std::iter::empty()),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Setup {
    variant: Variant,
    /// ADS, or a per-type stream for `TYPES[0]`.
    ads: bool,
    /// SotW: the server reports absent names in `resource_errors` (xRFC TP3).
    not_found_errors: bool,
}

impl Arbitrary for Setup {
    fn arbitrary(g: &mut Gen) -> Setup {
        Setup {
            variant: if bool::arbitrary(g) {
                Variant::Sotw
            } else {
                Variant::Delta
            },
            ads: bool::arbitrary(g),
            not_found_errors: bool::arbitrary(g),
        }
    }
}

/// What the test knows independently of the state machines.
struct World {
    pair: Pair,
    setup: Setup,
    subscribed: BTreeMap<usize, Vec<usize>>,
    seq: u64,
    /// When each (type, name) appeared in or left the store (`true`: present), to judge
    /// does-not-exist.
    history: BTreeMap<(usize, usize), Vec<(Instant, bool)>>,
    /// The highest sequence upserted per (type, name).
    upserted: BTreeMap<(String, String), u64>,
    failures: Vec<String>,
}

fn seq_of(bytes: &[u8]) -> Option<(u64, bool)> {
    use prost::Message;
    let body = ScenarioBody::decode(bytes).ok()?;
    match body.tag.strip_prefix("bad") {
        Some(n) => n.parse().ok().map(|s| (s, true)),
        None => body.tag.parse().ok().map(|s| (s, false)),
    }
}

impl World {
    fn new(setup: Setup) -> World {
        let transport = if setup.ads {
            Transport::Aggregated
        } else {
            Transport::PerType(TYPES[0].into())
        };
        let mut client = ClientConfig::new(
            setup.variant,
            transport.clone(),
            Node {
                id: "n".into(),
                ..Default::default()
            },
        );
        client.nack_policy = NackPolicy::KeepValid;
        let mut pair = Pair::new(PairConfig {
            client,
            server: {
                let mut c = ServerConfig::new(setup.variant, transport);
                c.sotw_not_found_errors = setup.not_found_errors;
                c
            },
            latency: LATENCY,
        });
        for t in TYPES {
            pair.client.set_validator(
                t,
                Box::new(|_: &str, _: &str, b: &bytes::Bytes| match seq_of(b) {
                    Some((_, true)) => Err("bad body".to_string()),
                    _ => Ok(()),
                }),
            );
        }
        World {
            pair,
            setup,
            subscribed: BTreeMap::new(),
            seq: 0,
            history: BTreeMap::new(),
            upserted: BTreeMap::new(),
            failures: Vec::new(),
        }
    }

    fn types(&self) -> usize {
        if self.setup.ads {
            TYPES.len()
        } else {
            1
        }
    }

    /// Checks the events since the last call.
    fn observe(&mut self) {
        for (at, event) in self.pair.take_client_events() {
            match event {
                ClientEvent::Upserted {
                    type_url,
                    name,
                    body,
                    ..
                } => {
                    if let Some((seq, bad)) = seq_of(&body) {
                        if bad {
                            self.failures
                                .push(format!("a rejected body of {} was applied", name.as_str()));
                        }
                        let key = (type_url.as_str().to_string(), name.as_str().to_string());
                        let last = self.upserted.entry(key).or_insert(0);
                        if seq < *last {
                            self.failures.push(format!(
                                "{} went back from body {last} to {seq}",
                                name.as_str()
                            ));
                        }
                        *last = seq;
                    }
                }
                ClientEvent::DoesNotExist { type_url, name } => {
                    let t = TYPES
                        .iter()
                        .position(|u| *u == type_url.as_str())
                        .unwrap_or(0);
                    let n = NAMES.iter().position(|u| *u == name.as_str()).unwrap_or(0);
                    // Valid only if the name was absent (or held a rejected body) at some
                    // instant within two latencies before the event: a server's answer
                    // takes one latency to arrive.
                    let changes = self.history.get(&(t, n)).cloned().unwrap_or_default();
                    let from = Instant::from_nanos(
                        at.as_nanos().saturating_sub(2 * LATENCY.as_nanos() as u64),
                    );
                    let present_at_from = changes
                        .iter()
                        .rev()
                        .find(|(when, _)| *when <= from)
                        .is_some_and(|(_, present)| *present);
                    let left_since = changes
                        .iter()
                        .any(|(when, present)| *when > from && *when <= at && !present);
                    // SotW full-state types are exempt: a response that answers a request
                    // crossing a newer subscription legitimately omits a name, and the
                    // client must read the omission as deletion (xDS protocol, "Deleting
                    // Resources"). The end state is checked instead (`check_convergence`).
                    let full_state_sotw = self.setup.variant == Variant::Sotw && t == 0;
                    if present_at_from && !left_since && !full_state_sotw {
                        self.failures.push(format!(
                            "does-not-exist for {} at {at:?}, which the store held",
                            name.as_str()
                        ));
                    }
                }
                _ => {}
            }
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Subscribe(t, _) | Op::Unsubscribe(t, _) if t >= self.types() => {}
            Op::Subscribe(t, n) => {
                if self.pair.client.subscribe(TYPES[t], &[NAMES[n]]).is_ok() {
                    let names = self.subscribed.entry(t).or_default();
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
            }
            Op::Unsubscribe(t, n) => {
                if self
                    .subscribed
                    .get(&t)
                    .is_some_and(|names| names.contains(&n))
                    && self.pair.client.unsubscribe(TYPES[t], &[NAMES[n]]).is_ok()
                {
                    self.subscribed.entry(t).or_default().retain(|x| *x != n);
                }
            }
            Op::Set(t, n, bad) => {
                self.seq += 1;
                let tag = if bad {
                    format!("bad{}", self.seq)
                } else {
                    self.seq.to_string()
                };
                let _ = self
                    .pair
                    .store
                    .set_entry(TYPES[t], ResourceEntry::new(NAMES[n], body(NAMES[n], &tag)));
                self.pair.record_store(TYPES[t], NAMES[n]);
                // A rejected body counts as absent for does-not-exist.
                self.history
                    .entry((t, n))
                    .or_default()
                    .push((self.pair.now(), !bad));
            }
            Op::Remove(t, n) => {
                self.pair.store.remove(TYPES[t], NAMES[n]);
                self.pair.record_store(TYPES[t], NAMES[n]);
                self.history
                    .entry((t, n))
                    .or_default()
                    .push((self.pair.now(), false));
            }
            Op::Wait(secs) => {
                if let Err(stuck) = self.pair.advance(Duration::from_secs(secs)) {
                    self.failures.push(stuck.to_string());
                }
            }
            Op::Break(secs) => {
                self.pair.break_stream();
                let _ = self.pair.advance(Duration::from_secs(secs));
                self.pair.reconnect();
            }
            Op::Step(count) => {
                for _ in 0..count {
                    self.pair.step();
                }
            }
        }
        self.pair.collect();
        self.observe();
    }

    /// After quiescence: the cache equals the store restricted to the subscription.
    fn check_convergence(&mut self) {
        for (&t, names) in &self.subscribed {
            for &n in names {
                let (type_url, name) = (TYPES[t], NAMES[n]);
                let stored = self
                    .pair
                    .store
                    .get(type_url, name)
                    .map(|r| r.body().clone());
                let cached = self
                    .pair
                    .client
                    .resource(type_url, name)
                    .map(|r| r.body_bytes());
                match (&stored, &cached) {
                    (Some(s), c) if !seq_of(s).is_some_and(|(_, bad)| bad) => {
                        let state = self.pair.client.status(type_url, name).map(|st| st.state);
                        if state == Some(xds_sansio::client::ResourceState::DoesNotExist) {
                            self.failures.push(format!(
                                "{name} of type {t} is in the store but marked does-not-exist"
                            ));
                        }
                        if c.as_ref() != Some(s) {
                            self.failures.push(format!(
                                "{name} of type {t}: cache {:?} != store {:?}",
                                c.as_deref().and_then(seq_of),
                                seq_of(s)
                            ));
                        }
                    }
                    (Some(_), Some(c)) if seq_of(c).is_some_and(|(_, bad)| bad) => {
                        self.failures
                            .push(format!("{name}: the cache holds a rejected body"));
                    }
                    (None, Some(_))
                        if !(self.setup.variant == Variant::Sotw
                            && type_url == ENDPOINT.type_url) =>
                    {
                        // SotW cannot delete non-full-state resources; every other case must.
                        self.failures.push(format!(
                            "{name} of type {t} was removed from the store but is cached"
                        ));
                    }
                    _ => {}
                }
            }
        }
    }

    fn settle(&mut self) {
        for _ in 0..3 {
            if let Err(stuck) = self.pair.drive() {
                self.failures.push(stuck.to_string());
                return;
            }
            let _ = self.pair.advance(Duration::from_millis(100));
            self.observe();
        }
    }

    fn verdict(mut self, ops: &[Op]) -> TestResult {
        for (side, view) in [
            (CheckSide::Client, self.pair.client_view()),
            (CheckSide::Server, self.pair.server_view()),
        ] {
            for v in check(view, side) {
                self.failures.push(format!(
                    "checker, {side:?} side, transcript line {}: {} ({})",
                    v.line,
                    v.rule.id(),
                    v.detail
                ));
            }
        }
        if self.failures.is_empty() {
            TestResult::passed()
        } else {
            TestResult::error(format!(
                "{:?} {:?}\n{}\n--- transcript ---\n{}",
                self.setup,
                ops,
                self.failures.join("\n"),
                self.pair.notation()
            ))
        }
    }
}

fn run(setup: Setup, ops: &[Op]) -> World {
    let mut world = World::new(setup);
    for op in ops {
        world.apply(op);
    }
    world.settle();
    world
}

fn quickcheck() -> QuickCheck {
    QuickCheck::new().max_tests(
        std::env::var("QUICKCHECK_TESTS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(300),
    )
}

#[test]
fn after_quiescence_the_cache_equals_the_store_and_both_sides_follow_the_rules() {
    fn property(setup: Setup, ops: Vec<Op>) -> TestResult {
        let mut world = run(setup, &ops);
        world.check_convergence();
        world.verdict(&ops)
    }
    quickcheck().quickcheck(property as fn(Setup, Vec<Op>) -> TestResult);
}

#[test]
fn outputs_are_a_deterministic_function_of_the_inputs() {
    fn property(setup: Setup, ops: Vec<Op>) -> bool {
        run(setup, &ops).pair.notation() == run(setup, &ops).pair.notation()
    }
    quickcheck().quickcheck(property as fn(Setup, Vec<Op>) -> bool);
}

#[test]
fn ttl_expired_resources_are_gone_and_come_back_when_resent() {
    fn property(delta: bool, ttl_secs: u8) -> TestResult {
        let ttl = Duration::from_secs(u64::from(ttl_secs % 20) + 2);
        let variant = if delta { Variant::Delta } else { Variant::Sotw };
        let setup = Setup {
            variant,
            ads: true,
            not_found_errors: false,
        };
        let mut world = World::new(setup);
        let _ = world.pair.store.set_entry(
            ENDPOINT.type_url,
            ResourceEntry::new("a", body("a", "1")).with_ttl(ttl),
        );
        world
            .pair
            .client
            .subscribe(ENDPOINT.type_url, &["a"])
            .unwrap();
        world.subscribed.insert(1, vec![0]);
        world.settle();
        if world.pair.client.resource(ENDPOINT.type_url, "a").is_none() {
            return TestResult::error("never arrived");
        }
        // Heartbeats keep it alive while the stream is up.
        let _ = world.pair.advance(ttl * 3);
        if world.pair.client.resource(ENDPOINT.type_url, "a").is_none() {
            return TestResult::error(format!(
                "expired despite heartbeats\n{}",
                world.pair.notation()
            ));
        }
        world.pair.break_stream();
        let _ = world.pair.advance(ttl + Duration::from_secs(1));
        let expired = world.pair.take_client_events().iter().any(|(_, e)| {
            matches!(
                e,
                ClientEvent::Removed {
                    reason: xds_sansio::client::RemovalReason::Expired,
                    ..
                }
            )
        });
        if !expired || world.pair.client.resource(ENDPOINT.type_url, "a").is_some() {
            return TestResult::error(format!(
                "not expired after the TTL without a stream\n{}",
                world.pair.notation()
            ));
        }
        world.pair.reconnect();
        world.settle();
        world.check_convergence();
        world.verdict(&[])
    }
    quickcheck().quickcheck(property as fn(bool, u8) -> TestResult);
}

/// Sequences the properties once found failing, kept as regression tests.
#[test]
fn regressions() {
    use Op::*;
    let cases: Vec<(Setup, Vec<Op>)> = vec![(
        Setup {
            variant: Variant::Sotw,
            ads: true,
            not_found_errors: false,
        },
        vec![
            Subscribe(0, 2),
            Unsubscribe(0, 2),
            Subscribe(0, 0),
            Set(0, 2, false),
            Step(3),
            Subscribe(0, 2),
            Remove(0, 2),
        ],
    )];
    for (setup, ops) in cases {
        let mut world = run(setup, &ops);
        world.check_convergence();
        let result = world.verdict(&ops);
        assert!(!result.is_failure() && !result.is_error(), "{result:?}");
    }
}
