//! Conversations for a real server: the model's client (with deferred validation, so the
//! case decides each ACK and NACK) talks to the server, and the application changes the
//! server's store; the model's server's responses are the lines the real server must
//! match (`model: both`, the real server in the model's place).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{draw_shape, interest_lines, name_at, short, Profile, Shape, SplitMix};
use crate::script::ast::Side;
use crate::script::Transcriber;
use xds_sansio::message::Variant;

/// One thing a client or the server's application does.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum ServerOp {
    /// The application sets a resource (a new one, or a new body).
    Set {
        /// The type, as an index into the shape's types.
        ty: u8,
        /// The name index (3: a name nobody subscribes to by name).
        name: u8,
        /// The body tag.
        tag: u8,
        /// With a TTL of 3 s.
        ttl: bool,
        /// Delta: with an alias (the next name).
        alias: bool,
        /// The client NACKs the responses this change brings.
        nack: bool,
    },
    /// The application removes a resource.
    Remove {
        /// The type index.
        ty: u8,
        /// The name index.
        name: u8,
    },
    /// The client subscribes, one name per request (or the wildcard).
    Subscribe {
        /// The type index.
        ty: u8,
        /// Bits of the names `a`, `b`, `c`.
        names: u8,
        /// The wildcard instead of names (bit 0 of `names`: its legacy form where there
        /// is one).
        wildcard: bool,
        /// The client NACKs the responses the subscription brings.
        nack: bool,
    },
    /// The client unsubscribes.
    Unsubscribe {
        /// The type index.
        ty: u8,
        /// Bits of the names.
        names: u8,
        /// The wildcard instead of names.
        wildcard: bool,
    },
    /// Time passes, in seconds (TTLs, heartbeats).
    Wait {
        /// Seconds.
        seconds: u8,
    },
    /// The stream breaks and the client opens a new one.
    Reconnect,
}

/// The case a seed names for a server: its shape and `len` operations; `None` when the
/// profile allows no shape.
pub fn server_case(profile: &Profile, seed: u64, len: usize) -> Option<(Shape, Vec<ServerOp>)> {
    let mut rng = SplitMix(seed);
    let shape = draw_shape(profile, &mut rng)?;
    let mut ops = Vec::with_capacity(len);
    for i in 0..len {
        let ty = rng.below(2);
        let nack = rng.below(6) == 0;
        // A case opens with a subscription: without one, nothing goes on the wire.
        let choice = if i == 0 { 10 } else { rng.below(20) };
        let op = match choice {
            0..=7 => ServerOp::Set {
                ty,
                name: rng.below(4),
                tag: rng.below(3),
                ttl: profile.ttl && rng.below(8) == 0,
                alias: profile.aliases && shape.variant == Variant::Delta && rng.below(8) == 0,
                nack,
            },
            8 | 9 => ServerOp::Remove {
                ty,
                name: rng.below(4),
            },
            10..=14 => ServerOp::Subscribe {
                ty,
                names: 1 + rng.below(7),
                wildcard: profile.wildcard && rng.below(4) == 0,
                nack,
            },
            15 => ServerOp::Unsubscribe {
                ty,
                names: 1 + rng.below(7),
                wildcard: profile.wildcard && rng.below(4) == 0,
            },
            16 | 17 => ServerOp::Wait {
                seconds: 1 + rng.below(4),
            },
            _ => ServerOp::Reconnect,
        };
        ops.push(op);
    }
    Some((shape, ops))
}

/// Plays a case to the model's server (and the model's client) and writes it as a
/// scenario (`model: both`) whose `S->C` lines are what the model's server sent, by their
/// contents.
pub fn server_scenario(title: &str, shape: &Shape, ops: &[ServerOp]) -> String {
    let mut transcript =
        Transcriber::new(title, Side::Server, shape.variant, shape.transport.clone());
    // Deferred validation: every response waits for the case's verdict.
    for type_url in &shape.types {
        let _ = transcript.line(&format!("client defer {}", short(type_url)));
    }
    for op in ops {
        let mut nack = false;
        match op {
            ServerOp::Set {
                ty,
                name,
                tag,
                ttl,
                alias,
                nack: reject,
            } => {
                nack = *reject;
                let type_url = shape.type_at(*ty);
                // No version: the store's is the body's digest, so setting the same body
                // again is no change, as in servers that version by content.
                let mut item = format!("{}:t{tag}", name_at(*name));
                if *ttl {
                    item.push_str("[ttl=3s]");
                }
                if *alias {
                    item.push_str(&format!("[alias={}]", name_at(name.wrapping_add(1))));
                }
                let _ = transcript.line(&format!("server set {} {item}", short(type_url)));
            }
            ServerOp::Remove { ty, name } => {
                let type_url = shape.type_at(*ty);
                let _ = transcript.line(&format!(
                    "server remove {} {}",
                    short(type_url),
                    name_at(*name)
                ));
            }
            ServerOp::Subscribe {
                ty,
                names,
                wildcard,
                nack: reject,
            } => {
                nack = *reject;
                let type_url = String::from(shape.type_at(*ty));
                interest_lines(&mut transcript, shape, true, &type_url, *names, *wildcard);
            }
            ServerOp::Unsubscribe {
                ty,
                names,
                wildcard,
            } => {
                let type_url = String::from(shape.type_at(*ty));
                interest_lines(&mut transcript, shape, false, &type_url, *names, *wildcard);
            }
            ServerOp::Wait { seconds } => {
                let _ = transcript.line(&format!("wait {}s", super::wait_seconds(*seconds)));
            }
            ServerOp::Reconnect => {
                let _ = transcript.line("disconnect");
                let _ = transcript.line("connect");
            }
        }
        give_verdicts(&mut transcript, nack);
    }
    transcript.text()
}

/// The verdicts on every response awaiting one: all rejected after an operation that
/// NACKs, else accepted; each verdict's request is transcribed, and may bring more.
fn give_verdicts(transcript: &mut Transcriber, nack: bool) {
    for _ in 0..16 {
        let waiting = transcript.awaiting_verdict();
        if waiting.is_empty() {
            return;
        }
        for type_url in waiting {
            let verdict = if nack { "reject" } else { "accept" };
            let line = format!("client {verdict} {}", short(&type_url));
            if transcript.line(&line).is_err() {
                return;
            }
        }
    }
}
