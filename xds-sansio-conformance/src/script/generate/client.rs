//! Conversations for a real client: the model's client answers a generated server and
//! application, and its requests are the lines the real client must match.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{draw_shape, interest_lines, name_at, short, Link, Profile, Shape, SplitMix};
use crate::script::ast::Side;
use crate::script::Transcriber;
use xds_sansio::message::Variant;
use xds_sansio::types::CATALOG;

/// One thing the server or the application does to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum ClientOp {
    /// The application subscribes to names of a type, one watch per name.
    Subscribe {
        /// The type, as an index into the shape's types.
        ty: u8,
        /// Bits of the names `a`, `b`, `c` (bit 0 is `a`).
        names: u8,
        /// The wildcard instead of names (bit 0 of `names` picks the legacy form where the
        /// type and variant have one).
        wildcard: bool,
    },
    /// The application unsubscribes from names.
    Unsubscribe {
        /// The type index.
        ty: u8,
        /// Bits of the names.
        names: u8,
        /// The wildcard instead of names.
        wildcard: bool,
    },
    /// The server sends a response (only once the client asked for its type on the
    /// stream that is up).
    Respond {
        /// The type index.
        ty: u8,
        /// The version (`v0`..).
        version: u8,
        /// Per resource: a name index (3: a name nobody asked for), a body tag, and what
        /// is odd about it.
        resources: Vec<(u8, u8, Oddity)>,
        /// Delta: bits of the names `removed_resources` lists.
        removed: u8,
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
    /// Its body's `Any` is of another type (a NACK).
    OtherType,
    /// A TTL of 3 s (SotW: wrapped in `Resource`).
    Ttl,
    /// A heartbeat: a TTL of 3 s, no body.
    Heartbeat,
    /// Delta: an alias, the next name (VHDS's on-demand names).
    Aliased,
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

/// The case a seed names for a client: its shape and `len` operations; `None` when the
/// profile allows no shape.
pub fn client_case(profile: &Profile, seed: u64, len: usize) -> Option<(Shape, Vec<ClientOp>)> {
    let mut rng = SplitMix(seed);
    let shape = draw_shape(profile, &mut rng)?;
    let mut ops = Vec::with_capacity(len);
    for i in 0..len {
        let ty = rng.below(u64::try_from(shape.types.len()).unwrap_or(1));
        let wildcard = profile.wildcard && rng.below(5) == 0;
        // A case opens with a subscription: without one, nothing goes on the wire.
        let choice = if i == 0 { 0 } else { rng.below(20) };
        let op = match choice {
            0..=3 => ClientOp::Subscribe {
                ty,
                names: 1 + rng.below(7),
                wildcard,
            },
            4 => ClientOp::Unsubscribe {
                ty,
                names: 1 + rng.below(7),
                wildcard,
            },
            5..=15 => {
                let count = rng.below(4);
                let resources = (0..count)
                    .map(|_| {
                        let oddity = match rng.below(14) {
                            0 => Oddity::OtherType,
                            1 if profile.ttl => Oddity::Ttl,
                            2 if profile.ttl => Oddity::Heartbeat,
                            3 if profile.aliases => Oddity::Aliased,
                            _ => Oddity::Plain,
                        };
                        (rng.below(4), rng.below(3), oddity)
                    })
                    .collect();
                let removed = if rng.below(3) == 0 { rng.below(8) } else { 0 };
                let nonce = match rng.below(10) {
                    0 => NonceChoice::Reused,
                    1 => NonceChoice::Empty,
                    _ => NonceChoice::Fresh,
                };
                ClientOp::Respond {
                    ty,
                    version: rng.below(4),
                    resources,
                    removed,
                    nonce,
                }
            }
            16 | 17 => ClientOp::Wait {
                seconds: 1 + rng.below(4),
            },
            _ => ClientOp::Reconnect,
        };
        ops.push(op);
    }
    Some((shape, ops))
}

/// A type of the catalog other than `type_url`, for a body of the wrong type.
fn other_type(type_url: &str) -> &'static str {
    CATALOG
        .iter()
        .map(|t| t.type_url)
        .find(|url| *url != type_url)
        .unwrap_or("")
}

