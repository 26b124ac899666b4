//! Conversations generated from the model's state space, for differential fuzzing of a
//! real client (`xds-sansio conform client --fuzz N --seed S`), and for other crates'
//! fuzz targets (feature `arbitrary`: [`Op`] is `arbitrary::Arbitrary`).
//!
//! A conversation is what a management server and an application do to a client:
//! subscriptions and unsubscriptions, responses (new, changed and repeated bodies,
//! duplicate and unrequested names, removals by absence, a resource of another type,
//! stale and reused nonces, TTLs and heartbeats), waits and reconnects. [`client_scenario`]
//! plays it to the model's client and writes it as a scenario (`model: client`) whose
//! `C->S` lines are exactly what the model sent in reply: replayed against a real client
//! (`run_against`), the first line that fails is the first message where the real client
//! and the model differ. [`shrink`] then removes operations while the divergence stays,
//! so the scenario written out is a minimal one that reproduces it.
//!
//! Decisions:
//! - **SotW over ADS, CDS and EDS**, the subset every client speaks; names from a small
//!   set, so that subscriptions, responses and removals meet.
//! - **Error texts are not compared.** A NACK line says `E=*`: implementations word their
//!   `error_detail` differently, and the protocol fixes only that there is one (xDS
//!   protocol, "ACK and NACK semantics").
//! - **Deterministic.** The same seed gives the same conversation ([`random_ops`] is
//!   SplitMix64, no global RNG).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use crate::client::{Client, ClientConfig};
use crate::message::{Request, Response, Transport, Variant};
use crate::pb::discovery::{DiscoveryResponse, Resource};
use crate::pb::envoy::config::core::v3::Node;
use crate::pb::google::protobuf::{Any, Duration as PbDuration};
use crate::testing::Sim;
use crate::transcript::notation;
use crate::types::{CLUSTER, ENDPOINT, RESOURCE_WRAPPER_TYPE_URL};

/// The names conversations use.
const NAMES: [&str; 3] = ["a", "b", "c"];

/// One thing the server or the application does.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Op {
    /// The application subscribes to names of a type (none: the legacy wildcard of CDS).
    Subscribe {
        /// `false`: CDS, `true`: EDS.
        eds: bool,
        /// Bits of the names `a`, `b`, `c` (bit 0 is `a`).
        names: u8,
    },
    /// The application unsubscribes from names.
    Unsubscribe {
        /// `false`: CDS, `true`: EDS.
        eds: bool,
        /// Bits of the names.
        names: u8,
    },
    /// The server sends a response.
    Respond {
        /// `false`: CDS, `true`: EDS.
        eds: bool,
        /// The version (`v0`..).
        version: u8,
        /// Per resource: a name index, a body tag, and what is odd about it.
        resources: Vec<(u8, u8, Oddity)>,
        /// Which nonce it carries.
        nonce: NonceChoice,
    },
    /// Time passes, in seconds (timers: does-not-exist, TTL expiry).
    Wait {
        /// Seconds.
        seconds: u8,
    },
    /// The stream breaks and a new one comes up.
    Reconnect,
}

/// What is odd about a resource of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Oddity {
    /// Nothing.
    Plain,
    /// Its body's `Any` is of the other type (a NACK).
    OtherType,
    /// Wrapped in `Resource` with a TTL of 5 s.
    Ttl,
    /// A heartbeat: wrapped, a TTL of 5 s, no body.
    Heartbeat,
}

/// The nonce of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum NonceChoice {
    /// A new one.
    Fresh,
    /// The previous response's again (the server's fault; the client must still answer).
    Reused,
    /// None at all.
    Empty,
}

/// A fixed PRNG (SplitMix64), so a seed names a conversation.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u8 {
        u8::try_from(self.next() % n.max(1)).unwrap_or(0)
    }
}

/// A conversation of `len` operations drawn from `seed`.
pub fn random_ops(seed: u64, len: usize) -> Vec<Op> {
    let mut rng = SplitMix(seed);
    let mut ops = Vec::with_capacity(len);
    for _ in 0..len {
        let eds = rng.below(2) == 1;
        let op = match rng.below(20) {
            0..=3 => Op::Subscribe {
                eds,
                names: rng.below(8),
            },
            4 => Op::Unsubscribe {
                eds,
                names: 1 + rng.below(7),
            },
            5..=15 => {
                let count = rng.below(4);
                let resources = (0..count)
                    .map(|_| {
                        let oddity = match rng.below(12) {
                            0 => Oddity::OtherType,
                            1 => Oddity::Ttl,
                            2 => Oddity::Heartbeat,
                            _ => Oddity::Plain,
                        };
                        (rng.below(4), rng.below(3), oddity)
                    })
                    .collect();
                let nonce = match rng.below(10) {
                    0 => NonceChoice::Reused,
                    1 => NonceChoice::Empty,
                    _ => NonceChoice::Fresh,
                };
                Op::Respond {
                    eds,
                    version: rng.below(4),
                    resources,
                    nonce,
                }
            }
            16 | 17 => Op::Wait {
                seconds: 1 + rng.below(6),
            },
            _ => Op::Reconnect,
        };
        ops.push(op);
    }
    ops
}

