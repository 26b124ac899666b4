//! Events and state never disagree: replaying `Upserted` / `Removed` onto a map gives exactly
//! the client's cache, whatever the history (both variants, wildcard, aliases, TTL,
//! rejections under both NACK policies, reconnects, timers). Also: no input sequence panics.

mod client_support;

use bytes::Bytes;
use client_support::*;
use quickcheck::{Arbitrary, Gen, QuickCheck};
use std::collections::BTreeMap;
use xds_sansio::client::{Client, ClientConfig, ClientEvent, NackPolicy};
use xds_sansio::pb::discovery::Resource;
use xds_sansio::{Transport, Variant};

const NAMES: [&str; 5] = ["a", "b", "c", "d", "*"];

#[derive(Clone, Debug)]
enum Op {
    Subscribe(usize),
    Unsubscribe(usize),
    /// (name, version, payload, ttl, body-less, alias)
    Respond(Vec<(usize, u8, u8, u8, bool, Option<usize>)>, Vec<usize>),
    Poll,
    Reconnect,
    Tick(u8),
    /// Answer the oldest pending ticket, rejecting the names whose bit is set.
    Verdict(u8),
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let name = usize::arbitrary(g) % 5;
        match u8::arbitrary(g) % 10 {
            0 | 1 => Op::Subscribe(name),
            2 => Op::Unsubscribe(name),
            3..=5 => {
                let n = usize::arbitrary(g) % 4;
                Op::Respond(
                    (0..n)
                        .map(|_| {
                            (
                                usize::arbitrary(g) % 4,
                                u8::arbitrary(g) % 3,
                                u8::arbitrary(g) % 6,
                                u8::arbitrary(g) % 4,
                                u8::arbitrary(g) % 6 == 0,
                                (u8::arbitrary(g) % 4 == 0).then(|| usize::arbitrary(g) % 4),
                            )
                        })
                        .collect(),
                    (0..usize::arbitrary(g) % 2)
                        .map(|_| usize::arbitrary(g) % 4)
                        .collect(),
                )
            }
            6 | 7 => Op::Poll,
            8 => Op::Reconnect,
            9 if bool::arbitrary(g) => Op::Verdict(u8::arbitrary(g)),
            _ => Op::Tick(u8::arbitrary(g) % 20),
        }
    }
}

