//! Conversations generated from the model's state space, for differential fuzzing of a
//! real implementation (`xds-sansio conform client|server --fuzz N --seed S`), and for
//! other crates' fuzz targets (feature `arbitrary`: [`ClientOp`] and [`ServerOp`] are
//! `arbitrary::Arbitrary`).
//!
//! A case is a [`Shape`] (SotW or delta, ADS or one stream per type, which types of the
//! catalog) and a list of operations. For a real **client** ([`client_scenario`]), the
//! operations are what a management server and an application do to it: subscriptions
//! (by name, one watch at a time; the explicit and the legacy wildcard), responses (new,
//! changed and repeated bodies, duplicate and unrequested names, removals by absence and,
//! in delta, by `removed_resources`, a body of another type, stale, reused and empty
//! nonces, TTLs and heartbeats, aliases), unsubscriptions, waits and reconnects. For a
//! real **server** ([`server_scenario`]), they are what an application does to its store
//! (set, change, remove, TTLs, aliases) and what a client does (subscribe, unsubscribe,
//! ACK, NACK, reconnect). Either way the model plays the other side through a
//! [`Transcriber`], which writes every message the side under test must send as a line:
//! replayed against the real implementation (`run_against`), the first line that fails is
//! the first message where it and the model differ. [`shrink`] then removes operations
//! while the divergence stays, so the scenario written out is a minimal one.
//!
//! Decisions:
//! - **The generated side never does what the API of the side under test cannot
//!   mirror.** A server speaks of a type only after the client asked for it on the stream
//!   that is up (a client without a watch has no stream to receive on: gRPC clients and
//!   xds-client open one with their first watch), and the application subscribes one name
//!   per command, so a client that sends one request per watch and one that merges them
//!   send the same requests.
//! - **Error texts are not compared.** A NACK line says `E=*` (xDS protocol, "ACK and NACK
//!   semantics": there is an `error_detail`, its words are the implementation's).
//! - **A server's own choices are not compared**: its version and nonce strings, delta's
//!   per-resource versions (see [`Transcriber`]).
//! - **Deterministic.** The same profile and seed give the same case (SplitMix64, no
//!   global RNG).

mod client;
mod server;

pub use client::{client_case, client_scenario, ClientOp, NonceChoice, Oddity};

pub use server::{server_case, server_scenario, ServerOp};

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::script::ast::TransportSpec;
use crate::script::Transcriber;
use xds_sansio::message::Variant;
use xds_sansio::types::{ResourceType, CATALOG};

/// The names conversations use: `a`, `b`, `c`, and one nobody subscribes to.
const NAMES: [&str; 4] = ["a", "b", "c", "zz"];

/// A name by index (wrapping).
fn name_at(index: u8) -> &'static str {
    NAMES
        .get(usize::from(index) % NAMES.len())
        .copied()
        .unwrap_or("a")
}

/// The subscribable names a bit set stands for (bit 0 is `a`).
fn names_of(bits: u8) -> Vec<&'static str> {
    NAMES[..3]
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// The seconds a wait lets pass: 1 to 8, whatever the operation says, so a wait stays
/// within a few TTL periods (a real implementation is run in real time).
fn wait_seconds(seconds: u8) -> u8 {
    1 + seconds % 8
}

/// What a real implementation can be fuzzed with: the cases are drawn from it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Profile {
    /// The variants a case may use.
    pub variants: Vec<Variant>,
    /// ADS may be used.
    pub ads: bool,
    /// One stream per type may be used.
    pub per_type: bool,
    /// The types (v3 URLs) a case may use.
    pub types: Vec<String>,
    /// The wildcard subscriptions (explicit, and legacy for LDS and CDS in SotW).
    pub wildcard: bool,
    /// TTLs and heartbeats.
    pub ttl: bool,
    /// Aliases (delta).
    pub aliases: bool,
    /// For a client that follows references by itself (gRPC, junction): the chain it
    /// follows from the one name its application watches; empty for a client that
    /// subscribes to what it is told.
    pub follows: Vec<Link>,
}

/// One resource of a chain of references a client follows: its type, its name, the tags
/// of its valid bodies (each referring to the next link's name), and names the server
/// may send beside it unrequested (`name:tag`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The type URL.
    pub type_url: String,
    /// The name the previous link refers to (the first: the application's watch).
    pub name: String,
    /// Tags of valid bodies.
    pub tags: Vec<String>,
    /// Unrequested resources a response may carry, `(name, tag)`.
    pub extras: Vec<(String, String)>,
}

/// Reads a chain: links separated by `;`, each `TYPE NAME TAG... [NAME:TAG...]`, e.g.
/// `LDS echo.test l1; RDS route-1 r1; CDS cluster-1 c1 c2 other:c1; EDS cluster-1 e1`.
pub fn parse_chain(text: &str) -> Result<Vec<Link>, String> {
    let mut links = Vec::new();
    for part in text.split(';') {
        let mut words = part.split_whitespace();
        let Some(type_name) = words.next() else {
            continue;
        };
        let type_url = crate::script::resolve_type(type_name)
            .ok_or_else(|| alloc::format!("{type_name}: not a type"))?;
        let name = words
            .next()
            .ok_or_else(|| alloc::format!("{type_name}: a link needs a name"))?
            .to_string();
        let mut link = Link {
            type_url,
            name,
            tags: Vec::new(),
            extras: Vec::new(),
        };
        for word in words {
            match word.split_once(':') {
                Some((n, t)) => link.extras.push((n.into(), t.into())),
                None => link.tags.push(word.into()),
            }
        }
        if link.tags.is_empty() {
            return Err(alloc::format!(
                "{type_name} {}: a link needs a tag",
                link.name
            ));
        }
        links.push(link);
    }
    if links.is_empty() {
        return Err("an empty chain".into());
    }
    Ok(links)
}