fn type_of(eds: bool) -> &'static str {
    if eds {
        ENDPOINT.type_url
    } else {
        CLUSTER.type_url
    }
}

fn names_of(bits: u8) -> Vec<&'static str> {
    NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// A resource name: `a`, `b` or `c`, or (index 3) one nobody asked for.
fn name_at(index: u8) -> &'static str {
    NAMES.get(usize::from(index)).copied().unwrap_or("zz")
}

fn ttl() -> PbDuration {
    PbDuration {
        seconds: 5,
        nanos: 0,
    }
}

/// The response an operation stands for.
fn response(
    eds: bool,
    version: u8,
    resources: &[(u8, u8, Oddity)],
    nonce: &str,
) -> DiscoveryResponse {
    let type_url = type_of(eds);
    let other = type_of(!eds);
    let resources = resources
        .iter()
        .map(|(name, tag, oddity)| {
            let name = name_at(*name);
            let body = notation::body(name, &format!("t{tag}"));
            match oddity {
                Oddity::Plain => Any {
                    type_url: type_url.into(),
                    value: body,
                },
                Oddity::OtherType => Any {
                    type_url: other.into(),
                    value: body,
                },
                Oddity::Ttl | Oddity::Heartbeat => {
                    let wrapper = Resource {
                        name: name.into(),
                        version: format!("v{version}"),
                        resource: (*oddity == Oddity::Ttl).then(|| Any {
                            type_url: type_url.into(),
                            value: body,
                        }),
                        ttl: Some(ttl()),
                        ..Default::default()
                    };
                    Any {
                        type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
                        value: prost::Message::encode_to_vec(&wrapper).into(),
                    }
                }
            }
        })
        .collect();
    DiscoveryResponse {
        version_info: format!("v{version}"),
        resources,
        type_url: type_url.into(),
        nonce: nonce.into(),
        ..Default::default()
    }
}

/// The response line of an operation, in the notation (the resource attributes the
/// generic rendering leaves out, such as `[type=..]`, written out).
fn response_line(eds: bool, version: u8, resources: &[(u8, u8, Oddity)], nonce: &str) -> String {
    let items: Vec<String> = resources
        .iter()
        .map(|(name, tag, oddity)| {
            let name = name_at(*name);
            match oddity {
                Oddity::Plain => format!("{name}:t{tag}"),
                Oddity::OtherType => {
                    format!("{name}:t{tag}[type={}]", notation::type_name(type_of(!eds)))
                }
                Oddity::Ttl => format!("{name}@v{version}:t{tag}[ttl=5s]"),
                Oddity::Heartbeat => format!("{name}@v{version}[nobody][ttl=5s]"),
            }
        })
        .collect();
    format!(
        "S->C (V=v{version},R={{{}}},N={nonce},T={})",
        items.join(","),
        notation::type_name(type_of(eds))
    )
}

/// A request the model sent, as a line that checks it: every field, the error's
/// presence only.
fn request_line(request: &Request) -> String {
    match request {
        Request::Sotw(r) if r.error_detail.is_some() => {
            let mut plain = r.clone();
            plain.error_detail = None;
            let text = notation::sotw_request(&plain);
            let body = text.strip_suffix(')').unwrap_or(&text);
            format!("C->S {body},E=*)")
        }
        other => format!("C->S {}", notation::request(other)),
    }
}