fn run(ops: &[Op], variant: Variant, keep_valid: bool, deferred: bool) -> Result<(), String> {
    let mut cfg = ClientConfig::new(variant, Transport::Aggregated, node());
    if keep_valid {
        cfg.nack_policy = NackPolicy::KeepValid;
    }
    let ty = CDS;
    let mut c = Client::new(cfg);
    c.set_validator(
        ty,
        Box::new(|_: &str, _: &str, b: &Bytes| {
            if b.ends_with(b"p0") {
                Err("no".into())
            } else {
                Ok(())
            }
        }),
    );
    c.set_deferred_validation(ty, deferred);
    let mut mirror: BTreeMap<String, Bytes> = BTreeMap::new();
    let mut tickets = std::collections::VecDeque::new();
    let mut now = 0;
    let mut k = 0;
    c.connected(t(0));
    let sync = |c: &mut Client,
                mirror: &mut BTreeMap<String, Bytes>,
                tickets: &mut std::collections::VecDeque<_>,
                now: u64|
     -> Result<(), String> {
        while c.poll_request(t(now)).is_some() {}
        while let Some(ev) = c.poll_event() {
            match ev {
                ClientEvent::Upserted { name, body, .. } => {
                    mirror.insert(name.to_string(), body);
                }
                ClientEvent::ValidationNeeded { ticket, .. } => tickets.push_back(ticket),
                ClientEvent::Removed { name, .. } if mirror.remove(name.as_str()).is_none() => {
                    return Err(format!("Removed {name} that was never upserted"));
                }
                _ => {}
            }
        }
        let held: BTreeMap<String, Bytes> = c
            .resource_names(ty)
            .into_iter()
            .map(|n| {
                let body = c
                    .resource(ty, &n)
                    .map(|r| r.body_bytes())
                    .unwrap_or_default();
                (n.to_string(), body)
            })
            .collect();
        if held != *mirror {
            return Err(format!("cache {held:?} != events {mirror:?}"));
        }
        for e in c.dump() {
            if c.status(&e.type_url, &e.name).as_ref() != Some(&e.status) {
                return Err("dump and status disagree".into());
            }
        }
        Ok(())
    };
    for op in ops {
        match op {
            Op::Subscribe(n) => {
                let _ = c.subscribe(ty, &[NAMES[*n]]);
            }
            Op::Unsubscribe(n) => {
                let _ = c.unsubscribe(ty, &[NAMES[*n]]);
            }
            Op::Respond(rs, removed) => {
                k += 1;
                let nonce = format!("n{k}");
                match variant {
                    Variant::Sotw => {
                        let anys = rs
                            .iter()
                            .map(|(n, v, p, ttl, bodyless, _)| {
                                let payload = format!("p{p}");
                                if *ttl > 0 || *bodyless {
                                    wrapped(
                                        ty,
                                        NAMES[*n],
                                        &format!("v{v}"),
                                        (!bodyless).then_some(payload.as_str()),
                                        (*ttl > 0).then_some(i64::from(*ttl)),
                                    )
                                } else {
                                    any(ty, NAMES[*n], &payload)
                                }
                            })
                            .collect();
                        c.handle_response(t(now), sotw_raw(ty, &format!("V{k}"), &nonce, anys));
                    }
                    Variant::Delta => {
                        let resources: Vec<Resource> = rs
                            .iter()
                            .map(|(n, v, p, ttl, bodyless, alias)| {
                                let payload = format!("p{p}");
                                let mut r = res(
                                    ty,
                                    NAMES[*n],
                                    &format!("v{v}"),
                                    (!bodyless).then_some(payload.as_str()),
                                );
                                if *ttl > 0 {
                                    r.ttl = Some(prost_types::Duration {
                                        seconds: i64::from(*ttl),
                                        nanos: 0,
                                    });
                                }
                                if let Some(a) = alias {
                                    r.aliases = vec![format!("alias-{}", NAMES[*a])];
                                }
                                r
                            })
                            .collect();
                        let removed: Vec<&str> = removed.iter().map(|n| NAMES[*n]).collect();
                        c.handle_response(t(now), delta_raw(ty, &nonce, resources, &removed));
                    }
                }
            }
            Op::Poll => sync(&mut c, &mut mirror, &mut tickets, now)?,
            Op::Reconnect => {
                c.disconnected(t(now));
                c.connected(t(now));
            }
            Op::Verdict(mask) => {
                sync(&mut c, &mut mirror, &mut tickets, now)?;
                if let Some(ticket) = tickets.pop_front() {
                    let rejected: Vec<(&str, &str)> = NAMES
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, n)| (*n, "rejected later"))
                        .collect();
                    // A ticket voided by a reconnect is refused; anything else is accepted.
                    let _ = c.verdict(ticket, &rejected);
                }
            }
            Op::Tick(s) => {
                now += u64::from(*s);
                c.handle_timeout(t(now));
            }
        }
    }
    sync(&mut c, &mut mirror, &mut tickets, now)
}

#[test]
fn prop_events_replay_to_the_cache() {
    fn prop(ops: Vec<Op>, delta: bool, keep_valid: bool, deferred: bool) -> bool {
        let variant = if delta { Variant::Delta } else { Variant::Sotw };
        match run(&ops, variant, keep_valid, deferred) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("{e}");
                false
            }
        }
    }
    QuickCheck::new()
        .tests(1000)
        .quickcheck(prop as fn(Vec<Op>, bool, bool, bool) -> bool);
}