/// The resources of a response: `(name, tag, oddity)` resolved from an operation's
/// indices, against the case's names or, for a following client, the chain's link.
fn resolve(link: Option<&Link>, resources: &[(u8, u8, Oddity)]) -> Vec<(String, String, Oddity)> {
    let Some(link) = link else {
        return resources
            .iter()
            .map(|(name, tag, oddity)| (name_at(*name).into(), format!("t{tag}"), *oddity))
            .collect();
    };
    let mut out: Vec<(String, String, Oddity)> = Vec::new();
    for (name, tag, oddity) in resources {
        let extra = (*name == 3)
            .then(|| {
                link.extras
                    .get(usize::from(*tag) % link.extras.len().max(1))
            })
            .flatten();
        let (name, tag) = match extra {
            Some((n, t)) => (n.clone(), t.clone()),
            None => (
                link.name.clone(),
                link.tags
                    .get(usize::from(*tag) % link.tags.len().max(1))
                    .cloned()
                    .unwrap_or_default(),
            ),
        };
        // A link has one name: a second copy would make nearly every response a
        // duplicate (a NACK); one comes only with another type's body.
        if *oddity != Oddity::OtherType && out.iter().any(|(n, _, _)| *n == name) {
            continue;
        }
        out.push((name, tag, *oddity));
    }
    out
}

/// The `S->C` line of a response.
fn response_line(
    shape: &Shape,
    type_url: &str,
    version: u8,
    resources: &[(String, String, Oddity)],
    removed: &[String],
    nonce: &str,
) -> String {
    let delta = shape.variant == Variant::Delta;
    let items: Vec<String> = resources
        .iter()
        .enumerate()
        .map(|(i, (at, tag, oddity))| {
            let versioned = if delta {
                format!("{at}@v{version}")
            } else {
                at.clone()
            };
            match oddity {
                Oddity::Plain => format!("{versioned}:{tag}"),
                Oddity::OtherType => {
                    format!("{versioned}:{tag}[type={}]", short(other_type(type_url)))
                }
                Oddity::Ttl => format!("{at}@v{version}:{tag}[ttl=3s]"),
                Oddity::Heartbeat => format!("{at}@v{version}[nobody][ttl=3s]"),
                Oddity::Aliased if delta => {
                    let alias = name_at(u8::try_from(i + 1).unwrap_or(0));
                    format!("{versioned}:{tag}[alias={alias}]")
                }
                Oddity::Aliased => format!("{versioned}:{tag}"),
            }
        })
        .collect();
    let removed = if delta {
        format!(",X={{{}}}", removed.join(","))
    } else {
        String::new()
    };
    format!(
        "S->C (V=v{version},R={{{}}}{removed},N={nonce},T={})",
        items.join(","),
        short(type_url)
    )
}