/// Plays `ops` to the model's client and writes the conversation as a scenario in which
/// the model plays the client: what the server and the application do, and every request
/// the model sent in reply, in order.
pub fn client_scenario(title: &str, ops: &[Op]) -> String {
    let node = Node {
        id: "client".into(),
        ..Node::default()
    };
    let config = ClientConfig::new(Variant::Sotw, Transport::Aggregated, node);
    let mut sim = Sim::new(Some(Client::new(config)), None);
    let mut lines: Vec<String> = Vec::new();
    lines.push(format!("title: {title}"));
    lines.push("model: client".into());
    lines.push("variant: sotw".into());
    lines.push("transport: ads".into());
    lines.push(String::new());
    let mut nonces = 0u32;
    let mut last_nonce = String::new();
    let took = |sim: &mut Sim, lines: &mut Vec<String>| {
        while let Some((_, request)) = sim.take_request() {
            lines.push(request_line(&request));
        }
        let _ = sim.take_client_events();
    };
    took(&mut sim, &mut lines);
    for op in ops {
        match op {
            Op::Subscribe { eds, names } | Op::Unsubscribe { eds, names } => {
                let subscribe = matches!(op, Op::Subscribe { .. });
                let type_url = type_of(*eds);
                let names = names_of(*names);
                // EDS has no legacy wildcard: an empty subscription is not one.
                if names.is_empty() && (*eds || !subscribe) {
                    continue;
                }
                let Some(client) = sim.client.as_mut() else {
                    continue;
                };
                let result = if subscribe {
                    client.subscribe(type_url, &names)
                } else {
                    client.unsubscribe(type_url, &names)
                };
                if result.is_err() {
                    continue;
                }
                sim.drain();
                let verb = if subscribe {
                    "subscribe"
                } else {
                    "unsubscribe"
                };
                lines.push(
                    format!(
                        "client {verb} {} {}",
                        notation::type_name(type_url),
                        names.join(" ")
                    )
                    .trim_end()
                    .to_string(),
                );
            }
            Op::Respond {
                eds,
                version,
                resources,
                nonce,
            } => {
                let nonce = match nonce {
                    NonceChoice::Fresh => {
                        nonces += 1;
                        format!("n{nonces}")
                    }
                    NonceChoice::Reused if !last_nonce.is_empty() => last_nonce.clone(),
                    NonceChoice::Reused | NonceChoice::Empty => String::new(),
                };
                if !nonce.is_empty() {
                    last_nonce = nonce.clone();
                }
                let message = Response::Sotw(response(*eds, *version, resources, &nonce));
                lines.push(response_line(*eds, *version, resources, &nonce));
                sim.deliver_responses([message]);
            }
            Op::Wait { seconds } => {
                let until = sim.now() + Duration::from_secs(u64::from(*seconds));
                if sim.fire_timers_until(until).is_err() {
                    break;
                }
                lines.push(format!("wait {seconds}s"));
            }
            Op::Reconnect => {
                sim.break_stream();
                sim.reconnect();
                lines.push("disconnect".into());
                lines.push("connect".into());
            }
        }
        took(&mut sim, &mut lines);
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// Removes operations from `ops` while `still_fails` holds, greedily, from the largest
/// chunks down to single operations; at most `budget` calls of `still_fails`.
pub fn shrink(ops: &[Op], budget: usize, mut still_fails: impl FnMut(&[Op]) -> bool) -> Vec<Op> {
    let mut current: Vec<Op> = ops.to_vec();
    let mut calls = 0usize;
    let mut chunk = current.len().div_ceil(2).max(1);
    loop {
        let mut start = 0;
        let mut removed = false;
        while start < current.len() {
            if calls >= budget {
                return current;
            }
            let end = (start + chunk).min(current.len());
            let mut candidate = current.clone();
            candidate.drain(start..end);
            calls += 1;
            if still_fails(&candidate) {
                current = candidate;
                removed = true;
            } else {
                start += chunk;
            }
        }
        if chunk == 1 && !removed {
            return current;
        }
        chunk = (chunk / 2).max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_scenarios_replay_on_the_model() {
        for seed in 0..200u64 {
            let ops = random_ops(seed, 12);
            let text = client_scenario(&format!("seed {seed}"), &ops);
            let scenario = crate::script::parse(&text, "fuzz")
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
            let report = crate::script::run(&scenario);
            assert!(report.passed(), "seed {seed}:\n{text}\n{report:?}");
        }
    }

    /// What another crate's `cargo fuzz` target does with its input: operations taken
    /// from the bytes one after another, each conversation passes on the model.
    #[cfg(feature = "arbitrary")]
    #[test]
    fn arbitrary_input_makes_conversations_that_replay_on_the_model() {
        use arbitrary::{Arbitrary, Unstructured};
        let mut total = 0;
        let mut kinds = [false; 5];
        for seed in 0..200u64 {
            let mut rng = SplitMix(seed);
            let bytes: Vec<u8> = (0..256).map(|_| rng.below(256)).collect();
            let mut u = Unstructured::new(&bytes);
            let mut ops = Vec::new();
            while !u.is_empty() && ops.len() < 24 {
                let Ok(op) = Op::arbitrary(&mut u) else { break };
                kinds[match op {
                    Op::Subscribe { .. } => 0,
                    Op::Unsubscribe { .. } => 1,
                    Op::Respond { .. } => 2,
                    Op::Wait { .. } => 3,
                    Op::Reconnect => 4,
                }] = true;
                ops.push(op);
            }
            total += ops.len();
            let text = client_scenario("arbitrary", &ops);
            let scenario = crate::script::parse(&text, "fuzz").unwrap();
            assert!(crate::script::run(&scenario).passed(), "{text}");
        }
        assert!(total > 1000, "{total} operations");
        assert_eq!(kinds, [true; 5]);
    }

    #[test]
    fn the_same_seed_is_the_same_conversation() {
        assert_eq!(random_ops(7, 20), random_ops(7, 20));
        assert_ne!(random_ops(7, 20), random_ops(8, 20));
    }

    #[test]
    fn shrinking_keeps_what_fails_and_drops_the_rest() {
        let ops = random_ops(3, 30);
        let needle = ops[17].clone();
        let shrunk = shrink(&ops, 500, |candidate| candidate.contains(&needle));
        assert_eq!(shrunk, [needle]);
    }
}