impl Default for Profile {
    /// Everything: both variants and transports, every type of the catalog.
    fn default() -> Profile {
        Profile {
            variants: alloc::vec![Variant::Sotw, Variant::Delta],
            ads: true,
            per_type: true,
            types: CATALOG.iter().map(|t| t.type_url.to_string()).collect(),
            wildcard: true,
            ttl: true,
            aliases: true,
            follows: Vec::new(),
        }
    }
}

/// The variant, transport and types of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// SotW or delta.
    pub variant: Variant,
    /// ADS or one type's stream.
    pub transport: TransportSpec,
    /// The types the case uses (one for a per-type stream, two over ADS when the profile
    /// has two; a chain's types when the client follows one).
    pub types: Vec<String>,
    /// The chain the client follows ([`Profile::follows`]).
    pub follows: Vec<Link>,
}

impl Shape {
    /// The type an operation's type index stands for.
    fn type_at(&self, index: u8) -> &str {
        self.types
            .get(usize::from(index) % self.types.len().max(1))
            .map_or("", String::as_str)
    }
}

/// Whether a type can be spoken of in a variant: VHDS has no SotW method.
fn speaks(t: &ResourceType, variant: Variant) -> bool {
    variant == Variant::Delta || t.sotw_method.is_some()
}

/// A fixed PRNG (SplitMix64), so a seed names a case.
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

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
        let at = usize::try_from(self.next() % count.max(1)).unwrap_or(0);
        items.get(at)
    }
}

/// The shape of the case a seed names; `None` when the profile allows none (no variant,
/// no transport, or no type the variants speak).
fn draw_shape(profile: &Profile, rng: &mut SplitMix) -> Option<Shape> {
    let variant = *rng.pick(&profile.variants)?;
    if !profile.follows.is_empty() {
        // A following client subscribes to several types: over ADS.
        return profile.ads.then(|| Shape {
            variant,
            transport: TransportSpec::Ads,
            types: profile.follows.iter().map(|l| l.type_url.clone()).collect(),
            follows: profile.follows.clone(),
        });
    }
    let types: Vec<&String> = profile
        .types
        .iter()
        .filter(|url| {
            CATALOG
                .iter()
                .find(|t| t.type_url == url.as_str())
                .is_none_or(|t| speaks(t, variant))
        })
        .collect();
    let ads = match (profile.ads, profile.per_type) {
        (true, true) => rng.below(2) == 0,
        (ads, per_type) if ads || per_type => ads,
        _ => return None,
    };
    let first = (*rng.pick(&types)?).clone();
    if !ads {
        return Some(Shape {
            variant,
            transport: TransportSpec::PerType(first.clone()),
            types: alloc::vec![first],
            follows: Vec::new(),
        });
    }
    let others: Vec<&&String> = types.iter().filter(|t| ***t != first).collect();
    let mut chosen = alloc::vec![first];
    if let Some(second) = rng.pick(&others) {
        chosen.push((**second).clone());
    }
    Some(Shape {
        variant,
        transport: TransportSpec::Ads,
        types: chosen,
        follows: Vec::new(),
    })
}

/// The short name of a type, for lines.
fn short(type_url: &str) -> String {
    crate::transcript::notation::type_name(type_url)
}

/// `client subscribe|unsubscribe` lines for a set of names, one name per line (one watch
/// per command), or the wildcard's line; each is run and kept by the transcriber if the
/// model takes it.
fn interest_lines(
    transcript: &mut Transcriber,
    shape: &Shape,
    subscribe: bool,
    type_url: &str,
    names: u8,
    wildcard: bool,
) {
    let verb = if subscribe {
        "subscribe"
    } else {
        "unsubscribe"
    };
    let type_name = short(type_url);
    if wildcard {
        // The legacy wildcard is an empty subscription of LDS or CDS in SotW (seed 000,
        // "How the client specifies what resources to return"); the explicit one is `*`.
        let legacy = shape.variant == Variant::Sotw
            && names & 1 == 1
            && xds_sansio::types::TypeInfo::of(type_url)
                .known
                .is_some_and(|(t, _)| t.legacy_wildcard);
        let line = if legacy {
            alloc::format!("client {verb} {type_name}")
        } else {
            alloc::format!("client {verb} {type_name} *")
        };
        let _ = transcript.line(&line);
        return;
    }
    for name in names_of(names) {
        let _ = transcript.line(&alloc::format!("client {verb} {type_name} {name}"));
    }
}

/// Removes operations from `ops` while `still_fails` holds, greedily, from the largest
/// chunks down to single operations; at most `budget` calls of `still_fails`.
pub fn shrink<T: Clone>(
    ops: &[T],
    budget: usize,
    mut still_fails: impl FnMut(&[T]) -> bool,
) -> Vec<T> {
    let mut current: Vec<T> = ops.to_vec();
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
mod tests;