/// A following client's own subscriptions (what gRPC clients and junction do by
/// themselves), mirrored as application commands for the model's client: a link is
/// subscribed while the client holds the link before it, and unsubscribed when it no
/// longer does.
fn follow(transcript: &mut Transcriber, chain: &[Link], subscribed: &mut [bool]) {
    for _ in 0..chain.len() {
        let mut changed = false;
        for (i, (before, link)) in chain.iter().zip(chain.iter().skip(1)).enumerate() {
            let before_on = subscribed.get(i).copied().unwrap_or(false);
            let wanted = before_on && transcript.client_holds(&before.type_url, &before.name);
            let Some(on) = subscribed.get_mut(i + 1) else {
                continue;
            };
            if wanted != *on {
                let verb = if wanted { "subscribe" } else { "unsubscribe" };
                let line = format!("client {verb} {} {}", short(&link.type_url), link.name);
                if transcript.line(&line).is_ok() {
                    *on = wanted;
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

/// Plays a case to the model's client and writes it as a scenario (`model: client`) whose
/// `C->S` lines are exactly what the model sent in reply.
pub fn client_scenario(title: &str, shape: &Shape, ops: &[ClientOp]) -> String {
    let mut transcript =
        Transcriber::new(title, Side::Client, shape.variant, shape.transport.clone());
    let mut nonces = 0u32;
    let mut last_nonce = String::new();
    let chain = &shape.follows;
    let mut subscribed = alloc::vec![false; chain.len()];
    // A following client is made for its watch: the first name is watched from the start.
    if let Some(first) = chain.first() {
        let line = format!("client subscribe {} {}", short(&first.type_url), first.name);
        let watched = transcript.line(&line).is_ok();
        if let Some(on) = subscribed.first_mut() {
            *on = watched;
        }
    }
    for op in ops {
        match op {
            ClientOp::Subscribe {
                ty,
                names,
                wildcard,
            }
            | ClientOp::Unsubscribe {
                ty,
                names,
                wildcard,
            } => {
                let subscribe = matches!(op, ClientOp::Subscribe { .. });
                if let Some(first) = chain.first() {
                    // The application of a following client watches the chain's first
                    // name, and keeps watching: its last watch ends with the client (a
                    // gRPC channel closed takes its xDS client with it), which sends no
                    // request a model could match.
                    let line =
                        format!("client subscribe {} {}", short(&first.type_url), first.name);
                    if let Some(on) = subscribed.first_mut() {
                        if subscribe && !*on && transcript.line(&line).is_ok() {
                            *on = true;
                        }
                    }
                } else {
                    let type_url = String::from(shape.type_at(*ty));
                    interest_lines(
                        &mut transcript,
                        shape,
                        subscribe,
                        &type_url,
                        *names,
                        *wildcard,
                    );
                }
            }
            ClientOp::Respond {
                ty,
                version,
                resources,
                removed,
                nonce,
            } => {
                // A following client's response goes to one of the links it subscribes
                // to now, so the chain's deeper links are reached.
                let live: Vec<&Link> = chain
                    .iter()
                    .zip(&subscribed)
                    .filter(|(l, on)| **on && transcript.requested(&l.type_url))
                    .map(|(l, _)| l)
                    .collect();
                let link = (!chain.is_empty())
                    .then(|| live.get(usize::from(*ty) % live.len().max(1)).copied())
                    .flatten();
                let type_url = match link {
                    Some(link) => link.type_url.clone(),
                    None if chain.is_empty() => String::from(shape.type_at(*ty)),
                    None => continue,
                };
                if !transcript.requested(&type_url) {
                    continue;
                }
                let items = resolve(link, resources);
                let removed: Vec<String> = match link {
                    Some(link) if *removed != 0 => alloc::vec![link.name.clone()],
                    Some(_) => Vec::new(),
                    None => super::names_of(*removed)
                        .into_iter()
                        .map(String::from)
                        .collect(),
                };
                let nonce = match nonce {
                    NonceChoice::Fresh => {
                        nonces += 1;
                        format!("n{nonces}")
                    }
                    NonceChoice::Reused if !last_nonce.is_empty() => last_nonce.clone(),
                    NonceChoice::Reused | NonceChoice::Empty => String::new(),
                };
                let line = response_line(shape, &type_url, *version, &items, &removed, &nonce);
                if transcript.line(&line).is_ok() && !nonce.is_empty() {
                    last_nonce = nonce;
                }
            }
            ClientOp::Wait { seconds } => {
                let _ = transcript.line(&format!("wait {}s", super::wait_seconds(*seconds)));
            }
            ClientOp::Reconnect => {
                let _ = transcript.line("disconnect");
                let _ = transcript.line("connect");
            }
        }
        follow(&mut transcript, chain, &mut subscribed);
    }
    transcript.text()
}
